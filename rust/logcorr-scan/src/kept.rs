//! Pass 1's parse of a chunk, kept for pass 2, so a line is parsed once.
//!
//! Pass 1 parses every line to survey it; pass 2 used to read and parse the same chunks again
//! before attributing them. Up to a budget of bytes, pass 1 now keeps what it parsed: the
//! chunk's columns without their text (the text is pass 2's own reading of the same bytes,
//! which the columns' spans point into), encoded, and each part's key row number. Pass 2 takes
//! a chunk's columns from here when its reading of the chunk is the same: the same lines of
//! the same files (file, first line, lines and bytes of each block) and the same context (what
//! the two lines before it say). Parsing is a function of those, so what is kept is what
//! pass 2 would have parsed; any chunk not kept (past the budget, or read otherwise) is
//! parsed again as before.

use std::sync::Mutex;

use rustc_hash::FxHashMap;

use crate::keys::KeyId;
use crate::model::{Columns, Fields};
use crate::parse::{Said, Sink};
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
    pub shape: Shape,
    pub before: Vec<Said>,
    /// Each part as parsed, encoded one after the other: (file, line, where the line stands
    /// in the chunk's blocks when the part's text is the whole line, its fields; the text
    /// left out when it is the line's).
    pub parts: Vec<u8>,
    /// Each part's key row (pass 1's numbering once the chunk's survey is merged).
    pub ids: Vec<KeyId>,
}

type Part<'a> = (u32, u32, Option<(u32, u32)>, Fields<'a>);

impl KeptChunk {
    fn size(&self) -> usize {
        self.parts.capacity() + self.ids.capacity() * std::mem::size_of::<KeyId>() + 64
    }
}

/// The kept chunks, by their first file and line, within `budget` bytes.
pub struct Kept {
    budget: usize,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    held: usize,
    /// bytes promised to chunks being parsed, not yet kept
    promised: usize,
    chunks: FxHashMap<(u32, u32), KeptChunk>,
}

/// About how many bytes a part's columns take encoded.
pub const BYTES_PER_PART: usize = 96;

impl Kept {
    pub fn new(budget: usize) -> Kept {
        Kept {
            budget,
            state: Mutex::new(State::default()),
        }
    }

    /// Whether a chunk of `parts` parts may be kept (room is set aside for it until `keep` or
    /// `forgo`).
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

    /// Keep `chunk` (`promised`: what `room_for` set aside for it).
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

    /// Give up what `room_for` set aside.
    pub fn forgo(&self, promised: usize) {
        if let Ok(mut state) = self.state.lock() {
            state.promised = state.promised.saturating_sub(promised);
        }
    }

    /// The columns and key rows pass 1 parsed for the chunk `raw` read with context `before`,
    /// when kept (and taken): its parts pushed as parsing pushes them, the text of a part that
    /// is a whole line taken from `raw`; the text's blocks are left for the caller to give.
    pub fn take(&self, raw: &RawChunk, before: &[Said]) -> Option<(Columns, Vec<KeyId>)> {
        let first = raw.blocks.first().map(|b| (b.file_id, b.first_line))?;
        let chunk = {
            let mut state = self.state.lock().ok()?;
            let chunk = state.chunks.remove(&first)?;
            state.held -= chunk.size();
            chunk
        };
        if chunk.before != before || chunk.shape != shape(raw) {
            return None;
        }
        let lines = raw.lines();
        let mut columns = Columns::default();
        columns.reserve(chunk.ids.len());
        let mut rest = chunk.parts.as_slice();
        let mut at_line = 0;
        while !rest.is_empty() {
            let ((file_id, line, at, mut fields), after): (Part<'_>, &[u8]) =
                postcard::take_from_bytes(rest).ok()?;
            rest = after;
            if let Some(at) = at {
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
                fields.text = std::borrow::Cow::Borrowed(whole.text);
            }
            columns.push(file_id, line, &fields, at);
        }
        (columns.len() == chunk.ids.len()).then_some((columns, chunk.ids))
    }

    /// Bytes held.
    pub fn held(&self) -> usize {
        self.state.lock().map_or(0, |s| s.held)
    }
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
    /// The chunk kept: its shape, context and parts.
    pub fn kept(self, shape: Shape, before: Vec<Said>) -> (Survey, KeptChunk) {
        let chunk = KeptChunk {
            shape,
            before,
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
        let encoded = if at.is_some() {
            // (the part is the whole line: pass 2 has its text)
            let part = Fields {
                text: std::borrow::Cow::Borrowed(""),
                ..f.clone()
            };
            postcard::to_extend(&(file_id, line, at, &part), std::mem::take(&mut self.parts))
        } else {
            postcard::to_extend(&(file_id, line, at, f), std::mem::take(&mut self.parts))
        };
        // (encoding into a vector does not fail; should it, the chunk is parsed again)
        self.parts = encoded.unwrap_or_default();
    }
}
