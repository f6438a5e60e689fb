//! Files -> chunks of parsed record parts, in (file, line) order.
//!
//! A chunk holds about `chunk_bytes` of lines and at most `max_rows` of them: a large file is
//! cut at line ends, small files are gathered (so 10,000 small files are not 10,000 chunks), and
//! a large file starts a chunk of its own (the chunks of two large files share no file).

use std::collections::VecDeque;
use std::sync::Arc;

use rustc_hash::FxHashSet as HashSet;
use std::io;
use std::path::PathBuf;

use crate::kept::Kept;
use crate::keys::{KeyId, Keys, Last};
use crate::model::{Columns, Fields, NOWHERE};
use crate::parse::{parse_chunk, parse_into, said_of, Line, Said, Scratch, Sink};
use crate::read::{split_lines_up_to, Blocks, Pieces, Problem, Spare};

/// One input file: its number and where it is, and how to name it in a warning.
#[derive(Clone, Debug)]
pub struct FileSpec {
    pub file_id: u32,
    pub path: PathBuf,
    pub display: String,
}

/// Consecutive lines of one file, decoded.
#[derive(Debug)]
pub struct Block {
    pub file_id: u32,
    pub first_line: u32,
    pub text: String,
    pub lines: Vec<(usize, usize)>,
}

impl Block {
    /// Its size as the chunking counts it: the lines' bytes and 8 a line.
    fn size(&self) -> usize {
        self.lines.iter().map(|(a, b)| b - a + 8).sum()
    }
}

/// The raw lines of a chunk.
#[derive(Debug, Default)]
pub struct RawChunk {
    pub blocks: Vec<Block>,
}

impl RawChunk {
    pub fn lines(&self) -> Vec<Line<'_>> {
        let mut out = Vec::with_capacity(self.rows());
        for (index, block) in self.blocks.iter().enumerate() {
            for (i, &(a, b)) in block.lines.iter().enumerate() {
                out.push(Line {
                    file_id: block.file_id,
                    line: block.first_line + i as u32,
                    text: &block.text[a..b],
                    at: (index as u32, a as u32),
                });
            }
        }
        out
    }

    pub fn rows(&self) -> usize {
        self.blocks.iter().map(|b| b.lines.len()).sum()
    }

    pub fn bytes(&self) -> usize {
        self.blocks
            .iter()
            .map(|b| b.lines.iter().map(|(a, z)| z - a + 1).sum::<usize>())
            .sum()
    }
}

/// A decoded piece of a file not yet cut into blocks: its text from `at` on, whose first line
/// is `next_line`.
struct Uncut {
    file_id: u32,
    next_line: u32,
    text: String,
    at: usize,
}

/// Reads files into chunks of raw lines.
pub struct ChunkReader {
    files: VecDeque<FileSpec>,
    current: Option<(FileSpec, Blocks, u32)>,
    chunk_bytes: usize,
    max_rows: usize,
    queued: VecDeque<Block>,
    /// What is left of the last decoded piece of a file, cut into blocks as they are asked for
    /// (so only one block's line spans exist at a time, however many lines the piece holds).
    uncut: Option<Uncut>,
    /// Buffers to read into (given back by whoever is done with a chunk's lines).
    spare: Arc<Spare>,
    pub warnings: Vec<String>,
}

impl ChunkReader {
    pub fn new(files: Vec<FileSpec>, chunk_bytes: usize, max_rows: usize) -> ChunkReader {
        ChunkReader {
            files: files.into(),
            current: None,
            chunk_bytes: chunk_bytes.max(1),
            max_rows: max_rows.max(1),
            queued: VecDeque::new(),
            uncut: None,
            spare: Arc::default(),
            warnings: Vec::new(),
        }
    }

    /// Read into the buffers `spare` is given back.
    pub fn with_spare(mut self, spare: Arc<Spare>) -> ChunkReader {
        self.spare = spare;
        self
    }

    /// The name of the file being read, if one is.
    pub fn reading(&self) -> Option<&str> {
        self.current
            .as_ref()
            .map(|(spec, _, _)| spec.display.as_str())
    }

    /// The next block of lines (at most `max_rows`), in file order.
    fn next_block(&mut self) -> Option<Block> {
        if let Some(block) = self.queued.pop_front() {
            return Some(block);
        }
        if let Some(block) = self.next_uncut() {
            return Some(block);
        }
        loop {
            if self.current.is_none() {
                let spec = self.files.pop_front()?;
                match Pieces::open(&spec.path) {
                    Ok(pieces) => {
                        let blocks = Blocks::new(pieces, self.chunk_bytes, self.spare.clone());
                        self.current = Some((spec, blocks, 1));
                    }
                    Err(error) => {
                        self.warnings.push(format!(
                            "{}: read failed: {}",
                            spec.display,
                            reason(&error)
                        ));
                        continue;
                    }
                }
            }
            let (spec, blocks, next_line) = self.current.as_mut().expect("a file");
            match blocks.next() {
                Some(bytes) => {
                    let text = match String::from_utf8(bytes) {
                        Ok(text) => text,
                        Err(error) => String::from_utf8_lossy(error.as_bytes()).into_owned(),
                    };
                    if text.is_empty() {
                        continue;
                    }
                    // (as many lines as `split_lines` gives: one per newline, and a last one
                    // when the text does not end with one)
                    let bytes = text.as_bytes();
                    let lines = memchr::memchr_iter(b'\n', bytes).count()
                        + usize::from(!bytes.ends_with(b"\n"));
                    self.uncut = Some(Uncut {
                        file_id: spec.file_id,
                        next_line: *next_line,
                        text,
                        at: 0,
                    });
                    *next_line += lines as u32;
                    return self.next_uncut();
                }
                None => {
                    if let Some(problem) = blocks.problem.take() {
                        self.warnings.push(problem_warning(&spec.display, &problem));
                    }
                    self.current = None;
                }
            }
        }
    }

    /// The next block of at most `max_rows` lines of the piece being cut, if one is.
    fn next_uncut(&mut self) -> Option<Block> {
        let uncut = self.uncut.as_mut()?;
        let rest = &uncut.text.as_bytes()[uncut.at..];
        // (cut after a newline: the lines come out as `split_lines` gives them on the whole;
        // their spans are those in the rest, where the block starts)
        let (lines, end) = split_lines_up_to(rest, self.max_rows);
        let (file_id, first_line) = (uncut.file_id, uncut.next_line);
        let text = if uncut.at == 0 && end == rest.len() {
            self.uncut.take()?.text
        } else if uncut.at == 0 && 2 * end >= rest.len() {
            // (the block is the larger part: the rest is copied, not the block, which keeps
            // the piece's memory, without its spare room unless texts are read into again)
            let after = self.spare.copy(&uncut.text[end..]);
            uncut.text.truncate(end);
            let mut text = std::mem::replace(&mut uncut.text, after);
            if !self.spare.recycles() {
                text.shrink_to_fit();
            }
            text
        } else {
            let text = self.spare.copy(&uncut.text[uncut.at..uncut.at + end]);
            uncut.at += end;
            if uncut.at == uncut.text.len() {
                self.uncut = None;
            }
            text
        };
        if let Some(uncut) = self.uncut.as_mut() {
            uncut.next_line += lines.len() as u32;
        }
        Some(Block {
            file_id,
            first_line,
            text,
            lines,
        })
    }

    /// The next chunk of raw lines; None when every file has been read.
    // (once a chunk: out of line, so that a profile names the thread that runs it;
    // benchmarks/instructions.py)
    #[inline(never)]
    pub fn next_chunk(&mut self) -> Option<RawChunk> {
        let mut chunk = RawChunk::default();
        let mut size = 0;
        let mut rows = 0;
        while let Some(block) = self.next_block() {
            let grown = block.size();
            let starts_large = grown >= self.chunk_bytes && block.first_line == 1;
            if !chunk.blocks.is_empty()
                && (starts_large || rows + block.lines.len() > self.max_rows)
            {
                self.queued.push_front(block);
                return Some(chunk);
            }
            rows += block.lines.len();
            size += grown;
            chunk.blocks.push(block);
            if size >= self.chunk_bytes || rows >= self.max_rows {
                return Some(chunk);
            }
        }
        (!chunk.blocks.is_empty()).then_some(chunk)
    }
}

fn reason(error: &io::Error) -> String {
    match error.kind() {
        io::ErrorKind::PermissionDenied => {
            "permission denied (make it readable, e.g. chmod a+r)".into()
        }
        _ => error.to_string(),
    }
}

fn problem_warning(display: &str, problem: &Problem) -> String {
    match problem {
        Problem::Gzip(why) => format!(
            "{display}: truncated or corrupt gzip ({why}); kept the lines that decoded before it"
        ),
        Problem::Io(why) => format!("{display}: read failed: {why}"),
    }
}

/// Parts gathered as columns, each with its key row's number.
struct Keyed<'k> {
    columns: Columns,
    ids: Vec<KeyId>,
    keys: &'k Keys,
    last: Last,
}

impl Sink for Keyed<'_> {
    fn push(&mut self, file_id: u32, line: u32, fields: &Fields<'_>, at: Option<(u32, u32)>) {
        self.columns.push(file_id, line, fields, at);
        // (pass 1 saw every key the same bytes give; one it did not is a bug: KeyId::MAX)
        let id = self.keys.find(file_id, fields, &mut self.last);
        self.ids.push(id.unwrap_or(KeyId::MAX));
    }

    fn finish(&mut self) {
        self.columns.finish();
    }
}

/// A chunk as pass 2 reads it: parsed (its columns, key numbers and bytes), or passed over
/// (it holds none of the files wanted: its first file and bytes).
pub enum Chunk {
    Parsed(Box<Columns>, Vec<KeyId>, usize),
    Skipped(u32, usize),
}

/// Reads and parses files a chunk at a time, carrying what the last lines of a chunk say to
/// the next one.
pub struct Scanner {
    pub reader: ChunkReader,
    /// The last two lines of the chunk before (what they say is the next chunk's context).
    previous: Vec<(u32, u32, String)>,
    scratch: Scratch,
    /// pass 1's parse of the chunks it kept (pass 2 takes a chunk's from there when kept)
    kept: Option<Arc<Kept>>,
}

/// A parsed chunk: its parts, and how many bytes of lines it holds.
pub struct Parsed {
    pub columns: Columns,
    pub bytes: usize,
    pub rows: usize,
}

impl Scanner {
    pub fn new(files: Vec<FileSpec>, chunk_bytes: usize, max_rows: usize) -> Scanner {
        Scanner::with_spare(files, chunk_bytes, max_rows, Arc::default())
    }

    /// A scanner that reads into the buffers `spare` is given back.
    pub fn with_spare(
        files: Vec<FileSpec>,
        chunk_bytes: usize,
        max_rows: usize,
        spare: Arc<Spare>,
    ) -> Scanner {
        Scanner {
            reader: ChunkReader::new(files, chunk_bytes, max_rows).with_spare(spare),
            previous: Vec::new(),
            scratch: Scratch::default(),
            kept: None,
        }
    }

    /// A scanner that takes a chunk's parse from `kept` when pass 1 kept it.
    pub fn with_kept(mut self, kept: Arc<Kept>) -> Scanner {
        self.kept = Some(kept);
        self
    }

    /// What the two lines before `raw` say (from the lines themselves, so that every reading
    /// of the files gives a chunk the same context, however the chunks before were read).
    fn before(&mut self, raw: &RawChunk) -> Vec<Said> {
        let before = context(&self.previous);
        self.previous = last_lines(&self.previous, raw);
        before
    }

    /// The next chunk parsed into `sink`: its bytes of lines and its lines.
    pub fn next_into(&mut self, sink: &mut impl Sink) -> Option<(usize, usize)> {
        let raw = self.reader.next_chunk()?;
        let lines = raw.lines();
        let before = self.before(&raw);
        parse_into(&lines, &before, sink, &mut self.scratch);
        Some((raw.bytes(), lines.len()))
    }

    /// The next chunk parsed into columns, with each part's key row number (`keys`: pass 1's),
    /// and its bytes of lines; a chunk that holds none of the `wanted` files (when given) is
    /// read but not parsed.
    pub fn next_keyed(&mut self, keys: &Keys, wanted: Option<&HashSet<u32>>) -> Option<Chunk> {
        let raw = self.reader.next_chunk()?;
        let bytes = raw.bytes();
        if let Some(wanted) = wanted {
            if !raw.blocks.iter().any(|b| wanted.contains(&b.file_id)) {
                return Some(Chunk::Skipped(
                    raw.blocks.first().map_or(0, |b| b.file_id),
                    bytes,
                ));
            }
        }
        let before = self.before(&raw);
        if let Some((mut columns, ids)) = self.kept.as_ref().and_then(|k| k.take(&raw, &before)) {
            columns.text.blocks = raw.blocks.into_iter().map(|b| b.text).collect();
            return Some(Chunk::Parsed(Box::new(columns), ids, bytes));
        }
        let lines = raw.lines();
        let mut keyed = Keyed {
            columns: Columns::default(),
            ids: Vec::with_capacity(lines.len()),
            keys,
            last: Last::default(),
        };
        keyed.columns.reserve(lines.len());
        parse_into(&lines, &before, &mut keyed, &mut self.scratch);
        drop(lines);
        let Keyed {
            mut columns, ids, ..
        } = keyed;
        columns.text.blocks = raw.blocks.into_iter().map(|b| b.text).collect();
        Some(Chunk::Parsed(Box::new(columns), ids, bytes))
    }

    /// The next chunk parsed.
    pub fn next_chunk(&mut self) -> Option<Parsed> {
        let raw = self.reader.next_chunk()?;
        let lines = raw.lines();
        let before = self.before(&raw);
        let (mut columns, _) = parse_chunk(&lines, &before);
        let (bytes, rows) = (raw.bytes(), lines.len());
        drop(lines);
        columns.text.blocks = raw.blocks.into_iter().map(|b| b.text).collect();
        Some(Parsed {
            columns,
            bytes,
            rows,
        })
    }
}

/// The context of a chunk's first lines: what the two lines before it say.
pub fn context(previous: &[(u32, u32, String)]) -> Vec<Said> {
    let lines: Vec<Line<'_>> = previous
        .iter()
        .map(|(file_id, line, text)| Line {
            file_id: *file_id,
            line: *line,
            text,
            at: NOWHERE,
        })
        .collect();
    said_of(&lines)
}

/// The last two lines read once `raw` is read (`previous`: the last two before it; a chunk
/// of one line keeps the line before it), owned.
pub fn last_lines(previous: &[(u32, u32, String)], raw: &RawChunk) -> Vec<(u32, u32, String)> {
    let mut out: Vec<(u32, u32, String)> = Vec::new();
    for block in raw.blocks.iter().rev() {
        for (i, &(a, b)) in block.lines.iter().enumerate().rev() {
            if out.len() == 2 {
                break;
            }
            out.push((
                block.file_id,
                block.first_line + i as u32,
                block.text[a..b].to_string(),
            ));
        }
    }
    out.extend(previous.iter().rev().take(2 - out.len()).cloned());
    out.reverse();
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read::split_lines;

    #[test]
    fn a_piece_is_cut_into_blocks_of_at_most_max_rows_lines_as_they_are_asked_for() {
        let dir = crate::TestDir::new("cut");
        let path = dir.join("a.log");
        let text: String = (0..10).map(|i| format!("line {i}\r\n")).collect::<String>() + "\nend";
        std::fs::write(&path, &text).expect("write");
        let spec = FileSpec {
            file_id: 3,
            path,
            display: "a.log".into(),
        };
        let mut reader = ChunkReader::new(vec![spec], 1 << 20, 4);
        let mut blocks = Vec::new();
        while let Some(block) = reader.next_block() {
            blocks.push(block);
        }
        assert_eq!(
            blocks.iter().map(|b| b.lines.len()).collect::<Vec<_>>(),
            [4, 4, 4]
        );
        assert_eq!(
            blocks.iter().map(|b| b.first_line).collect::<Vec<_>>(),
            [1, 5, 9]
        );
        let lines: Vec<&str> = blocks
            .iter()
            .flat_map(|b| b.lines.iter().map(|&(a, z)| &b.text[a..z]))
            .collect();
        let mut expected: Vec<String> = (0..10).map(|i| format!("line {i}")).collect();
        expected.extend(["".to_string(), "end".to_string()]);
        assert_eq!(lines, expected);
        // (each block holds its own lines' bytes, not a copy of the whole piece)
        assert_eq!(blocks[1].text, "line 4\r\nline 5\r\nline 6\r\nline 7\r\n");
        assert_eq!(blocks[2].text, "line 8\r\nline 9\r\n\nend");
    }

    #[test]
    fn blocks_hold_each_byte_once_in_order_whatever_the_piece_and_block_sizes() {
        let dir = crate::TestDir::new("sizes");
        let path = dir.join("b.log");
        let mut text = String::new();
        for i in 0..40 {
            match i % 5 {
                0 => text.push_str("\r\n"),
                1 => text.push_str(&"x".repeat(i * 3)),
                _ => text.push_str(&format!("[2026-12-03 03:00:{i:02} TP{i}] line {i}")),
            }
            text.push('\n');
        }
        text.push_str("no newline at the end");
        std::fs::write(&path, &text).expect("write");
        let expected_lines = split_lines(&text).len();
        for chunk_bytes in [1, 2, 5, 16, 64, 200, 1 << 20] {
            for max_rows in [1, 2, 3, 4, 7, 13, 25, 1000] {
                let spec = FileSpec {
                    file_id: 0,
                    path: path.clone(),
                    display: "b.log".into(),
                };
                let mut reader = ChunkReader::new(vec![spec], chunk_bytes, max_rows);
                let (mut joined, mut next_line) = (String::new(), 1);
                while let Some(block) = reader.next_block() {
                    assert!(block.lines.len() <= max_rows, "{chunk_bytes} {max_rows}");
                    assert_eq!(block.first_line, next_line, "{chunk_bytes} {max_rows}");
                    assert_eq!(block.lines, split_lines(&block.text));
                    next_line += block.lines.len() as u32;
                    joined.push_str(&block.text);
                }
                assert_eq!(joined, text, "{chunk_bytes} {max_rows}");
                assert_eq!(next_line as usize, expected_lines + 1);
            }
        }
    }

    #[test]
    fn blocks_read_into_buffers_given_back_are_the_blocks_read_into_new_ones() {
        let dir = crate::TestDir::new("spare");
        // (files past a spare buffer's least room, in pieces of about a MiB)
        let mut specs = Vec::new();
        for (n, lines) in [(0u32, 40_000usize), (1, 3), (2, 25_000)] {
            let text: String = (0..lines)
                .map(|i| {
                    format!(
                        "[2026-12-03 03:00:00 TP{n}] line {i} {}\r\n",
                        "x".repeat(i % 97)
                    )
                })
                .collect::<String>()
                + "no newline";
            let path = dir.join(format!("{n}.log"));
            std::fs::write(&path, &text).expect("write");
            specs.push(FileSpec {
                file_id: n,
                path,
                display: format!("{n}.log"),
            });
        }
        for max_rows in [5_000, 100_000] {
            let read = |spare: Option<Arc<Spare>>| {
                let mut reader = ChunkReader::new(specs.clone(), 1 << 20, max_rows);
                if let Some(spare) = &spare {
                    reader = reader.with_spare(spare.clone());
                }
                let mut seen = Vec::new();
                while let Some(block) = reader.next_block() {
                    seen.push((
                        block.file_id,
                        block.first_line,
                        block.lines.clone(),
                        block.text.clone(),
                    ));
                    if let Some(spare) = &spare {
                        spare.give(block.text);
                    }
                }
                (seen, spare.is_some_and(|s| s.recycles()))
            };
            let (fresh, _) = read(None);
            let (recycled, recycles) = read(Some(Arc::default()));
            assert!(recycles);
            assert_eq!(fresh.len(), recycled.len());
            assert!(fresh == recycled, "max_rows {max_rows}");
        }
    }
}
