//! Files -> decoded bytes -> blocks of whole lines -> physical lines.
//!
//! gzip is told by its magic bytes (whatever the name) and decoded member after member; a
//! damaged stream keeps every byte that decoded before the damage and says how many compressed
//! bytes could not be read. Blocks end at a newline (but a file's last); lines end at `\n`, one
//! `\r` before it is removed (CRLF), a final empty piece after a trailing `\n` is no line, a last
//! line without `\n` is kept whole (a lone final `\r` too); `\r` inside a line and NUL bytes are
//! kept. Bytes that are not UTF-8 become U+FFFD.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use flate2::{Crc, Decompress, FlushDecompress, Status};

const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];
const READ_PIECE: usize = 1 << 20;
const TRUNCATED: &str = "the compressed data ends before the end-of-stream marker";

/// Why a file stopped before its end (everything before it was read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Problem {
    /// The file could not be read (the operating system's reason).
    Io(String),
    /// A gzip stream stopped decoding: why, and how many compressed bytes were left unread.
    Gzip(String),
}

/// The decoded bytes of one file, a piece at a time.
pub struct Pieces {
    file: File,
    /// The file's size when opened, and the bytes read of it (a plain file's)
    size: u64,
    read: u64,
    head: Vec<u8>,
    gzip: Option<Gzip>,
    problem: Option<Problem>,
    finished: bool,
}

impl Pieces {
    /// Open `path`; gzip when its first bytes are gzip's magic.
    pub fn open(path: &Path) -> io::Result<Pieces> {
        let mut file = File::open(path)?;
        let mut magic = [0u8; 2];
        let got = read_full(&mut file, &mut magic)?;
        let size = file.metadata().map(|m| m.len()).unwrap_or(0);
        let head = magic[..got].to_vec();
        let gzip = (got == 2 && magic == GZIP_MAGIC).then(|| Gzip::new(size));
        Ok(Pieces {
            file,
            size,
            read: got as u64,
            head,
            gzip,
            problem: None,
            finished: false,
        })
    }

    /// The next piece of at most `max` (> 0) decoded bytes put at the end of `out` (a plain
    /// file's read there directly); false at the end. Errors as `next_piece`.
    pub fn next_piece_onto(&mut self, out: &mut Vec<u8>, max: usize) -> Result<bool, Problem> {
        if let Some(problem) = self.problem.take() {
            self.finished = true;
            return Err(problem);
        }
        if self.finished {
            return Ok(false);
        }
        if self.gzip.is_some() {
            return match self.next_piece(max)? {
                Some(piece) if out.is_empty() && out.capacity() < piece.len() => {
                    *out = piece;
                    Ok(true)
                }
                Some(piece) => {
                    out.extend_from_slice(&piece);
                    Ok(true)
                }
                None => Ok(false),
            };
        }
        // (the bytes read to tell gzip come first)
        let before = out.len();
        out.append(&mut self.head);
        let want = max.max(1).saturating_sub(out.len() - before);
        let (room, from) = (self.room(want), out.len());
        let result = plain_onto(&mut self.file, out, want, room);
        self.read += (out.len() - from) as u64;
        match result {
            Ok(_) if out.len() == before => {
                self.finished = true;
                Ok(false)
            }
            Ok(_) => Ok(true),
            Err(error) => {
                let problem = Problem::Io(error.to_string());
                if out.len() == before {
                    self.finished = true;
                    return Err(problem);
                }
                self.problem = Some(problem);
                Ok(true)
            }
        }
    }

    /// The room to make for the next `want` bytes: what is left of a plain file's size (read
    /// without growing the buffer, which would copy it), else a first share that grows as
    /// the bytes come (a small file costs its own size, not a chunk's).
    pub fn room(&self, want: usize) -> usize {
        match self.left() {
            Some(left) if left > 0 => want.min(left),
            _ => want.min(FIRST_ROOM),
        }
    }

    /// The bytes of a plain file not handed out yet: the first bytes read to tell gzip, and
    /// those not read (None for gzip, whose decoded size is not known).
    pub fn left(&self) -> Option<usize> {
        let unread = usize::try_from(self.size.saturating_sub(self.read)).unwrap_or(usize::MAX);
        match self.gzip {
            None => Some(unread.saturating_add(self.head.len())),
            Some(_) => None,
        }
    }

    /// The next piece of at most `max` (> 0) decoded bytes; None at the end. When the file
    /// stops early, every byte that was read comes first, then `Err` once.
    pub fn next_piece(&mut self, max: usize) -> Result<Option<Vec<u8>>, Problem> {
        if let Some(problem) = self.problem.take() {
            self.finished = true;
            return Err(problem);
        }
        if self.finished {
            return Ok(None);
        }
        let max = max.max(1);
        let Some(gzip) = self.gzip.as_mut() else {
            // (a plain file's piece is read as `next_piece_onto` reads it, into a new buffer)
            let mut piece = Vec::new();
            return Ok(self.next_piece_onto(&mut piece, max)?.then_some(piece));
        };
        let head = std::mem::take(&mut self.head);
        gzip.input.extend_from_slice(&head);
        match gzip.next(&mut self.file, max) {
            Ok(Some(piece)) => Ok(Some(piece)),
            Ok(None) => {
                self.finished = true;
                Ok(None)
            }
            Err((good, problem)) => {
                if good.is_empty() {
                    self.finished = true;
                    return Err(problem);
                }
                self.problem = Some(problem);
                Ok(Some(good))
            }
        }
    }
}

type Step = Result<Option<Vec<u8>>, (Vec<u8>, Problem)>;

/// Room a piece is first given (it grows as bytes come, up to the chunk's size): a small
/// file costs its own size, not a chunk's.
const FIRST_ROOM: usize = 1 << 20;

/// Read at most `want` more bytes of a plain file onto the end of `out`, with `room` made
/// first (more is made as the bytes come); what was read before an error stays in `out`.
fn plain_onto(file: &mut File, out: &mut Vec<u8>, want: usize, room: usize) -> io::Result<usize> {
    if want == 0 {
        return Ok(0);
    }
    out.reserve(room);
    file.take(want as u64).read_to_end(out)
}

fn read_full(file: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Member {
    /// Before a member's header (`fed`: some of it was read).
    Header,
    Body,
    Trailer,
}

/// A gzip stream: members one after the other (RFC 1952), each a raw deflate stream between
/// a header and a CRC-32 + size trailer.
struct Gzip {
    input: Vec<u8>,
    at: usize,
    eof: bool,
    size: u64,
    read: u64,
    state: Member,
    inflate: Decompress,
    crc: Crc,
}

impl Gzip {
    fn new(size: u64) -> Gzip {
        Gzip {
            input: Vec::new(),
            at: 0,
            eof: false,
            size,
            read: 2,
            state: Member::Header,
            inflate: Decompress::new(false),
            crc: Crc::new(),
        }
    }

    fn available(&self) -> &[u8] {
        &self.input[self.at..]
    }

    /// Read more compressed bytes; false at the end of the file.
    fn fill(&mut self, file: &mut File) -> Result<bool, Problem> {
        if self.eof {
            return Ok(false);
        }
        if self.at > 0 {
            self.input.drain(..self.at);
            self.at = 0;
        }
        let start = self.input.len();
        self.input.resize(start + READ_PIECE, 0);
        let got = read_full(file, &mut self.input[start..]).map_err(|e| Problem::Io(e.to_string()));
        let got = match got {
            Ok(n) => n,
            Err(problem) => {
                self.input.truncate(start);
                return Err(problem);
            }
        };
        self.input.truncate(start + got);
        self.read += got as u64;
        if got == 0 {
            self.eof = true;
        }
        Ok(got > 0)
    }

    fn unread(&self) -> u64 {
        self.available().len() as u64 + self.size.saturating_sub(self.read)
    }

    fn corrupt(&self, why: &str) -> Problem {
        Problem::Gzip(format!(
            "{why}; {} compressed byte(s) unreadable",
            self.unread()
        ))
    }

    fn next(&mut self, file: &mut File, max: usize) -> Step {
        let mut out = vec![0u8; max.min(FIRST_ROOM)];
        let mut written = 0usize;
        loop {
            match self.state {
                Member::Header => {
                    if self.available().is_empty() {
                        match self.fill(file) {
                            Ok(true) => continue,
                            Ok(false) => break,
                            Err(problem) => return Err((take(out, written), problem)),
                        }
                    }
                    match header_length(self.available()) {
                        Header::Complete(n) => {
                            self.at += n;
                            self.state = Member::Body;
                            self.inflate.reset(false);
                            self.crc.reset();
                        }
                        Header::Partial => match self.fill(file) {
                            Ok(true) => continue,
                            Ok(false) => {
                                return Err((
                                    take(out, written),
                                    Problem::Gzip(TRUNCATED.to_string()),
                                ))
                            }
                            Err(problem) => return Err((take(out, written), problem)),
                        },
                        Header::Bad(why) => {
                            return Err((take(out, written), self.corrupt(why)));
                        }
                    }
                }
                Member::Body => {
                    if written == out.len() {
                        if written == max {
                            break;
                        }
                        out.resize((2 * written).min(max), 0);
                    }
                    let before_in = self.inflate.total_in();
                    let before_out = self.inflate.total_out();
                    let input = &self.input[self.at..];
                    let status =
                        self.inflate
                            .decompress(input, &mut out[written..], FlushDecompress::None);
                    let used = (self.inflate.total_in() - before_in) as usize;
                    let made = (self.inflate.total_out() - before_out) as usize;
                    self.crc.update(&out[written..written + made]);
                    written += made;
                    self.at += used;
                    match status {
                        Ok(Status::StreamEnd) => self.state = Member::Trailer,
                        Ok(_) if used == 0 && made == 0 => match self.fill(file) {
                            Ok(true) => {}
                            Ok(false) => {
                                return Err((
                                    take(out, written),
                                    Problem::Gzip(TRUNCATED.to_string()),
                                ))
                            }
                            Err(problem) => return Err((take(out, written), problem)),
                        },
                        Ok(_) => {}
                        Err(_) => {
                            return Err((
                                take(out, written),
                                self.corrupt("invalid compressed data"),
                            ));
                        }
                    }
                }
                Member::Trailer => {
                    if self.available().len() < 8 {
                        match self.fill(file) {
                            Ok(true) => continue,
                            Ok(false) => {
                                return Err((
                                    take(out, written),
                                    Problem::Gzip(TRUNCATED.to_string()),
                                ))
                            }
                            Err(problem) => return Err((take(out, written), problem)),
                        }
                    }
                    let trailer = &self.available()[..8];
                    let crc = u32::from_le_bytes([trailer[0], trailer[1], trailer[2], trailer[3]]);
                    let size = u32::from_le_bytes([trailer[4], trailer[5], trailer[6], trailer[7]]);
                    self.at += 8;
                    if crc != self.crc.sum() {
                        return Err((take(out, written), self.corrupt("incorrect data check")));
                    }
                    if size != self.crc.amount() {
                        return Err((take(out, written), self.corrupt("incorrect length check")));
                    }
                    self.state = Member::Header;
                }
            }
        }
        Ok((written > 0).then(|| take(out, written)))
    }
}

fn take(mut out: Vec<u8>, written: usize) -> Vec<u8> {
    out.truncate(written);
    out
}

enum Header {
    Complete(usize),
    Partial,
    Bad(&'static str),
}

/// The length of a gzip member header at the start of `b` (RFC 1952 2.3).
fn header_length(b: &[u8]) -> Header {
    const FHCRC: u8 = 2;
    const FEXTRA: u8 = 4;
    const FNAME: u8 = 8;
    const FCOMMENT: u8 = 16;
    if (!b.is_empty() && b[0] != GZIP_MAGIC[0]) || (b.len() > 1 && b[1] != GZIP_MAGIC[1]) {
        return Header::Bad("incorrect header check");
    }
    if b.len() < 10 {
        return Header::Partial;
    }
    if b[2] != 8 {
        return Header::Bad("unknown compression method");
    }
    let flags = b[3];
    let mut at = 10;
    if flags & FEXTRA != 0 {
        if b.len() < at + 2 {
            return Header::Partial;
        }
        at += 2 + usize::from(u16::from_le_bytes([b[at], b[at + 1]]));
    }
    for flag in [FNAME, FCOMMENT] {
        if flags & flag != 0 {
            match b.get(at..).and_then(|rest| memchr::memchr(0, rest)) {
                Some(end) => at += end + 1,
                None => return Header::Partial,
            }
        }
    }
    if flags & FHCRC != 0 {
        at += 2;
    }
    if b.len() < at {
        return Header::Partial;
    }
    Header::Complete(at)
}

/// The first `size` decoded bytes of a file, and why it stopped before them (gzip damage, a
/// read error), if it did.
pub fn head(path: &Path, size: usize) -> io::Result<(Vec<u8>, Option<String>)> {
    let mut pieces = Pieces::open(path)?;
    let mut head = Vec::new();
    while head.len() < size {
        match pieces.next_piece(size - head.len()) {
            Ok(Some(piece)) => head.extend_from_slice(&piece),
            Ok(None) => break,
            Err(Problem::Gzip(why) | Problem::Io(why)) => return Ok((head, Some(why))),
        }
    }
    Ok((head, None))
}

/// Buffers of lines that were parsed and are no longer needed, kept for the next pieces to be
/// read into: their pages are mapped already, so reading costs no page faults. Small buffers
/// are not kept, nor more than a few.
#[derive(Default)]
pub struct Spare {
    kept: Mutex<Vec<Vec<u8>>>,
    /// Whether a buffer was ever given back (else the texts read go elsewhere, as a chunk's
    /// output that takes them).
    given: AtomicBool,
}

/// The most buffers a `Spare` keeps, and the least room a buffer it keeps has.
const SPARE_MOST: usize = 6;
const SPARE_LEAST: usize = 1 << 20;

impl Spare {
    /// An empty buffer with room for `least` bytes: a kept one, else a new one (a kept buffer
    /// with too little room is not grown, which would copy it). A buffer under the least room
    /// kept is always a new one with just that room: a small file's lines do not hold a large
    /// buffer.
    pub fn take(&self, least: usize) -> Vec<u8> {
        if least < SPARE_LEAST {
            return Vec::with_capacity(least);
        }
        // (the one with the least room that is enough)
        let kept = self.kept.lock().ok().and_then(|mut kept| {
            let (at, _) = kept
                .iter()
                .enumerate()
                .filter(|(_, b)| b.capacity() >= least)
                .min_by_key(|(_, b)| b.capacity())?;
            Some(kept.swap_remove(at))
        });
        // (a new one has room to the next MiB, so that a text a few bytes longer fits too)
        kept.unwrap_or_else(|| Vec::with_capacity(least.next_multiple_of(SPARE_LEAST)))
    }

    /// A text whose lines are done with (kept when it is large: the largest few are kept).
    pub fn give(&self, text: String) {
        let mut buffer = text.into_bytes();
        if buffer.capacity() < SPARE_LEAST {
            return;
        }
        self.given.store(true, Ordering::Relaxed);
        buffer.clear();
        if let Ok(mut kept) = self.kept.lock() {
            kept.push(buffer);
            if kept.len() > SPARE_MOST {
                let smallest = (0..kept.len()).min_by_key(|&i| kept[i].capacity());
                if let Some(at) = smallest {
                    kept.swap_remove(at);
                }
            }
        }
    }

    /// `s` copied into a kept buffer's room, when one has enough.
    pub fn copy(&self, s: &str) -> String {
        let mut text = String::from_utf8(self.take(s.len())).unwrap_or_default();
        text.push_str(s);
        text
    }

    /// Whether texts come back to be read into again (then a text keeps its spare room).
    pub fn recycles(&self) -> bool {
        self.given.load(Ordering::Relaxed)
    }
}

/// A file's bytes in blocks of about `size` bytes that end at a newline (but the last); a
/// short remainder at the end (under half a block) goes with the block before it.
pub struct Blocks {
    pieces: Pieces,
    spare: Arc<Spare>,
    size: usize,
    carry: Vec<u8>,
    ready: Vec<u8>,
    ended: bool,
    tail: Vec<Vec<u8>>,
    pub problem: Option<Problem>,
}

impl Blocks {
    pub fn new(pieces: Pieces, size: usize, spare: Arc<Spare>) -> Blocks {
        Blocks {
            pieces,
            spare,
            size: size.max(1),
            carry: Vec::new(),
            ready: Vec::new(),
            ended: false,
            tail: Vec::new(),
            problem: None,
        }
    }
}

impl Blocks {
    /// The room to make for a block's next bytes: a piece's; or, when less than one and a
    /// half pieces of the file are left, all of them, so that the block the short remainder
    /// joins at the end (below) has room for it instead of growing, which would copy it.
    fn block_room(&self) -> usize {
        match self.pieces.left() {
            Some(left) if left > 0 && left < self.size.saturating_add(self.size / 2) => left,
            _ => self.pieces.room(self.size),
        }
    }
}

impl Iterator for Blocks {
    type Item = Vec<u8>;

    fn next(&mut self) -> Option<Vec<u8>> {
        loop {
            if self.ended {
                return self.tail.pop();
            }
            if self.carry.capacity() == 0 {
                // (a file's first piece is read into a spare buffer too)
                self.carry = self.spare.take(self.block_room());
            }
            let more = match self.pieces.next_piece_onto(&mut self.carry, self.size) {
                Ok(more) => more,
                Err(problem) => {
                    self.problem = Some(problem);
                    false
                }
            };
            if !more {
                self.ended = true;
                let mut ready = std::mem::take(&mut self.ready);
                let mut carry = std::mem::take(&mut self.carry);
                if !ready.is_empty() && carry.len() < self.size / 2 {
                    ready.append(&mut carry);
                }
                // (popped from the end: the carry, then the ready block)
                for block in [carry, ready] {
                    if !block.is_empty() {
                        self.tail.push(block);
                    }
                }
                continue;
            }
            if self.carry.len() < self.size {
                continue;
            }
            if let Some(last) = memchr::memrchr(b'\n', &self.carry) {
                // (the rest of the last line is moved to a spare buffer, which the next
                // pieces are read onto)
                let tail = &self.carry[last + 1..];
                let mut rest = self.spare.take(tail.len() + self.block_room());
                rest.extend_from_slice(tail);
                self.carry.truncate(last + 1);
                let block = std::mem::replace(&mut self.carry, rest);
                let previous = std::mem::replace(&mut self.ready, block);
                if !previous.is_empty() {
                    return Some(previous);
                }
            }
        }
    }
}

/// The physical lines of a block (decoded: bytes that are not UTF-8 become U+FFFD), as byte
/// ranges of the decoded text.
pub fn split_lines(text: &str) -> Vec<(usize, usize)> {
    split_lines_up_to(text.as_bytes(), usize::MAX).0
}

/// The first `most` physical lines of `bytes` as `split_lines` gives them, and where the last
/// of them ends (after its newline; the end of `bytes` when it has no more lines).
pub fn split_lines_up_to(bytes: &[u8], most: usize) -> (Vec<(usize, usize)>, usize) {
    let mut lines = Vec::with_capacity((bytes.len() / 64 + 1).min(most));
    let mut start = 0;
    for end in memchr::memchr_iter(b'\n', bytes) {
        if lines.len() == most {
            return (lines, start);
        }
        let stop = if end > start && bytes[end - 1] == b'\r' {
            end - 1
        } else {
            end
        };
        lines.push((start, stop));
        start = end + 1;
    }
    if start < bytes.len() && lines.len() < most {
        lines.push((start, bytes.len()));
        start = bytes.len();
    }
    (lines, start)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(data).expect("write");
        encoder.finish().expect("finish")
    }

    #[test]
    fn a_files_short_remainder_joins_a_block_made_with_room_for_it() {
        // 13 lines of 10 bytes in blocks of 100: the last 30 bytes join the first block,
        // which was made for the whole file (it is not grown, which would copy it)
        let bytes: Vec<u8> = (0..13)
            .flat_map(|i| format!("line {i:03}\n").into_bytes())
            .collect();
        let dir = crate::TestDir::new("room");
        let path = dir.join("x.log");
        std::fs::write(&path, &bytes).expect("write");
        let pieces = Pieces::open(&path).expect("open");
        let blocks: Vec<Vec<u8>> = Blocks::new(pieces, 100, Arc::default()).collect();
        std::fs::remove_file(&path).ok();
        assert_eq!(blocks, vec![bytes.clone()]);
        assert_eq!(blocks[0].capacity(), bytes.len());
    }

    fn pieces_of(bytes: &[u8], size: usize) -> (Vec<Vec<u8>>, Option<Problem>) {
        let dir = crate::TestDir::new("read");
        let path = dir.join(format!("x{}.gz", bytes.len()));
        std::fs::write(&path, bytes).expect("write");
        let mut pieces = Pieces::open(&path).expect("open");
        let mut out = Vec::new();
        let mut problem = None;
        loop {
            match pieces.next_piece(size) {
                Ok(Some(piece)) => out.push(piece),
                Ok(None) => break,
                Err(p) => {
                    problem = Some(p);
                    break;
                }
            }
        }
        std::fs::remove_file(&path).ok();
        (out, problem)
    }

    #[test]
    fn a_gzip_of_nuls_decodes_in_bounded_pieces_members_and_all() {
        let mut data = vec![0u8; 5_000_000];
        data.extend_from_slice(b"[2025-07-25 07:53:01 TP0] Decode batch.\n");
        data.extend(vec![0u8; 3_000_000]);
        let mut packed = gzip(&data);
        packed.extend(gzip(&data));
        let (pieces, problem) = pieces_of(&packed, 65536);
        assert_eq!(problem, None);
        assert!(pieces.iter().all(|p| p.len() <= 65536));
        assert_eq!(pieces.concat(), [data.clone(), data].concat());
    }

    #[test]
    fn a_damaged_gzip_keeps_what_decoded_and_says_so() {
        let data: Vec<u8> = (0..20_000)
            .flat_map(|i| format!("line {i}\n").into_bytes())
            .collect();
        let mut packed = gzip(&data);
        let n = packed.len();
        packed[n - 6] ^= 0xff; // the CRC-32
        let (pieces, problem) = pieces_of(&packed, 1 << 16);
        assert_eq!(pieces.concat(), data);
        assert!(matches!(problem, Some(Problem::Gzip(why)) if why.contains("unreadable")));
        let (pieces, problem) = pieces_of(&packed[..n / 2], 1 << 16);
        let kept = pieces.concat();
        assert!(!kept.is_empty() && data.starts_with(&kept));
        assert_eq!(problem, Some(Problem::Gzip(TRUNCATED.to_string())));
    }

    fn lines(text: &str) -> Vec<&str> {
        split_lines(text)
            .into_iter()
            .map(|(a, b)| &text[a..b])
            .collect()
    }

    #[test]
    fn the_first_lines_of_a_text_end_after_the_last_ones_newline() {
        for text in [
            "", "\n", "a", "a\n", "a\r\nb", "a\nb\n", "\n\n\r\n", "a\nb\nc", "é\r\n\n",
        ] {
            let all = split_lines(text);
            for most in 0..6 {
                let (lines, end) = split_lines_up_to(text.as_bytes(), most);
                assert_eq!(lines, all[..most.min(all.len())], "{text:?} {most}");
                // (the rest of the text, from `end`, holds the lines after them)
                let after: Vec<(usize, usize)> = split_lines(&text[end..])
                    .into_iter()
                    .map(|(a, b)| (a + end, b + end))
                    .collect();
                assert_eq!(after, all[lines.len()..], "{text:?} {most}");
            }
        }
    }

    #[test]
    fn spare_buffers_are_the_largest_few_and_the_least_one_that_fits_is_taken() {
        let spare = Spare::default();
        assert!(!spare.recycles());
        // (a small text is not kept)
        spare.give("small".to_string());
        assert!(!spare.recycles());
        let sizes = [3, 9, 1, 5, 7, 2, 8, 4].map(|mb| mb * SPARE_LEAST);
        for size in sizes {
            spare.give(String::with_capacity(size));
        }
        assert!(spare.recycles());
        let mut kept: Vec<usize> = spare
            .kept
            .lock()
            .unwrap()
            .iter()
            .map(Vec::capacity)
            .collect();
        kept.sort_unstable();
        assert_eq!(kept, [3, 4, 5, 7, 8, 9].map(|mb| mb * SPARE_LEAST));
        // (the least room that is enough; else a new buffer with room to the next MiB)
        assert_eq!(spare.take(6 * SPARE_LEAST).capacity(), 7 * SPARE_LEAST);
        assert_eq!(spare.take(6 * SPARE_LEAST).capacity(), 8 * SPARE_LEAST);
        assert_eq!(
            spare.take(10 * SPARE_LEAST + 1).capacity(),
            11 * SPARE_LEAST
        );
        assert_eq!(spare.take(3 * SPARE_LEAST).capacity(), 3 * SPARE_LEAST);
        // (a small text is copied into a buffer of its own size)
        let copied = spare.copy("abc");
        assert_eq!((copied.as_str(), copied.capacity()), ("abc", 3));
        assert_eq!(spare.take(0).capacity(), 0);
        assert_eq!(spare.kept.lock().unwrap().len(), 3);
    }

    #[test]
    fn line_rules() {
        assert_eq!(lines("a\r\nb\n"), ["a", "b"]);
        assert_eq!(lines("a\r"), ["a\r"]);
        assert_eq!(lines("\n"), [""]);
        assert_eq!(lines(""), Vec::<&str>::new());
        assert_eq!(lines("a\rb\nc"), ["a\rb", "c"]);
        assert_eq!(lines("\r\n\r\n"), ["", ""]);
    }
}
