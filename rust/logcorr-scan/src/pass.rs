//! The two passes over the files: `survey` (pass 1) and `attribute` (pass 2, the files read and
//! parsed again, each chunk with a look at the next one's first row).

use crate::attribute::{Ahead, Attributed, Attributor};
use crate::keys::KeyId;
use crate::model::Columns;
use crate::scan::{FileSpec, Scanner};
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

/// Pass 2 over the files, a chunk at a time.
pub struct AttributePass {
    scanner: Scanner,
    pub attributor: Attributor,
    next: Option<(Columns, Vec<KeyId>, usize)>,
    started: bool,
}

impl AttributePass {
    pub fn new(
        files: Vec<FileSpec>,
        chunk_bytes: usize,
        max_rows: usize,
        attributor: Attributor,
    ) -> AttributePass {
        AttributePass {
            scanner: Scanner::new(files, chunk_bytes, max_rows),
            attributor,
            next: None,
            started: false,
        }
    }

    /// The next chunk attributed: its parsed columns and what attribution adds, and its bytes.
    pub fn step(&mut self) -> Option<(Columns, Attributed, usize)> {
        if !self.started {
            self.started = true;
            self.next = self.scanner.next_keyed(&mut self.attributor.keys);
        }
        let (columns, ids, bytes) = self.next.take()?;
        self.next = self.scanner.next_keyed(&mut self.attributor.keys);
        let ahead = self
            .next
            .as_ref()
            .filter(|(c, _, _)| !c.is_empty())
            .map(|(c, _, _)| Ahead::of(c, 0));
        let attributed = self.attributor.attribute(&columns, &ids, ahead.as_ref());
        Some((columns, attributed, bytes))
    }
}
