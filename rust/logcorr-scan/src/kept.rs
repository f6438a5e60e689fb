//! Pass 1's parse of a chunk, kept for pass 2, so a line is parsed once.
//!
//! Pass 1 parses every line to survey it; pass 2 read and parsed the same chunks again before
//! attributing them. Up to a budget of bytes, pass 1 now keeps what it parsed: each part's
//! fields, encoded one after the other (a mask of the fields present, then their values; the
//! text left out when it is the whole line, which pass 2 reads again), and each part's key row.
//! Pass 2 takes a chunk's parts from here when its reading of the chunk is the same: the same
//! lines of the same files (file, first line, lines and bytes of each block) reading the same
//! of the lines before them (`parse::context_read`). Parsing is a function of those, and the
//! parts are pushed into the columns as parsing pushes them, so the columns are those pass 2
//! would have parsed; a chunk not kept (past the budget, or read otherwise) is parsed again.

use std::borrow::Cow;
use std::path::PathBuf;
use std::sync::Mutex;

use rustc_hash::FxHashMap;

use crate::keys::KeyId;
use crate::model::{put, role_code, source_code, Columns, Fields, Source, ROLES};
use crate::parse::{context_read, Line, Sink};
use crate::scan::RawChunk;
use crate::survey::Survey;

/// Each block of a chunk: file, first line, lines and bytes of lines.
pub type Shape = Vec<(u32, u32, usize, usize)>;

/// A chunk's shape (what identifies its reading).
pub fn shape(raw: &RawChunk) -> Shape {
    raw.blocks
        .iter()
        .map(|b| {
            let bytes = b.lines.iter().map(|(a, z)| z - a).sum::<usize>();
            (b.file_id, b.first_line, b.lines.len(), bytes)
        })
        .collect()
}

/// A chunk's parse as pass 1 made it.
pub struct KeptChunk {
    shape: Shape,
    /// what its first lines read of the lines before it
    context: Vec<Option<String>>,
    /// each part, encoded (`encode_part`)
    parts: Vec<u8>,
    /// each part's key row (pass 1's numbering once the chunk's survey is merged)
    pub ids: Vec<KeyId>,
    /// the file the parts and key rows were written to, past the budget (then both are empty
    /// here), with the number of key rows
    stored: Option<(PathBuf, usize)>,
}

impl KeptChunk {
    fn size(&self) -> usize {
        self.parts.capacity() + self.ids.capacity() * std::mem::size_of::<KeyId>() + 64
    }

    /// Write the parts and key rows to `path` (their memory freed); false when that fails.
    fn store(&mut self, path: PathBuf) -> bool {
        let mut bytes = Vec::with_capacity(self.ids.len() * 4 + self.parts.len());
        for id in &self.ids {
            bytes.extend_from_slice(&id.to_le_bytes());
        }
        bytes.extend_from_slice(&self.parts);
        if std::fs::write(&path, &bytes).is_err() {
            let _ = std::fs::remove_file(&path);
            return false;
        }
        self.stored = Some((path, self.ids.len()));
        self.parts = Vec::new();
        self.ids = Vec::new();
        true
    }

    /// The parts and key rows (read back and their file removed, when stored).
    fn load(self) -> Option<(Vec<u8>, Vec<KeyId>)> {
        let Some((path, ids)) = self.stored else {
            return Some((self.parts, self.ids));
        };
        let bytes = std::fs::read(&path);
        let _ = std::fs::remove_file(&path);
        let bytes = bytes.ok()?;
        let (head, parts) = bytes.split_at_checked(ids * 4)?;
        let ids = head
            .chunks_exact(4)
            .map(|b| KeyId::from_le_bytes([b[0], b[1], b[2], b[3]]))
            .collect();
        Some((parts.to_vec(), ids))
    }
}

/// The kept chunks, by their first file and line: `budget` bytes of them in memory, the rest
/// in files in `folder` (when given; else not kept).
pub struct Kept {
    budget: usize,
    folder: Option<PathBuf>,
    /// files written so far (their names' numbers)
    stored: std::sync::atomic::AtomicUsize,
    state: Mutex<State>,
    /// chunks pass 2 took from here
    taken: std::sync::atomic::AtomicUsize,
}

#[derive(Default)]
struct State {
    held: usize,
    /// bytes set aside for chunks being parsed, not kept yet
    promised: usize,
    chunks: FxHashMap<(u32, u32), KeptChunk>,
}

/// About how many bytes a part takes encoded (the benchmark sets' lines take 30 to 40).
pub const BYTES_PER_PART: usize = 48;

impl Kept {
    pub fn new(budget: usize, folder: Option<PathBuf>) -> Kept {
        Kept {
            budget,
            folder,
            stored: std::sync::atomic::AtomicUsize::new(0),
            state: Mutex::new(State::default()),
            taken: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Room set aside for a chunk of `parts` parts, when the budget has it (until `keep`).
    pub fn room_for(&self, parts: usize) -> Option<usize> {
        if self.budget == 0 && self.folder.is_none() {
            return None;
        }
        let size = parts * BYTES_PER_PART;
        let mut state = self.state.lock().ok()?;
        if self.folder.is_none() && state.held + state.promised + size > self.budget {
            return None;
        }
        state.promised += size;
        Some(size)
    }

    /// Give back the room `room_for` set aside for a chunk not kept after all.
    pub fn forgo(&self, promised: usize) {
        if let Ok(mut state) = self.state.lock() {
            state.promised = state.promised.saturating_sub(promised);
        }
    }

    /// Keep `chunk` (`promised`: the room `room_for` set aside for it), when it fits.
    pub fn keep(&self, mut chunk: KeptChunk, promised: usize) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        state.promised = state.promised.saturating_sub(promised);
        if state.held + chunk.size() > self.budget {
            // (past the budget: written to a file of its own, or not kept)
            let Some(folder) = &self.folder else {
                return;
            };
            let number = self
                .stored
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let made = std::fs::create_dir_all(folder).is_ok();
            if !made || !chunk.store(folder.join(format!("parts-{number:06}"))) {
                return;
            }
        }
        let first = chunk.shape.first().map_or((u32::MAX, 0), |b| (b.0, b.1));
        state.held += chunk.size();
        if let Some(old) = state.chunks.insert(first, chunk) {
            state.held -= old.size();
            if let Some((path, _)) = &old.stored {
                let _ = std::fs::remove_file(path);
            }
        }
    }

    /// The columns and key rows pass 1 parsed for the chunk `raw` (with `before`'s context),
    /// when it was kept and read the same (taken either way); the text's blocks are left for
    /// the caller to give.
    pub fn take(
        &self,
        raw: &RawChunk,
        before: &[crate::parse::Said],
    ) -> Option<(Columns, Vec<KeyId>)> {
        let first = raw.blocks.first().map(|b| (b.file_id, b.first_line))?;
        let chunk = {
            let mut state = self.state.lock().ok()?;
            let chunk = state.chunks.remove(&first)?;
            state.held -= chunk.size();
            chunk
        };
        let same = chunk.shape == shape(raw);
        let lines = raw.lines();
        let same = same && chunk.context == context_read(&lines, before);
        let (parts, ids) = chunk.load()?;
        if !same {
            return None;
        }
        let columns = decode_parts(&parts, &lines, ids.len())?;
        self.taken
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some((columns, ids))
    }

    /// Bytes held, and how many chunks were kept.
    pub fn held(&self) -> (usize, usize) {
        self.state
            .lock()
            .map_or((0, 0), |s| (s.held, s.chunks.len()))
    }

    /// How many chunks pass 2 took from here.
    pub fn taken(&self) -> usize {
        self.taken.load(std::sync::atomic::Ordering::Relaxed)
    }
}

impl Drop for Kept {
    fn drop(&mut self) {
        // (the files of chunks pass 2 did not take, and the folder)
        if let Some(folder) = &self.folder {
            let _ = std::fs::remove_dir_all(folder);
        }
    }
}

/// The parts of `bytes` pushed into columns as parsing pushes them (`lines`: the chunk's,
/// which the parts stand in); None when they are not `parts` parts that decode.
fn decode_parts(bytes: &[u8], lines: &[Line<'_>], parts: usize) -> Option<Columns> {
    let mut columns = Columns::default();
    columns.reserve(parts);
    let mut reader = Reader { bytes, at: 0 };
    let mut index = 0;
    while reader.at < bytes.len() {
        index += reader.step()?;
        reader.part_into(&mut columns, lines.get(index)?)?;
    }
    columns.finish();
    (columns.len() == parts).then_some(columns)
}

/// Pass 1's sink when a chunk's parse is kept: each part surveyed and encoded (`lines`: the
/// chunk's, which the parts stand in), with its key row's number.
pub struct Tee<'l> {
    pub survey: Survey,
    lines: &'l [Line<'l>],
    /// the line of the last part
    index: usize,
    parts: Vec<u8>,
    ids: Vec<KeyId>,
    /// a part that stood in none of the lines, or not as a line is given (not kept then)
    astray: bool,
}

impl<'l> Tee<'l> {
    pub fn new(lines: &'l [Line<'l>]) -> Tee<'l> {
        Tee {
            survey: Survey::default(),
            lines,
            index: 0,
            parts: Vec::with_capacity(lines.len() * BYTES_PER_PART),
            ids: Vec::with_capacity(lines.len()),
            astray: false,
        }
    }

    /// The survey, and the chunk kept (read with context `before`) unless a part went astray.
    pub fn kept(
        self,
        raw: &RawChunk,
        before: &[crate::parse::Said],
    ) -> (Survey, Option<KeptChunk>) {
        let chunk = (!self.astray).then(|| KeptChunk {
            shape: shape(raw),
            context: context_read(self.lines, before),
            parts: self.parts,
            ids: self.ids,
            stored: None,
        });
        (self.survey, chunk)
    }
}

impl Sink for Tee<'_> {
    fn push(&mut self, file_id: u32, line: u32, f: &Fields<'_>, at: Option<(u32, u32)>) {
        let id = self.survey.add(file_id, line, f);
        if self.astray {
            return;
        }
        // (parts come in their lines' order; a line's own place, when the part is the line)
        let from = self.index;
        while self
            .lines
            .get(self.index)
            .is_some_and(|l| (l.file_id, l.line) != (file_id, line))
        {
            self.index += 1;
        }
        match self.lines.get(self.index) {
            Some(l) if at.is_none_or(|at| at == l.at) => {
                self.ids.push(id);
                encode_part(&mut self.parts, self.index - from, at.is_some(), f);
            }
            _ => self.astray = true,
        }
    }

    fn finish(&mut self) {
        self.survey.settle();
    }
}

/// Append a part: how many lines on from the last part's it stands, its part number, family
/// and flags (the two of `Fields`, whether it is its whole line, whether its message is the
/// end of its text), a mask of the optional fields present and their values, in the order of
/// `Reader::part` (the text only when the part is not the whole line; the message's length
/// only when it is the end of the text, as a wrapped line's is).
pub fn encode_part(out: &mut Vec<u8>, step: usize, whole: bool, f: &Fields) {
    match u8::try_from(step) {
        Ok(step) if step < u8::MAX => out.push(step),
        _ => {
            out.push(u8::MAX);
            out.extend_from_slice(&(step as u64).to_le_bytes());
        }
    }
    out.extend_from_slice(&f.part.to_le_bytes());
    out.push(source_code(f.source));
    let tail = f
        .msg
        .as_deref()
        .filter(|m| f.text.ends_with(m))
        .map(str::len);
    out.push(
        u8::from(f.main)
            | (u8::from(f.exc) << 1)
            | (u8::from(whole) << 2)
            | (u8::from(tail.is_some()) << 3),
    );
    let mask_at = out.len();
    out.extend_from_slice(&[0; MASK_BYTES]);
    let mut w = Writer {
        out,
        mask: 0,
        bit: 0,
    };
    w.str(if whole { None } else { Some(&f.text) });
    match tail {
        Some(len) => w.len(len),
        None => w.str(f.msg.as_deref()),
    }
    w.byte(f.role.map(role_code));
    w.flag(f.starts_record);
    w.i64(f.ts);
    w.flag(f.ts_has_date);
    w.flag(f.ts_has_year);
    w.i64(f.wrap_ts);
    w.str(f.stream.as_deref());
    w.str(f.host.as_deref());
    w.i64(f.pid);
    w.i64(f.tid);
    w.i32(f.device_id);
    for value in f.prefix {
        w.i32(value);
    }
    w.i32(f.torch_rank);
    w.i32(f.pg_id);
    w.str(f.pg_guid.as_deref());
    w.str(f.pg_desc.as_deref());
    w.i32(f.pg_rank);
    w.i64(f.seq);
    w.str(f.op.as_deref());
    w.i64(f.last_enqueued);
    w.i64(f.last_completed);
    w.str(f.comm.as_deref());
    w.str(f.comm_id.as_deref());
    w.i32(f.comm_rank);
    w.i32(f.comm_nranks);
    w.str(f.nccl_phase.as_deref());
    w.i32(f.gloo_rank);
    w.i32(f.gloo_size);
    w.i64(f.link_pid);
    w.str(f.proctitle.as_deref());
    w.flag(f.server_args);
    w.flag(f.capped);
    let mask = w.mask.to_le_bytes();
    out[mask_at..mask_at + MASK_BYTES].copy_from_slice(&mask[..MASK_BYTES]);
}

/// Bytes of a part's mask: a bit for each of its 40 optional fields.
const MASK_BYTES: usize = 5;

/// Writes a part's optional fields: a bit each in the mask, the value when present.
struct Writer<'o> {
    out: &'o mut Vec<u8>,
    mask: u64,
    bit: u32,
}

impl Writer<'_> {
    fn present(&mut self, some: bool) -> bool {
        if some {
            self.mask |= 1 << self.bit;
        }
        self.bit += 1;
        some
    }

    fn str(&mut self, value: Option<&str>) {
        if let (true, Some(value)) = (self.present(value.is_some()), value) {
            self.out
                .extend_from_slice(&(value.len() as u32).to_le_bytes());
            self.out.extend_from_slice(value.as_bytes());
        }
    }

    /// A length (a message that is the end of the text).
    fn len(&mut self, len: usize) {
        self.present(true);
        self.out.extend_from_slice(&(len as u32).to_le_bytes());
    }

    fn i64(&mut self, value: Option<i64>) {
        if let (true, Some(value)) = (self.present(value.is_some()), value) {
            self.out.extend_from_slice(&value.to_le_bytes());
        }
    }

    fn i32(&mut self, value: Option<i32>) {
        if let (true, Some(value)) = (self.present(value.is_some()), value) {
            self.out.extend_from_slice(&value.to_le_bytes());
        }
    }

    fn byte(&mut self, value: Option<u8>) {
        if let (true, Some(value)) = (self.present(value.is_some()), value) {
            self.out.push(value);
        }
    }

    fn flag(&mut self, value: Option<bool>) {
        self.byte(value.map(u8::from));
    }
}

/// Reads the parts `encode_part` wrote.
struct Reader<'b> {
    bytes: &'b [u8],
    at: usize,
}

impl<'b> Reader<'b> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let value = self.bytes.get(self.at..self.at + N)?.try_into().ok()?;
        self.at += N;
        Some(value)
    }

    fn u32(&mut self) -> Option<u32> {
        self.take::<4>().map(u32::from_le_bytes)
    }

    /// How many lines on from the last part's a part stands (the first of its bytes).
    fn step(&mut self) -> Option<usize> {
        match self.take::<1>()?[0] {
            u8::MAX => usize::try_from(u64::from_le_bytes(self.take::<8>()?)).ok(),
            step => Some(usize::from(step)),
        }
    }

    /// The rest of a part, pushed into `c` as `Columns::push` pushes its fields: a part of
    /// `line` (its text the line's when it is its whole line; its message the end of its
    /// text when only the message's length was written). None when the bytes end too soon,
    /// a text is not UTF-8, or the message's length does not fit the text.
    #[inline(always)]
    fn part_into(&mut self, c: &mut Columns, line: &Line<'_>) -> Option<()> {
        let part = u16::from_le_bytes(self.take::<2>()?);
        let source = self.take::<1>()?[0];
        Source::ALL.get(usize::from(source))?;
        let flags = self.take::<1>()?[0];
        let mut mask = [0; 8];
        mask[..MASK_BYTES].copy_from_slice(&self.take::<MASK_BYTES>()?);
        let mut r = Optional {
            reader: self,
            mask: u64::from_le_bytes(mask),
            bit: 0,
        };
        let written = r.str()?;
        let (text, at) = if flags & 4 != 0 {
            (line.text, Some(line.at))
        } else {
            (written.as_deref()?, None)
        };
        let msg = if flags & 8 != 0 {
            let len = r.len()?;
            Some(Cow::Borrowed(text.get(text.len().checked_sub(len)?..)?))
        } else {
            r.str()?
        };
        let role = match r.byte()? {
            Some(code) => Some(*ROLES.get(usize::from(code))?),
            None => None,
        };
        let row = c.len();
        c.file_id.push(line.file_id);
        c.line.push(line.line);
        c.part.push(part);
        c.text.push(text, at);
        c.msg.put(row, msg.as_deref());
        c.source.push(source);
        c.role.push(role.map(role_code));
        c.starts_record.push(r.flag()?);
        c.ts.push(r.i64()?);
        c.ts_has_date.push(r.flag()?);
        c.ts_has_year.push(r.flag()?);
        put(&mut c.wrap_ts, row, r.i64()?);
        c.stream.put(row, r.str()?.as_deref());
        c.host.push(r.str()?.as_deref());
        c.pid.push(r.i64()?);
        c.tid.push(r.i64()?);
        c.device_id.push(r.i32()?);
        c.main.push(flags & 1 != 0);
        c.exc.push(flags & 2 != 0);
        // (most lines end here or after their prefix ranks: the rest stays None)
        let absent = r.rest_absent();
        for column in &mut c.prefix {
            column.push(if absent { None } else { r.i32()? });
        }
        if r.rest_absent() {
            return Some(());
        }
        put(&mut c.torch_rank, row, r.i32()?);
        put(&mut c.pg_id, row, r.i32()?);
        c.pg_guid.put(row, r.str()?.as_deref());
        c.pg_desc.put(row, r.str()?.as_deref());
        put(&mut c.pg_rank, row, r.i32()?);
        put(&mut c.seq, row, r.i64()?);
        c.op.put(row, r.str()?.as_deref());
        put(&mut c.last_enqueued, row, r.i64()?);
        put(&mut c.last_completed, row, r.i64()?);
        c.comm.put(row, r.str()?.as_deref());
        c.comm_id.put(row, r.str()?.as_deref());
        put(&mut c.comm_rank, row, r.i32()?);
        put(&mut c.comm_nranks, row, r.i32()?);
        c.nccl_phase.put(row, r.str()?.as_deref());
        put(&mut c.gloo_rank, row, r.i32()?);
        put(&mut c.gloo_size, row, r.i32()?);
        put(&mut c.link_pid, row, r.i64()?);
        c.proctitle.put(row, r.str()?.as_deref());
        put(&mut c.server_args, row, r.flag()?);
        put(&mut c.capped, row, r.flag()?);
        Some(())
    }
}

/// Reads a part's optional fields (a field absent from the mask is None). Each read is
/// Some(value or None), None when the bytes end too soon or a text is not UTF-8.
struct Optional<'r, 'b> {
    reader: &'r mut Reader<'b>,
    mask: u64,
    bit: u32,
}

impl<'b> Optional<'_, 'b> {
    /// Whether no field from here on is present (each would read as None).
    fn rest_absent(&self) -> bool {
        self.mask.checked_shr(self.bit).unwrap_or(0) == 0
    }

    fn present(&mut self) -> bool {
        let present = self.mask & (1 << self.bit) != 0;
        self.bit += 1;
        present
    }

    #[inline(always)]
    fn str(&mut self) -> Option<Option<Cow<'b, str>>> {
        if !self.present() {
            return Some(None);
        }
        let len = self.reader.u32()? as usize;
        let bytes: &'b [u8] = self
            .reader
            .bytes
            .get(self.reader.at..self.reader.at + len)?;
        self.reader.at += len;
        std::str::from_utf8(bytes)
            .ok()
            .map(|s| Some(Cow::Borrowed(s)))
    }

    /// A length (present, as `Writer::len` writes it).
    #[inline(always)]
    fn len(&mut self) -> Option<usize> {
        self.present().then_some(())?;
        self.reader.u32().map(|len| len as usize)
    }

    #[inline(always)]
    fn i64(&mut self) -> Option<Option<i64>> {
        if !self.present() {
            return Some(None);
        }
        self.reader.take::<8>().map(|b| Some(i64::from_le_bytes(b)))
    }

    #[inline(always)]
    fn i32(&mut self) -> Option<Option<i32>> {
        if !self.present() {
            return Some(None);
        }
        self.reader.take::<4>().map(|b| Some(i32::from_le_bytes(b)))
    }

    #[inline(always)]
    fn byte(&mut self) -> Option<Option<u8>> {
        if !self.present() {
            return Some(None);
        }
        self.reader.take::<1>().map(|b| Some(b[0]))
    }

    #[inline(always)]
    fn flag(&mut self) -> Option<Option<bool>> {
        self.byte().map(|b| b.map(|b| b != 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Role, NOWHERE};

    /// Every field set (a struct literal without `..`: a field added to `Fields` must be
    /// encoded, or this does not compile).
    fn every_field<'a>(text: &'a str) -> Fields<'a> {
        Fields {
            part: 3,
            text: Cow::Borrowed(text),
            msg: Some(Cow::Borrowed("msg")),
            source: Source::ALL[5],
            role: Some(Role::Detokenizer),
            starts_record: Some(false),
            ts: Some(-1_700_000_000_000_001),
            ts_has_date: Some(true),
            ts_has_year: Some(false),
            wrap_ts: Some(i64::MAX),
            stream: Some(Cow::Owned("stderr".to_string())),
            host: Some(Cow::Borrowed("node-7")),
            pid: Some(1 << 40),
            tid: Some(-2),
            device_id: Some(7),
            prefix: [
                Some(0),
                Some(1),
                None,
                Some(3),
                Some(-4),
                Some(i32::MAX),
                Some(6),
            ],
            torch_rank: Some(9),
            pg_id: Some(10),
            pg_guid: Some(Cow::Borrowed("3(tp:device)")),
            pg_desc: Some(Cow::Borrowed("tp:device")),
            pg_rank: Some(11),
            seq: Some(9141),
            op: Some(Cow::Borrowed("ALLREDUCE")),
            last_enqueued: Some(12),
            last_completed: Some(13),
            comm: Some(Cow::Borrowed("0x7f")),
            comm_id: Some(Cow::Borrowed("0xabc")),
            comm_rank: Some(14),
            comm_nranks: Some(15),
            nccl_phase: Some(Cow::Borrowed("init")),
            gloo_rank: Some(16),
            gloo_size: Some(17),
            link_pid: Some(18),
            proctitle: Some(Cow::Borrowed("sglang::scheduler_TP0 ✓")),
            server_args: Some(true),
            capped: Some(false),
            main: true,
            exc: true,
        }
    }

    /// The parts of `bytes` decoded as parts of `line` (each in turn), with their steps.
    fn decode(bytes: &[u8], line: &str) -> Option<(Columns, Vec<usize>)> {
        let line = Line {
            file_id: 4,
            line: 9,
            text: line,
            at: NOWHERE,
        };
        let mut reader = Reader { bytes, at: 0 };
        let (mut columns, mut steps) = (Columns::default(), Vec::new());
        while reader.at < bytes.len() {
            steps.push(reader.step()?);
            reader.part_into(&mut columns, &line)?;
        }
        columns.finish();
        Some((columns, steps))
    }

    fn round_trip(fields: &Fields<'_>, step: usize, whole: bool) {
        let mut bytes = Vec::new();
        encode_part(&mut bytes, step, whole, fields);
        encode_part(&mut bytes, 1, false, &Fields::default());
        // (a whole line's text is the line's, not written)
        let (columns, steps) = decode(&bytes, &fields.text).expect("two parts");
        assert_eq!(steps, [step, 1]);
        assert_eq!((columns.file_id[0], columns.line[0]), (4, 9));
        assert_eq!(format!("{:?}", columns.fields(0)), format!("{fields:?}"));
        assert_eq!(
            format!("{:?}", columns.fields(1)),
            format!("{:?}", Fields::default())
        );
    }

    #[test]
    fn a_part_reads_back_as_written() {
        round_trip(&every_field("[rank3]:[E1129 10:00:00] glued"), 0, false);
        // (a part that is its whole line leaves its text to the line)
        round_trip(&every_field("a whole line"), 1, true);
        round_trip(&Fields::default(), 254, false);
        round_trip(&Fields::default(), 255, true);
        round_trip(&Fields::default(), 70_000, false);
        let mut some = Fields {
            host: Some(Cow::Borrowed("h")),
            ts: Some(5),
            ..Fields::default()
        };
        some.prefix[6] = Some(1);
        round_trip(&some, 3, true);
        // (parts whose last field is one of the first ones, the prefix ranks, or one after)
        let nccl = Fields {
            host: Some(Cow::Borrowed("gpu-node-3")),
            pid: Some(2891),
            tid: Some(3012),
            device_id: Some(3),
            ..Fields::default()
        };
        round_trip(&nccl, 1, true);
        let mut sglang = Fields {
            ts: Some(1_795_940_000_000_000),
            ..Fields::default()
        };
        sglang.prefix[0] = Some(5);
        sglang.prefix[1] = Some(10);
        round_trip(&sglang, 1, true);
        let mut torch = sglang.clone();
        torch.torch_rank = Some(3);
        round_trip(&torch, 1, true);
        let last = Fields {
            capped: Some(true),
            ..Fields::default()
        };
        round_trip(&last, 1, false);
        // (a wrapped line's message is the end of its text: its length is written, not its
        // bytes; a decoded Docker body is not, and is written)
        for whole in [true, false] {
            for (text, msg) in [
                (
                    "2026-11-29T10:00:00Z stdout F [2026-11-29 10:00:00 TP0] x",
                    "[2026-11-29 10:00:00 TP0] x",
                ),
                ("sglang-1  | é ✓", "é ✓"),
                ("[default0]:", ""),
                ("whole", "whole"),
                (r#"{"log":"a\"b\n"}"#, "a\"b"),
                ("a line", "line!"),
            ] {
                let wrapped = Fields {
                    text: Cow::Borrowed(text),
                    msg: Some(Cow::Borrowed(msg)),
                    stream: Some(Cow::Borrowed("stdout")),
                    ts: Some(7),
                    ..Fields::default()
                };
                round_trip(&wrapped, 1, whole);
                let mut bytes = Vec::new();
                encode_part(&mut bytes, 1, whole, &wrapped);
                let mut plain = Vec::new();
                encode_part(
                    &mut plain,
                    1,
                    whole,
                    &Fields {
                        msg: None,
                        ..wrapped.clone()
                    },
                );
                let written = bytes.len() - plain.len();
                let tail = text.ends_with(msg);
                assert_eq!(written, if tail { 4 } else { 4 + msg.len() }, "{text:?}");
            }
        }
    }

    #[test]
    fn a_message_longer_than_its_text_is_refused() {
        let wrapped = Fields {
            text: Cow::Borrowed("x | abc"),
            msg: Some(Cow::Borrowed("abc")),
            ..Fields::default()
        };
        let mut bytes = Vec::new();
        encode_part(&mut bytes, 0, true, &wrapped);
        let read = |line: &str| {
            let (columns, _) = decode(&bytes, line)?;
            Some(columns.msg.get(0).map(str::to_string))
        };
        assert_eq!(read("y | abc"), Some(Some("abc".to_string())));
        assert_eq!(read("ab"), None);
        // (a length that cuts a character is no message)
        assert_eq!(read("xé"), Some(Some("xé".to_string())));
        assert_eq!(read("éab"), None);
    }

    #[test]
    fn cut_or_damaged_parts_are_refused_not_misread() {
        let mut bytes = Vec::new();
        encode_part(&mut bytes, 2, false, &every_field("text"));
        // (no bytes at all are no part: none is decoded, and the chunk's count of parts
        // refuses them)
        for end in 1..bytes.len() {
            assert!(decode(&bytes[..end], "line").is_none(), "cut at {end}");
        }
        let mut bad = bytes.clone();
        bad[3] = 200; // (the source, after the step and the part number: no such family)
        assert!(decode(&bad, "line").is_none());
    }
}
