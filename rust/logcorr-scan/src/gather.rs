//! What pass 2 keeps of each attributed line for the header and the diagnosis, without the
//! timeline itself: the counts (evidence, why not, notes; each process's lines, first row,
//! latest time, latest batch line) and the *event rows* (a message stem, an NCCL communicator
//! field or a torch rank), whatever the view.
//!
//! A line is gathered once its sort key is known: the opening lines of a file that wait for
//! its first time are set aside (compactly) and gathered when it comes.

use std::collections::BTreeSet;

use rustc_hash::FxHashMap as HashMap;

use aho_corasick::{AhoCorasick, AhoCorasickKind, MatchKind};
use regex::Regex;

use crate::attribute::Coordinates;
use crate::keys::KeyId;
use crate::model::TextColumn;
use crate::text::{len_chars, LiteralSet};

/// What a dead child's line (`Process `) and glog's fatal severity (a `[F` before its stamp)
/// hold, looked for in one pass before their patterns (`Gather::says`).
static SAYS: LiteralSet = LiteralSet::new(&["Process ", "[F"]);

/// A set of literals, one of which a text may hold: packed (SIMD) searchers over groups of
/// them (a packed searcher slows past a few dozen literals; measured on the benchmark set's
/// lines, two groups of ~54 test a line ~2.5x faster than one automaton over all), else an
/// automaton.
#[derive(Clone)]
enum Literals {
    Packed(Vec<aho_corasick::packed::Searcher>),
    Automaton(AhoCorasick),
    /// A few literals that all start with one byte (`] Decode batch`, `] Prefill batch`):
    /// compared where that byte stands (a line has few: an SGLang line one `]`), ~5x faster
    /// than an automaton's prefilter, which stops at every line's `] `.
    Led(u8, Vec<Box<[u8]>>),
}

/// The most literals `Literals::Led` compares at each place of their first byte.
const LED_MOST: usize = 8;

/// The most literals a packed searcher of `Literals` holds.
const PACKED_GROUP: usize = 54;

impl Literals {
    fn new(patterns: &[String]) -> Result<Literals, String> {
        let first = patterns.first().and_then(|p| p.as_bytes().first()).copied();
        if let Some(first) = first {
            if patterns.len() <= LED_MOST
                && patterns
                    .iter()
                    .all(|p| p.as_bytes().first() == Some(&first))
            {
                let literals = patterns.iter().map(|p| p.as_bytes().into()).collect();
                return Ok(Literals::Led(first, literals));
            }
        }
        let groups = patterns.len().div_ceil(PACKED_GROUP).max(1);
        let size = patterns.len().div_ceil(groups).max(1);
        let packed: Option<Vec<_>> = patterns
            .chunks(size)
            .map(|group| {
                aho_corasick::packed::Config::new()
                    .match_kind(aho_corasick::packed::MatchKind::LeftmostFirst)
                    .heuristic_pattern_limits(false)
                    .builder()
                    .extend(group)
                    .build()
            })
            .collect();
        if let Some(searchers) = packed.filter(|s| !s.is_empty()) {
            return Ok(Literals::Packed(searchers));
        }
        AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostFirst)
            .kind(Some(AhoCorasickKind::DFA))
            .build(patterns)
            .map(Literals::Automaton)
            .map_err(|e| e.to_string())
    }

    fn is_match(&self, text: &str) -> bool {
        match self {
            Literals::Packed(searchers) => searchers.iter().any(|s| s.find(text).is_some()),
            Literals::Automaton(automaton) => automaton.is_match(text),
            Literals::Led(first, literals) => {
                let bytes = text.as_bytes();
                memchr::memchr_iter(*first, bytes)
                    .any(|at| literals.iter().any(|l| bytes[at..].starts_with(l)))
            }
        }
    }

    /// Whether each row of `texts` holds one of the literals, each of its buffers searched
    /// once by each packed searcher (a searcher's matches do not overlap: a match that runs
    /// past a row's start or end could hide one inside that row, so such a row is searched
    /// on its own).
    fn rows_holding(&self, texts: &TextColumn) -> Vec<bool> {
        let Literals::Packed(searchers) = self else {
            return (0..texts.len())
                .map(|r| self.is_match(texts.get(r)))
                .collect();
        };
        let mut placed: Vec<Placed> = searchers
            .iter()
            .map(|searcher| {
                Placed::new(texts, |buffer, found| {
                    found.extend(
                        searcher
                            .find_iter(buffer)
                            .map(|m| (m.start() as u32, m.end() as u32, 1)),
                    );
                })
            })
            .collect();
        (0..texts.len())
            .map(|row| {
                let (mut inside, mut across) = (false, false);
                for matches in &mut placed {
                    let (tags, crossed) = matches.within(texts, row);
                    inside |= tags != 0;
                    across |= crossed;
                }
                inside || (across && self.is_match(texts.get(row)))
            })
            .collect()
    }
}

/// The matches of one search in each buffer of a text column ((start, end, tags), by start),
/// read row by row: rows mostly follow one another, so a row's are found by stepping on from
/// the last row's (by a binary search when a row starts before it).
struct Placed {
    found: Vec<Vec<(u32, u32, u32)>>,
    /// per buffer: the last row's start there, and its first match that starts at or after it
    cursors: Vec<(u32, usize)>,
}

impl Placed {
    /// `search(buffer, found)` puts a buffer's matches in `found`, in order of their start.
    fn new(texts: &TextColumn, mut search: impl FnMut(&str, &mut Vec<(u32, u32, u32)>)) -> Placed {
        let found: Vec<Vec<(u32, u32, u32)>> = texts
            .blocks
            .iter()
            .map(String::as_str)
            .chain([texts.extra.as_str()])
            .map(|buffer| {
                let mut found = Vec::new();
                search(buffer, &mut found);
                found
            })
            .collect();
        let cursors = vec![(0, 0); found.len()];
        Placed { found, cursors }
    }

    /// The tags of the matches inside row `row` (or-ed), and whether a match runs across its
    /// start or its end.
    #[inline]
    fn within(&mut self, texts: &TextColumn, row: usize) -> (u32, bool) {
        let (buffer, from, len) = texts.spans[row];
        let buffer = if buffer == u32::MAX {
            self.found.len() - 1
        } else {
            buffer as usize
        };
        let to = from + len;
        let matches = &self.found[buffer];
        let (last_from, mut first) = self.cursors[buffer];
        if from < last_from {
            first = matches.partition_point(|&(start, _, _)| start < from);
        } else {
            while first < matches.len() && matches[first].0 < from {
                first += 1;
            }
        }
        self.cursors[buffer] = (from, first);
        let mut across = first > 0 && matches[first - 1].1 > from;
        let mut tags = 0;
        for &(_, end, tag) in matches[first..].iter().take_while(|(s, _, _)| *s < to) {
            if end <= to {
                tags |= tag;
            } else {
                across = true;
            }
        }
        (tags, across)
    }
}

/// Which literals of `Gather::says` (`Process `, `[F`) each row of `texts` holds (bit `i`:
/// literal `i`), each buffer searched once (a row that a match runs into or out of is
/// searched on its own).
pub fn says_of(texts: &TextColumn) -> Vec<u32> {
    let mut placed = Placed::new(texts, |buffer, found| {
        SAYS.visit(buffer, |literal, start| {
            let end = start + SAYS.literal(literal).len();
            found.push((start as u32, end as u32, 1 << literal));
            true
        });
        // (in the text's order but on a CPU without a packed searcher: literal by literal)
        found.sort_unstable();
    });
    (0..texts.len())
        .map(|row| match placed.within(texts, row) {
            (_, true) => SAYS.held(texts.get(row)),
            (held, false) => held,
        })
        .collect()
}

/// Sort keys of lines without a time: after every timed line.
pub const NO_TIME: i64 = i64::MAX;

/// What makes a line an event row, and a progress line (from the diagnosis's vocabulary).
#[derive(Clone)]
pub struct Selection {
    stems: Literals,
    /// The longest stem, in characters (the seam of a hard-wrapped line read on each side).
    longest: usize,
    child_died: Regex,
    glog_fatal: Regex,
    progress: Literals,
    /// A line at least this long (bytes) may be a hard wrap's first half.
    wrap_min: usize,
}

impl Selection {
    pub fn new(
        stems: &[String],
        child_died: &str,
        glog_fatal: &str,
        progress: &[String],
        wrap_min: usize,
    ) -> Result<Selection, String> {
        Ok(Selection {
            stems: Literals::new(stems)?,
            longest: stems.iter().map(|s| s.chars().count()).max().unwrap_or(0),
            child_died: Regex::new(child_died).map_err(|e| e.to_string())?,
            glog_fatal: Regex::new(glog_fatal).map_err(|e| e.to_string())?,
            progress: Literals::new(progress)?,
            wrap_min,
        })
    }
}

/// One event row (the columns the rules read).
#[derive(Debug, Clone, Default)]
pub struct Event {
    pub sk: i64,
    pub file_id: u32,
    pub line: u32,
    pub part: u16,
    pub text: String,
    pub proc: Option<u32>,
    pub role: Option<u8>,
    pub ts_full: Option<i64>,
    pub host: Option<String>,
    pub pid: Option<i64>,
    pub record: u32,
    pub starts_record: Option<bool>,
    pub torch_rank: Option<i32>,
    pub pg_desc: Option<String>,
    pub pg_rank: Option<i32>,
    pub seq: Option<i64>,
    pub op: Option<String>,
    pub last_enqueued: Option<i64>,
    pub last_completed: Option<i64>,
    pub comm: Option<String>,
    pub comm_id: Option<String>,
    pub comm_rank: Option<i32>,
    pub comm_nranks: Option<i32>,
    pub nccl_phase: Option<String>,
    pub next: Option<String>,
    pub stream: Option<String>,
    /// Whether the text says why the row is an event row (a stem, a dead child, glog's fatal
    /// severity), not only its fields (a communicator, a torch rank).
    pub said: bool,
}

/// What a line gives the counts.
#[derive(Debug, Clone)]
pub struct Counted {
    pub file_id: u32,
    pub line: u32,
    pub part: u16,
    pub proc: Option<u32>,
    pub key: KeyId,
    pub pid: Option<i64>,
    pub coordinates: Coordinates,
    pub ts_full: Option<i64>,
    pub evidence: Option<u8>,
    pub why: Option<&'static str>,
    pub note: Option<&'static str>,
    pub capped: bool,
    pub progress: bool,
}

/// A process's lines under one (host, PID): how many, and the first one's place and
/// coordinates.
#[derive(Debug, Clone)]
pub struct Person {
    pub lines: u64,
    pub first: (i64, u32, u32, u16),
    pub coordinates: Coordinates,
}

/// A process's latest time and the place of its last timed line.
#[derive(Debug, Clone, Copy)]
pub struct Last {
    pub ts_full: i64,
    pub at: (i64, u32, u32, u16),
}

/// The counts of the lines gathered so far.
#[derive(Debug, Default, Clone)]
pub struct Tally {
    pub lines: u64,
    pub evidence: HashMap<u8, u64>,
    pub why: HashMap<&'static str, u64>,
    pub notes: HashMap<&'static str, u64>,
    pub capped: u64,
    pub procs: BTreeSet<u32>,
    /// (process, host key, pid) -> its lines
    pub people: HashMap<(u32, KeyId, Option<i64>), Person>,
    pub last: HashMap<u32, Last>,
    pub progress: HashMap<u32, i64>,
    /// (file, process) -> (lines, first line): where each process's lines are
    pub file_procs: HashMap<(u32, u32), (u64, u32)>,
    /// the process added to `procs` last
    last_proc: Option<u32>,
}

impl Tally {
    /// Add the counts of other lines (another worker's).
    pub fn merge(&mut self, other: Tally) {
        self.lines += other.lines;
        for (e, n) in other.evidence {
            *self.evidence.entry(e).or_default() += n;
        }
        for (w, n) in other.why {
            *self.why.entry(w).or_default() += n;
        }
        for (w, n) in other.notes {
            *self.notes.entry(w).or_default() += n;
        }
        self.capped += other.capped;
        self.procs.extend(other.procs);
        for (key, person) in other.people {
            match self.people.get_mut(&key) {
                None => {
                    self.people.insert(key, person);
                }
                Some(mine) => {
                    mine.lines += person.lines;
                    if person.first < mine.first {
                        mine.first = person.first;
                        mine.coordinates = person.coordinates;
                    }
                }
            }
        }
        for (proc, last) in other.last {
            let mine = self.last.entry(proc).or_insert(last);
            mine.ts_full = mine.ts_full.max(last.ts_full);
            if last.at > mine.at {
                mine.at = last.at;
            }
        }
        for (proc, ts) in other.progress {
            let mine = self.progress.entry(proc).or_insert(ts);
            *mine = (*mine).max(ts);
        }
        for (key, (n, line)) in other.file_procs {
            let mine = self.file_procs.entry(key).or_insert((0, line));
            mine.0 += n;
            mine.1 = mine.1.min(line);
        }
    }

    fn add(&mut self, row: &Counted, sk: i64) {
        self.lines += 1;
        if let Some(e) = row.evidence {
            *self.evidence.entry(e).or_default() += 1;
        }
        if let Some(w) = row.why {
            *self.why.entry(w).or_default() += 1;
        }
        if let Some(n) = row.note {
            *self.notes.entry(n).or_default() += 1;
        }
        self.capped += u64::from(row.capped);
        let Some(proc) = row.proc else { return };
        let at = (sk, row.file_id, row.line, row.part);
        // (lines of a process mostly follow one another: its number is in the set already)
        if self.last_proc != Some(proc) {
            self.procs.insert(proc);
            self.last_proc = Some(proc);
        }
        let person = self
            .people
            .entry((proc, row.key, row.pid))
            .or_insert(Person {
                lines: 0,
                first: at,
                coordinates: row.coordinates,
            });
        person.lines += 1;
        if at < person.first {
            person.first = at;
            person.coordinates = row.coordinates;
        }
        if let Some(ts) = row.ts_full {
            let last = self.last.entry(proc).or_insert(Last { ts_full: ts, at });
            last.ts_full = last.ts_full.max(ts);
            if at > last.at {
                last.at = at;
            }
            if row.progress {
                let latest = self.progress.entry(proc).or_insert(ts);
                *latest = (*latest).max(ts);
            }
        }
        let entry = self
            .file_procs
            .entry((row.file_id, proc))
            .or_insert((0, row.line));
        entry.0 += 1;
        entry.1 = entry.1.min(row.line);
    }
}

/// The counts, each chunk's event rows, and what waits for a file's first time.
#[derive(Clone)]
pub struct Gather {
    pub selection: Selection,
    pub tally: Tally,
    /// The event rows gathered since they were last taken.
    pub events: Vec<Event>,
    /// Per file waiting for its first time: its lines' counts so far (as if their sort key were
    /// 0: they will all take one key, so their order among themselves is their place in the
    /// file) and their event rows.
    waiting: HashMap<u32, (Tally, Vec<Event>)>,
}

impl Gather {
    pub fn new(selection: Selection) -> Gather {
        Gather {
            selection,
            tally: Tally::default(),
            events: Vec::new(),
            waiting: HashMap::default(),
        }
    }

    /// Gather a line whose sort key is `sk` (None: it waits for its file's first time).
    /// (`event`: boxed, so that the many lines that are none pass a pointer, not its room)
    pub fn add(&mut self, counted: &Counted, event: Option<Box<Event>>, sk: Option<i64>) {
        match sk {
            Some(sk) => {
                self.tally.add(counted, sk);
                if let Some(mut event) = event {
                    event.sk = sk;
                    self.events.push(*event);
                }
            }
            None => {
                let waiting = self.waiting.entry(counted.file_id).or_default();
                waiting.0.add(counted, 0);
                waiting.1.extend(event.map(|e| *e));
            }
        }
    }

    /// A file's waiting lines take `key` (None: they sort last).
    pub fn settle(&mut self, file_id: u32, key: Option<i64>) {
        if let Some((mut counted, events)) = self.waiting.remove(&file_id) {
            let sk = key.unwrap_or(NO_TIME);
            for person in counted.people.values_mut() {
                person.first.0 = sk;
            }
            for last in counted.last.values_mut() {
                last.at.0 = sk;
            }
            self.tally.merge(counted);
            for mut event in events {
                event.sk = sk;
                self.events.push(event);
            }
        }
    }

    /// Whether `text` shows a batch line (a scheduler's progress).
    pub fn progress(&self, text: &str) -> bool {
        self.selection.progress.is_match(text)
    }

    /// Whether each of a chunk's texts holds a stem.
    pub fn stems_of(&self, texts: &TextColumn) -> Vec<bool> {
        self.selection.stems.rows_holding(texts)
    }

    /// The event text of a line, when it is an event row: its message (the line under a
    /// wrapper), or, for a line a hard wrap or a `\\` may have cut a stem of, the two halves
    /// joined when their seam holds a stem.
    ///
    /// With it, whether the text holds a stem (`stem`: whether it does, from `stems_of`;
    /// `other`: the row's other reasons to be one).
    pub fn event_text(
        &self,
        text: &str,
        msg: Option<&str>,
        next: Option<&str>,
        stem: bool,
        other: bool,
    ) -> Option<(String, bool)> {
        let s = &self.selection;
        let cut = !stem && next.is_some() && (text.len() >= s.wrap_min || text.ends_with('\\'));
        let whole = msg.unwrap_or(text);
        if !cut {
            return (stem || other).then(|| (whole.to_string(), stem));
        }
        let next = next.unwrap_or("");
        let kept = whole.strip_suffix('\\').unwrap_or(whole);
        let tail_from = len_chars(kept).saturating_sub(s.longest);
        let tail = crate::text::slice_chars(kept, tail_from, None);
        let head = crate::text::slice_chars(next, 0, Some(s.longest));
        // (a stem the next line holds by itself is that line's, not one the wrap cut)
        if s.stems.is_match(&format!("{tail}{head}")) && !s.stems.is_match(head) {
            Some((format!("{kept}{next}"), true))
        } else {
            other.then(|| (whole.to_string(), false))
        }
    }

    /// What the row's text says besides a stem that makes it an event row: a dead child
    /// (`Process SpawnProcess-1:`) or glog's fatal severity. (Its fields can too: a
    /// communicator or a torch rank.)
    ///
    /// `held`: which of its literals (`Process `, `[F`) the text holds (`says_of`).
    pub fn says(&self, text: &str, held: u32, msg: Option<&str>) -> bool {
        let s = &self.selection;
        (held & 1 != 0 && s.child_died.is_match(text))
            || (held & 2 != 0 && s.glog_fatal.is_match(text))
            // (a message that is the end of its text holds what the text holds there)
            || msg.is_some_and(|m| {
                (held & 1 != 0 || !text.ends_with(m))
                    && SAYS.held(m) & 1 != 0
                    && s.child_died.is_match(m)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Rows over `blocks` (each a span of a block, possibly overlapping or empty) and texts of
    /// their own (in the extra buffer, one after another).
    fn texts_of(blocks: &[String], spans: &[(usize, usize, usize)], own: &[String]) -> TextColumn {
        let mut texts = TextColumn {
            blocks: blocks.to_vec(),
            ..TextColumn::default()
        };
        for &(block, from, len) in spans {
            let block_text = &blocks[block % blocks.len()];
            let from = from % (block_text.len() + 1);
            let to = (from + len).min(block_text.len());
            let at = (block % blocks.len()) as u32;
            texts.push(&block_text[from..to], Some((at, from as u32)));
        }
        for text in own {
            texts.push(text, None);
        }
        texts
    }

    fn stem_patterns() -> Vec<String> {
        // (overlapping ones, ones that are prefixes of others, a newline: across rows)
        let mut patterns: Vec<String> = (0..110).map(|i| format!("stem{i:03}")).collect();
        patterns
            .extend(["Traceback (most", "Traceback", "back (m", "ab\ncd", "aaa"].map(String::from));
        patterns
    }

    #[test]
    fn rows_holding_a_literal_are_those_a_search_of_each_row_finds() {
        let patterns = stem_patterns();
        let literals = Literals::new(&patterns).expect("literals");
        assert!(matches!(&literals, Literals::Packed(groups) if groups.len() == 3));
        let blocks = vec![
            "x Traceback (most recent call last):\nstem007 and stem1\n10 aaaa\nab\ncd\n"
                .to_string(),
            "Traceback (most".to_string(),
        ];
        // rows: whole lines, a row cut inside a match, rows across lines, an empty row
        let spans = [
            (0, 0, 36),
            (0, 0, 12),
            (0, 2, 9),
            (0, 5, 10),
            (0, 37, 17),
            (0, 45, 5),
            (0, 55, 4),
            (0, 55, 2),
            (0, 60, 5),
            (0, 58, 0),
            (1, 0, 15),
            (1, 1, 14),
        ];
        let own = [
            "stem00".to_string(),
            "1 back".to_string(),
            " (more".to_string(),
        ];
        let texts = texts_of(&blocks, &spans, &own);
        let held = literals.rows_holding(&texts);
        assert_eq!(held.len(), texts.len());
        for (row, &h) in held.iter().enumerate() {
            let text = texts.get(row);
            assert_eq!(h, plain(&patterns, text), "row {row}: {text:?}");
        }
        assert!(held.iter().any(|&h| h) && held.iter().any(|&h| !h));
    }

    proptest! {
        #[test]
        fn rows_holding_a_literal_agree_with_a_search_of_each_row(
            blocks in prop::collection::vec("(stem0[0-9]{2}|Trace|back|Traceback \\(most|aa|a|b|\\n|c|d| |é){0,40}", 1..4),
            spans in prop::collection::vec((0usize..4, 0usize..200, 0usize..60), 0..40),
            own in prop::collection::vec("(stem0[0-9]{2}|Trace|back|aa|a|b| ){0,6}", 0..6),
        ) {
            let patterns = stem_patterns();
            let literals = Literals::new(&patterns).expect("literals");
            let texts = texts_of(&blocks, &char_spans(&blocks, spans), &own);
            let held = literals.rows_holding(&texts);
            for (row, &h) in held.iter().enumerate() {
                let text = texts.get(row);
                prop_assert_eq!(h, plain(&patterns, text), "{:?}", text);
            }
        }

        #[test]
        fn what_a_row_says_is_found_as_a_search_of_each_row_finds_it(
            blocks in prop::collection::vec("(Process |Proc|ess |\\[F|\\[|F|x|\\n| |é){0,40}", 1..4),
            spans in prop::collection::vec((0usize..4, 0usize..200, 0usize..60), 0..40),
            own in prop::collection::vec("(Process |Proc|ess |\\[F|\\[|F|x){0,6}", 0..6),
        ) {
            let texts = texts_of(&blocks, &char_spans(&blocks, spans), &own);
            let held = says_of(&texts);
            prop_assert_eq!(held.len(), texts.len());
            for (row, &h) in held.iter().enumerate() {
                let text = texts.get(row);
                prop_assert_eq!(h, SAYS.held(text), "{:?}", text);
            }
        }
    }

    /// Whether any of `patterns` occurs in `text`, by a plain search of each.
    fn plain(patterns: &[String], text: &str) -> bool {
        patterns.iter().any(|p| text.contains(p.as_str()))
    }

    fn finds_what_a_plain_search_finds(literals: &Literals, patterns: &[String], lines: &[&str]) {
        for line in lines {
            assert_eq!(literals.is_match(line), plain(patterns, line), "{line:?}");
        }
    }

    #[test]
    fn literals_in_groups_find_what_a_plain_search_finds() {
        let patterns: Vec<String> = (0..130)
            .map(|i| format!("stem{i:03} {}", ["NCCL", "error", "Killed", "WARN"][i % 4]))
            .chain(["Killed".to_string(), "e".repeat(7)])
            .collect();
        let literals = Literals::new(&patterns).expect("literals");
        assert!(matches!(&literals, Literals::Packed(groups) if groups.len() == 3));
        let lines = [
            "[2026-11-29 10:00:00 TP0] Decode batch. #running-req: 8",
            "stem129 NCCL",
            "prefix stem064 NCCL suffix",
            "stem064 error",
            "Process was Killed",
            "eeeeee",
            "eeeeeee",
            "",
            "stem12",
        ];
        finds_what_a_plain_search_finds(&literals, &patterns, &lines);
    }

    #[test]
    fn literals_led_by_one_byte_find_what_a_plain_search_finds() {
        let patterns: Vec<String> = ["] Decode batch", "] Prefill batch", "]]x"]
            .map(String::from)
            .to_vec();
        let literals = Literals::new(&patterns).expect("literals");
        assert!(matches!(&literals, Literals::Led(b']', l) if l.len() == 3));
        let lines = [
            "[2026-11-29 10:00:00 TP0] Decode batch. #running-req: 8",
            "[2026-11-29 10:00:00 TP0] Prefill batch. #new-seq: 1",
            "[2026-11-29 10:00:00 TP0] Decode batc",
            "[a] [b] ] Prefill batch",
            "x]] Decode batch",
            "]]]x",
            "]]",
            "]",
            "",
            "[2026-11-29 10:00:00 TP0] décodé ] Decode batch",
            "no close bracket at all Decode batch",
        ];
        finds_what_a_plain_search_finds(&literals, &patterns, &lines);
        // (literals that do not share their first byte, or too many, are not led)
        let mixed = Literals::new(&["] a".to_string(), "b".to_string()]).expect("mixed");
        assert!(!matches!(mixed, Literals::Led(..)));
        let many: Vec<String> = (0..=LED_MOST).map(|i| format!("]{i}")).collect();
        assert!(!matches!(
            Literals::new(&many).expect("many"),
            Literals::Led(..)
        ));
    }

    #[test]
    fn a_dead_child_is_read_in_the_text_or_in_a_message_the_text_does_not_hold() {
        let child_died = format!(r"(?:^|[\s)\]]){}", crate::patterns::CHILD_DIED);
        let selection =
            Selection::new(&["Killed".to_string()], &child_died, r"\[F\d{4}", &[], 60).expect("ok");
        let gather = Gather::new(selection);
        // (as a chunk's row: what it holds found by `says_of`)
        let says = |text: &str, msg: Option<&str>| {
            let mut texts = TextColumn::default();
            texts.push(text, None);
            gather.says(text, says_of(&texts)[0], msg)
        };
        assert!(says("Process SpawnProcess-1:", None));
        assert!(says(
            "sglang-1  | Process SpawnProcess-1:",
            Some("Process SpawnProcess-1:")
        ));
        // (a Docker body's escapes decoded: the message holds what the text does not)
        assert!(says(
            r#"{"log":"Process\u0020SpawnProcess-1:\n"}"#,
            Some("Process SpawnProcess-1:")
        ));
        assert!(!says(
            "sglang-1  | Process SpawnProcess-1: x",
            Some("Process SpawnProcess-1: x")
        ));
        assert!(!says(
            "sglang-1  | ProcessSpawn-1:",
            Some("ProcessSpawn-1:")
        ));
        assert!(says("[F1129 10:00:00.1 x.cc:1] y", None));
        // (the `[F` after another `[`, after a `[` that is no `[F`, or none at the end)
        assert!(says(
            "[rank2]:[F1129 10:09:00.48 CUDAGraph.cpp:150] x",
            None
        ));
        assert!(says("[rank2]:[E1129 x] [F1129 10:09:00.48 a.cc:1]", None));
        assert!(!says("[rank2]:[E1129 10:09:00.48 x.cc:1] [Foo] [F", None));
        assert!(!says("[rank2]:[E1129 10:09:00.48 x.cc:1] F1129", None));
    }

    /// Spans of `blocks` (block, from, length) cut at character boundaries (a row is a str).
    fn char_spans(
        blocks: &[String],
        spans: Vec<(usize, usize, usize)>,
    ) -> Vec<(usize, usize, usize)> {
        spans
            .into_iter()
            .map(|(b, from, len)| {
                let block = &blocks[b % blocks.len()];
                let mut from = from % (block.len() + 1);
                while !block.is_char_boundary(from) {
                    from -= 1;
                }
                let mut to = (from + len).min(block.len());
                while !block.is_char_boundary(to) {
                    to -= 1;
                }
                (b, from, to - from)
            })
            .collect()
    }

    fn row(line: u32, proc: Option<u32>, ts_full: Option<i64>) -> Counted {
        let mut coordinates = [None; 13];
        coordinates[0] = proc.map(|p| p as i32);
        Counted {
            file_id: 2,
            line,
            part: 0,
            proc,
            key: 1,
            pid: Some(40),
            coordinates,
            ts_full,
            evidence: Some(1),
            why: proc.is_none().then_some("no process"),
            note: None,
            capped: false,
            progress: ts_full.is_some(),
        }
    }

    fn tally_text(t: &Tally) -> String {
        let mut people: Vec<_> = t
            .people
            .iter()
            .map(|(k, p)| (*k, p.lines, p.first))
            .collect();
        people.sort();
        let mut last: Vec<_> = t.last.iter().map(|(k, l)| (*k, l.ts_full, l.at)).collect();
        last.sort();
        let mut procs: Vec<_> = t.file_procs.iter().map(|(k, v)| (*k, *v)).collect();
        procs.sort();
        let mut progress: Vec<_> = t.progress.iter().map(|(k, v)| (*k, *v)).collect();
        progress.sort();
        format!(
            "{} {:?} {:?} {people:?} {last:?} {procs:?} {progress:?}",
            t.lines, t.evidence, t.why
        )
    }

    #[test]
    fn lines_that_wait_for_their_files_first_time_count_as_if_they_had_its_key() {
        let selection = Selection::new(&["Killed".to_string()], "child died", r"\[F\d{4}", &[], 60)
            .expect("selection");
        let rows = [
            row(1, Some(3), None),
            row(2, None, None),
            row(3, Some(3), Some(7)),
            row(4, Some(5), Some(9)),
            row(5, Some(3), None),
        ];
        // (a process's earlier line, from another file, already counted with a later key)
        let mut earlier = row(9, Some(3), Some(2));
        earlier.file_id = 1;
        for key in [Some(1_000), None] {
            let mut waited = Gather::new(selection.clone());
            waited.add(&earlier, None, Some(5_000));
            for r in &rows {
                waited.add(r, None, None);
            }
            waited.settle(2, key);
            let mut direct = Gather::new(selection.clone());
            direct.add(&earlier, None, Some(5_000));
            for r in &rows {
                direct.add(r, None, Some(key.unwrap_or(NO_TIME)));
            }
            assert_eq!(tally_text(&waited.tally), tally_text(&direct.tally));
        }
    }
}
