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
use std::sync::Mutex;

use rustc_hash::FxHashMap;

use crate::keys::KeyId;
use crate::model::{role_code, source_code, Columns, Fields, Source, ROLES};
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
}

impl KeptChunk {
    fn size(&self) -> usize {
        self.parts.capacity() + self.ids.capacity() * std::mem::size_of::<KeyId>() + 64
    }
}

/// The kept chunks, by their first file and line, within `budget` bytes.
pub struct Kept {
    budget: usize,
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

/// About how many bytes a part takes encoded (the 2M benchmark set's lines take 40 to 50).
pub const BYTES_PER_PART: usize = 64;

impl Kept {
    pub fn new(budget: usize) -> Kept {
        Kept {
            budget,
            state: Mutex::new(State::default()),
            taken: std::sync::atomic::AtomicUsize::new(0),
        }
    }

    /// Room set aside for a chunk of `parts` parts, when the budget has it (until `keep`).
    pub fn room_for(&self, parts: usize) -> Option<usize> {
        if self.budget == 0 {
            return None;
        }
        let size = parts * BYTES_PER_PART;
        let mut state = self.state.lock().ok()?;
        if state.held + state.promised + size > self.budget {
            return None;
        }
        state.promised += size;
        Some(size)
    }

    /// Keep `chunk` (`promised`: the room `room_for` set aside for it), when it fits.
    pub fn keep(&self, chunk: KeptChunk, promised: usize) {
        let Ok(mut state) = self.state.lock() else {
            return;
        };
        state.promised = state.promised.saturating_sub(promised);
        let size = chunk.size();
        if state.held + size > self.budget {
            return;
        }
        let first = chunk.shape.first().map_or((u32::MAX, 0), |b| (b.0, b.1));
        state.held += size;
        if let Some(old) = state.chunks.insert(first, chunk) {
            state.held -= old.size();
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
        if chunk.shape != shape(raw) {
            return None;
        }
        let lines = raw.lines();
        if chunk.context != context_read(&lines, before) {
            return None;
        }
        let columns = decode_parts(&chunk.parts, &lines, chunk.ids.len())?;
        self.taken
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some((columns, chunk.ids))
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

/// The parts of `bytes` pushed into columns as parsing pushes them (`lines`: the chunk's,
/// whose texts the parts that are whole lines take); None when they are not `parts` parts
/// that decode.
fn decode_parts(bytes: &[u8], lines: &[Line<'_>], parts: usize) -> Option<Columns> {
    let mut columns = Columns::default();
    columns.reserve(parts);
    let mut reader = Reader { bytes, at: 0 };
    let mut at_line = 0;
    while reader.at < bytes.len() {
        let (file_id, line, at, mut fields) = reader.part()?;
        if let Some(at) = at {
            // (parts come in their lines' order)
            while lines
                .get(at_line)
                .is_some_and(|l| (l.file_id, l.line) != (file_id, line))
            {
                at_line += 1;
            }
            let whole = lines.get(at_line)?;
            if whole.at != at {
                return None;
            }
            fields.text = Cow::Borrowed(whole.text);
        }
        columns.push(file_id, line, &fields, at);
    }
    (columns.len() == parts).then_some(columns)
}

/// Pass 1's sink when a chunk's parse is kept: each part surveyed and encoded, with its key
/// row's number.
#[derive(Default)]
pub struct Tee {
    pub survey: Survey,
    pub parts: Vec<u8>,
    pub ids: Vec<KeyId>,
}

impl Tee {
    /// The survey, and the chunk kept (`lines`: its lines, read with context `before`).
    pub fn kept(
        self,
        raw: &RawChunk,
        lines: &[Line<'_>],
        before: &[crate::parse::Said],
    ) -> (Survey, KeptChunk) {
        let chunk = KeptChunk {
            shape: shape(raw),
            context: context_read(lines, before),
            parts: self.parts,
            ids: self.ids,
        };
        (self.survey, chunk)
    }
}

impl Sink for Tee {
    fn push(&mut self, file_id: u32, line: u32, f: &Fields<'_>, at: Option<(u32, u32)>) {
        let id = self.survey.add(file_id, line, f);
        self.ids.push(id);
        encode_part(&mut self.parts, file_id, line, at, f);
    }
}

/// Append a part: file, line, where the line stands when the part is the whole line, then its
/// fields: part, source, flags, a mask of the optional fields present and their values, in
/// the order of `Reader::part` (the text only when the part is not the whole line).
pub fn encode_part(out: &mut Vec<u8>, file_id: u32, line: u32, at: Option<(u32, u32)>, f: &Fields) {
    out.extend_from_slice(&file_id.to_le_bytes());
    out.extend_from_slice(&line.to_le_bytes());
    match at {
        Some((block, offset)) => {
            out.push(1);
            out.extend_from_slice(&block.to_le_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
        }
        None => out.push(0),
    }
    out.extend_from_slice(&f.part.to_le_bytes());
    out.push(source_code(f.source));
    out.push(u8::from(f.main) | (u8::from(f.exc) << 1));
    let mask_at = out.len();
    out.extend_from_slice(&[0; 8]);
    let mut w = Writer {
        out,
        mask: 0,
        bit: 0,
    };
    w.str(if at.is_some() { None } else { Some(&f.text) });
    w.str(f.msg.as_deref());
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
    let mask = w.mask;
    out[mask_at..mask_at + 8].copy_from_slice(&mask.to_le_bytes());
}

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

    #[allow(clippy::type_complexity)]
    fn part(&mut self) -> Option<(u32, u32, Option<(u32, u32)>, Fields<'b>)> {
        let file_id = self.u32()?;
        let line = self.u32()?;
        let at = match self.take::<1>()?[0] {
            0 => None,
            _ => Some((self.u32()?, self.u32()?)),
        };
        let part = u16::from_le_bytes(self.take::<2>()?);
        let source = *Source::ALL.get(usize::from(self.take::<1>()?[0]))?;
        let flags = self.take::<1>()?[0];
        let mask = u64::from_le_bytes(self.take::<8>()?);
        let mut r = Fields_ {
            reader: self,
            mask,
            bit: 0,
        };
        let text = r.str()?;
        let msg = r.str()?;
        let role = match r.byte()? {
            Some(code) => Some(*ROLES.get(usize::from(code))?),
            None => None,
        };
        let mut f = Fields {
            part,
            text: text.unwrap_or_default(),
            msg,
            source,
            role,
            starts_record: r.flag()?,
            ts: r.i64()?,
            ts_has_date: r.flag()?,
            ts_has_year: r.flag()?,
            wrap_ts: r.i64()?,
            stream: r.str()?,
            host: r.str()?,
            pid: r.i64()?,
            tid: r.i64()?,
            device_id: r.i32()?,
            main: flags & 1 != 0,
            exc: flags & 2 != 0,
            ..Fields::default()
        };
        for value in &mut f.prefix {
            *value = r.i32()?;
        }
        f.torch_rank = r.i32()?;
        f.pg_id = r.i32()?;
        f.pg_guid = r.str()?;
        f.pg_desc = r.str()?;
        f.pg_rank = r.i32()?;
        f.seq = r.i64()?;
        f.op = r.str()?;
        f.last_enqueued = r.i64()?;
        f.last_completed = r.i64()?;
        f.comm = r.str()?;
        f.comm_id = r.str()?;
        f.comm_rank = r.i32()?;
        f.comm_nranks = r.i32()?;
        f.nccl_phase = r.str()?;
        f.gloo_rank = r.i32()?;
        f.gloo_size = r.i32()?;
        f.link_pid = r.i64()?;
        f.proctitle = r.str()?;
        f.server_args = r.flag()?;
        f.capped = r.flag()?;
        Some((file_id, line, at, f))
    }
}

/// Reads a part's optional fields (a field absent from the mask is None). Each read is
/// Some(value or None), None when the bytes end too soon or a text is not UTF-8.
#[allow(non_camel_case_types)]
struct Fields_<'r, 'b> {
    reader: &'r mut Reader<'b>,
    mask: u64,
    bit: u32,
}

impl<'b> Fields_<'_, 'b> {
    fn present(&mut self) -> bool {
        let present = self.mask & (1 << self.bit) != 0;
        self.bit += 1;
        present
    }

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

    fn i64(&mut self) -> Option<Option<i64>> {
        if !self.present() {
            return Some(None);
        }
        self.reader.take::<8>().map(|b| Some(i64::from_le_bytes(b)))
    }

    fn i32(&mut self) -> Option<Option<i32>> {
        if !self.present() {
            return Some(None);
        }
        self.reader.take::<4>().map(|b| Some(i32::from_le_bytes(b)))
    }

    fn byte(&mut self) -> Option<Option<u8>> {
        if !self.present() {
            return Some(None);
        }
        self.reader.take::<1>().map(|b| Some(b[0]))
    }

    fn flag(&mut self) -> Option<Option<bool>> {
        self.byte().map(|b| b.map(|b| b != 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Role;

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

    fn round_trip(fields: &Fields<'_>, at: Option<(u32, u32)>) {
        let mut bytes = Vec::new();
        encode_part(&mut bytes, 4, 77, at, fields);
        encode_part(&mut bytes, 4, 78, None, &Fields::default());
        let mut reader = Reader {
            bytes: &bytes,
            at: 0,
        };
        let (file_id, line, read_at, decoded) = reader.part().expect("a part");
        assert_eq!((file_id, line, read_at), (4, 77, at));
        let (_, line, _, empty) = reader.part().expect("a second part");
        assert_eq!(line, 78);
        assert_eq!(format!("{empty:?}"), format!("{:?}", Fields::default()));
        assert_eq!(reader.at, bytes.len());
        let owned = format!("{decoded:?}");
        // (the decoded fields borrow `bytes`: compared written out)
        let mut expected = fields.clone();
        if at.is_some() {
            expected.text = Cow::Borrowed("");
        }
        assert_eq!(owned, format!("{expected:?}"));
    }

    #[test]
    fn a_part_reads_back_as_written() {
        round_trip(&every_field("[rank3]:[E1129 10:00:00] glued"), None);
        // (a part that is its whole line leaves its text to the line)
        round_trip(&every_field("a whole line"), Some((2, 4096)));
        round_trip(&Fields::default(), None);
        let mut some = Fields {
            host: Some(Cow::Borrowed("h")),
            ts: Some(5),
            ..Fields::default()
        };
        some.prefix[6] = Some(1);
        round_trip(&some, Some((0, 0)));
    }

    #[test]
    fn cut_or_damaged_parts_are_refused_not_misread() {
        let mut bytes = Vec::new();
        encode_part(&mut bytes, 1, 2, None, &every_field("text"));
        for end in 0..bytes.len() {
            let mut reader = Reader {
                bytes: &bytes[..end],
                at: 0,
            };
            assert!(reader.part().is_none(), "cut at {end}");
        }
        let mut bad = bytes.clone();
        bad[11] = 200; // (the source, after file, line, place and part: no such family)
        assert!(Reader { bytes: &bad, at: 0 }.part().is_none());
    }
}
