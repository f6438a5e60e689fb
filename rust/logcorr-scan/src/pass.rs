//! The two passes over the files: `survey` (pass 1) and `attribute` (pass 2, the files read and
//! parsed again, each chunk with a look at the next one's first row).

use crate::attribute::{Ahead, Attributed, Attributor};
use crate::model::Columns;
use rustc_hash::FxHashSet as HashSet;

use crate::scan::{Chunk, FileSpec, Scanner};
use crate::survey::Survey;

/// Pass 1 over the files, a chunk at a time.
pub struct SurveyPass {
    pub scanner: Scanner,
    pub survey: Survey,
    pub lines: u64,
}

impl SurveyPass {
    pub fn new(files: Vec<FileSpec>, chunk_bytes: usize, max_rows: usize) -> SurveyPass {
        SurveyPass {
            scanner: Scanner::new(files, chunk_bytes, max_rows),
            survey: Survey::default(),
            lines: 0,
        }
    }

    /// Survey the next chunk; its bytes of lines, None at the end.
    pub fn step(&mut self) -> Option<usize> {
        let (bytes, rows) = self.scanner.next_into(&mut self.survey)?;
        self.lines += rows as u64;
        Some(bytes)
    }
}

/// Pass 2 over the files (or some of them), a chunk at a time.
pub struct AttributePass {
    scanner: Scanner,
    pub attributor: Attributor,
    next: Option<Chunk>,
    started: bool,
    /// Only these files' rows are wanted (a second reading for the diagnosis).
    wanted: Option<HashSet<u32>>,
}

/// One chunk of pass 2: its parsed columns and what attribution adds, and its bytes; or a
/// chunk passed over (bytes only).
pub enum Step {
    Attributed(Box<Columns>, Box<Attributed>, usize),
    Skipped(usize),
}

impl AttributePass {
    pub fn new(
        files: Vec<FileSpec>,
        chunk_bytes: usize,
        max_rows: usize,
        attributor: Attributor,
        wanted: Option<HashSet<u32>>,
    ) -> AttributePass {
        AttributePass {
            scanner: Scanner::new(files, chunk_bytes, max_rows),
            attributor,
            next: None,
            started: false,
            wanted,
        }
    }

    fn read(&mut self) -> Option<Chunk> {
        self.scanner
            .next_keyed(&self.attributor.keys, self.wanted.as_ref())
    }

    /// The next chunk attributed (or passed over).
    pub fn step(&mut self) -> Option<Step> {
        if !self.started {
            self.started = true;
            self.next = self.read();
        }
        let chunk = self.next.take()?;
        self.next = self.read();
        let ahead = match &self.next {
            Some(Chunk::Parsed(c, _, _)) if !c.is_empty() => Some(Ahead::of(c, 0)),
            Some(Chunk::Skipped(file_id, _)) => Some(Ahead::elsewhere(*file_id)),
            _ => None,
        };
        Some(match chunk {
            Chunk::Parsed(columns, ids, bytes) => {
                let attributed = self.attributor.attribute(&columns, &ids, ahead.as_ref());
                Step::Attributed(columns, Box::new(attributed), bytes)
            }
            Chunk::Skipped(_, bytes) => Step::Skipped(bytes),
        })
    }
}
