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
            head,
            gzip,
            problem: None,
            finished: false,
        })
    }

    /// The next piece of at most `max` (> 0) decoded bytes put at the end of `out` (a plain
    /// file's read there directly); false at the end. Errors as `next_piece`.
    pub fn next_piece_onto(&mut self, out: &mut Vec<u8>, max: usize) -> Result<bool, Problem> {
        if self.gzip.is_some() || !self.head.is_empty() || out.is_empty() || self.finished {
            return match self.next_piece(max)? {
                Some(piece) if out.is_empty() => {
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
        if let Some(problem) = self.problem.take() {
            self.finished = true;
            return Err(problem);
        }
        let before = out.len();
        match plain_onto(&mut self.file, out, max.max(1)) {
            Ok(0) => {
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
        let result = match &mut self.gzip {
            None => plain(&mut self.file, &mut self.head, max),
            Some(gzip) => {
                let head = std::mem::take(&mut self.head);
                gzip.input.extend_from_slice(&head);
                gzip.next(&mut self.file, max)
            }
        };
        match result {
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

fn plain(file: &mut File, head: &mut Vec<u8>, max: usize) -> Step {
    let mut piece = std::mem::take(head);
    let want = max.saturating_sub(piece.len());
    // (what was read before an error stays in `piece`)
    if let Err(error) = plain_onto(file, &mut piece, want) {
        return Err((piece, Problem::Io(error.to_string())));
    }
    Ok((!piece.is_empty()).then_some(piece))
}

/// Read at most `want` more bytes of a plain file onto the end of `out` (its room grows as the
/// bytes come); what was read before an error stays in `out`.
fn plain_onto(file: &mut File, out: &mut Vec<u8>, want: usize) -> io::Result<usize> {
    if want == 0 {
        return Ok(0);
    }
    out.reserve(want.min(FIRST_ROOM));
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

/// A file's bytes in blocks of about `size` bytes that end at a newline (but the last); a
/// short remainder at the end (under half a block) goes with the block before it.
pub struct Blocks {
    pieces: Pieces,
    size: usize,
    carry: Vec<u8>,
    ready: Vec<u8>,
    ended: bool,
    tail: Vec<Vec<u8>>,
    pub problem: Option<Problem>,
}

impl Blocks {
    pub fn new(pieces: Pieces, size: usize) -> Blocks {
        Blocks {
            pieces,
            size: size.max(1),
            carry: Vec::new(),
            ready: Vec::new(),
            ended: false,
            tail: Vec::new(),
            problem: None,
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
                let rest = self.carry.split_off(last + 1);
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
    let bytes = text.as_bytes();
    let mut lines = Vec::with_capacity(bytes.len() / 64 + 1);
    let mut start = 0;
    for end in memchr::memchr_iter(b'\n', bytes) {
        let stop = if end > start && bytes[end - 1] == b'\r' {
            end - 1
        } else {
            end
        };
        lines.push((start, stop));
        start = end + 1;
    }
    if start < bytes.len() {
        lines.push((start, bytes.len()));
    }
    lines
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

    fn pieces_of(bytes: &[u8], size: usize) -> (Vec<Vec<u8>>, Option<Problem>) {
        let dir = std::env::temp_dir().join(format!("logcorr-read-{}-{size}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
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
    fn line_rules() {
        assert_eq!(lines("a\r\nb\n"), ["a", "b"]);
        assert_eq!(lines("a\r"), ["a\r"]);
        assert_eq!(lines("\n"), [""]);
        assert_eq!(lines(""), Vec::<&str>::new());
        assert_eq!(lines("a\rb\nc"), ["a\rb", "c"]);
        assert_eq!(lines("\r\n\r\n"), ["", ""]);
    }
}
