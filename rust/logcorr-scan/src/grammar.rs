//! The record grammar: which record an untagged line belongs to, per output stream.
//!
//! Records are of two kinds:
//!
//! * a *block*: a logging record (SGLang, torch c10, glog, …) written in one piece, so the lines
//!   right after its header are its own: a header with an exception (`… hit an exception:
//!   Traceback …`) takes traceback lines, one announcing what follows (`Pyspy dump for PID n:`)
//!   takes any dump, a c10 header with an exception takes C++ frames; plain lines follow the
//!   three. A one-line message takes nothing (but plain lines in a file only one process writes,
//!   or the tail a terminal's hard wrap cut off it).
//! * a *raw record*: text a process writes a line at a time to stderr with no header of its
//!   own - a Python traceback (`Traceback (most recent call last):` … `XxxError: …`), a
//!   faulthandler dump, a C++ abort, a py-spy dump. When several processes abort at once, their
//!   raw records interleave line by line with each other and with other processes' blocks.
//!
//! Per output stream (file, wrapper stream) and grammar, the raw records open at each line are
//! counted (opened by their first line, closed by their last where the grammar has one). A line
//! of a grammar goes to the block it stands in when the block takes that grammar and no raw
//! record of it is open; else to the one raw record of that grammar that is open, when it has
//! been the only one since it opened. Otherwise it is ambiguous ("interleaved records"). A
//! record's process is its header's, or the first one a line inside it names, from that line on
//! (none once two disagree). A blank line is a block's only while its grammar has room for one:
//! in an announced py-spy dump, after `Python v…` and once at its end.

use rustc_hash::FxHashMap as HashMap;

use crate::model::{Role, Source};
use crate::patterns as p;

/// Raw record grammars, and `at`: exception blocks (a logged traceback).
const TB: usize = 0;
const FH: usize = 1;
const SPY: usize = 2;
const CPP: usize = 3;
const AT: usize = 4;
const RAW: usize = 4;

/// Terminal widths a hard wrap cuts lines at.
const WIDTHS: [usize; 14] = [
    80, 100, 120, 132, 140, 150, 160, 180, 200, 220, 240, 250, 256, 300,
];
const REOPEN: [&str; 2] = [
    "During handling of the above exception",
    "The above exception was the direct cause",
];

/// What a header opens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// a raw record's first line
    Raw,
    /// a logged exception (`… hit an exception`, `Traceback …` on a prefixed line)
    Exc,
    /// a line announcing what follows (ends with `:`), or a dump written with one
    Ann,
    /// a c10 / glog header with an exception: C++ frames follow
    CppExc,
    /// a one-line message
    One,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Gram {
    Raw(usize),
    Blank,
    Tqdm,
    Cann,
    Plain,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Category {
    Reopen,
    Ann,
    Other,
}

/// A record's header: the row that opened it.
#[derive(Clone, Copy, Debug)]
pub struct Head {
    /// The row's number in its file.
    pub seq: u64,
    /// The file's record number at that row.
    pub record: u32,
    pub proc: Option<u32>,
    pub role: Option<Role>,
}

#[derive(Clone, Copy, Debug)]
struct Block {
    head: Head,
    kind: Kind,
    line: u32,
    pr: u64,
    glued: bool,
    /// an exception block opened while another was open, in a crowded second
    exk: bool,
    /// a py-spy dump a line announced (`Pyspy dump for PID n:`, then `Process n: …`)
    dump: Option<Dump>,
}

/// Where an announced py-spy dump stands: py-spy writes one blank line (after `Python v…`)
/// and the log record ends with one (py-spy's last newline, then the logger's); a blank line
/// right after another, or after those two, is past the dump's grammar.
#[derive(Clone, Copy, Debug, Default)]
struct Dump {
    blanks: u8,
    after_blank: bool,
}

impl Dump {
    /// Read a row of the block; whether it is a blank line past the grammar.
    fn past(&mut self, blank: bool) -> bool {
        let past = blank && (self.after_blank || self.blanks >= 2);
        if blank && !past {
            self.blanks += 1;
        }
        self.after_blank = blank;
        past
    }
}

/// One output stream's state.
#[derive(Default, Debug, Clone)]
struct Stream {
    rows: u64,
    previous: Option<(bool, u32)>,
    catf: Option<Category>,
    block: Option<Block>,
    last: [Option<Head>; RAW],
    open: [i64; 5],
    two: [Option<u64>; 5],
    zero: [Option<u64>; 5],
    lastact: Option<u64>,
    lastshort: Option<u64>,
}

/// A record's process so far: the first one its rows name, none once two disagree.
#[derive(Clone, Copy, Debug)]
struct Identity {
    first: Option<u32>,
    conflict: bool,
    role: Option<Role>,
}

/// What the grammar reads of a row.
pub struct Row<'a> {
    pub seq: u64,
    pub record: u32,
    pub line: u32,
    pub stream: Option<&'a str>,
    pub source: Source,
    pub text: &'a str,
    /// the message under a wrapper, else the text
    pub message: &'a str,
    pub starts: bool,
    pub exc: bool,
    pub crowded: bool,
    pub glued: bool,
    pub proc: Option<u32>,
    pub role: Option<Role>,
    /// the file is one several processes write to (or the row is in a wrapper stream)
    pub shared: bool,
}

/// What the grammar says of a row.
#[derive(Clone, Copy, Debug, Default)]
pub struct Verdict {
    /// The header of the record the row belongs to (itself for a header).
    pub head: Option<Head>,
    /// That record's process so far, whether two rows disagreed, its latest role.
    pub kid: Option<u32>,
    pub kidc: bool,
    pub krole: Option<Role>,
    /// The row may be one of several open records' (interleaved).
    pub ambiguous: bool,
}

/// The grammar state of one file.
#[derive(Default, Debug, Clone)]
pub struct FileGrammar {
    /// (a file has a stream or a few: found by a look along them)
    streams: Vec<(Option<String>, Stream)>,
    identities: HashMap<u64, Identity>,
}

fn raw_of(source: Source) -> Option<usize> {
    match source {
        Source::Traceback => Some(TB),
        Source::Faulthandler => Some(FH),
        Source::Pyspy => Some(SPY),
        Source::Cpp => Some(CPP),
        _ => None,
    }
}

/// The text ends with `:`, or with `:` then whitespace ending in a space, tab or CR.
pub fn ends_with_colon(text: &str) -> bool {
    text.trim_end().ends_with(':') && matches!(text.chars().last(), Some(':' | ' ' | '\t' | '\r'))
}

fn blank(text: &str) -> bool {
    text.chars().all(char::is_whitespace)
}

impl Stream {
    /// Count grammar `g` at row `i`: returns (records open at the row, counting those it
    /// opens; two were open at once since the last moment none was).
    fn count(&mut self, g: usize, i: u64, opened: bool, closed: bool) -> (i64, bool) {
        let up = i64::from(opened);
        let before = self.open[g];
        let n = before + up;
        let now = (before + up - i64::from(closed)).max(0);
        self.open[g] = now;
        if n >= 2 {
            self.two[g] = Some(i);
        }
        let x = self.two[g].is_some_and(|two| self.zero[g].is_none_or(|zero| two > zero));
        if now == 0 {
            self.zero[g] = Some(i);
        }
        (n, x)
    }
}

impl FileGrammar {
    /// Read one row (rows come in file order).
    pub fn row(&mut self, r: &Row<'_>) -> Verdict {
        let at = match self
            .streams
            .iter()
            .position(|(k, _)| k.as_deref() == r.stream)
        {
            Some(at) => at,
            None => {
                self.streams
                    .push((r.stream.map(str::to_string), Stream::default()));
                self.streams.len() - 1
            }
        };
        let s = &mut self.streams[at].1;
        let i = r.seq;
        let m = r.message;
        let raw = raw_of(r.source);
        let ann = r.starts && raw.is_none() && ends_with_colon(m) && !r.exc;
        let prev_ann = s
            .previous
            .is_some_and(|(a, line)| a && line.checked_add(1) == Some(r.line));
        s.previous = Some((ann, r.line));
        let dem = r.starts && matches!(raw, Some(SPY | CPP)) && prev_ann;
        let is_blank = blank(m);
        let reopen = REOPEN.iter().any(|start| m.starts_with(start));
        let category = if is_blank {
            None
        } else if reopen {
            Some(Category::Reopen)
        } else if ann {
            Some(Category::Ann)
        } else {
            Some(Category::Other)
        };
        let before = s.catf;
        s.catf = category.or(s.catf);
        let announced =
            before == Some(Category::Ann) || (before == Some(Category::Reopen) && raw == Some(TB));
        let copen =
            !r.starts && matches!(raw, Some(TB | FH)) && p::OPENS_RE.is_match(m) && !announced;
        let head = r.starts || copen;
        let torch_exc = matches!(r.source, Source::Torch | Source::Glog)
            && (contains_exception(m) || p::CANN_CHAINS_RE.is_match(m));
        let kind = if !head {
            None
        } else if dem {
            Some(Kind::Ann)
        } else if raw.is_some() {
            Some(Kind::Raw)
        } else if r.exc {
            Some(Kind::Exc)
        } else if ann {
            Some(Kind::Ann)
        } else if torch_exc {
            Some(Kind::CppExc)
        } else {
            Some(Kind::One)
        };
        let gram = if is_blank {
            Gram::Blank
        } else if let Some(g) = raw {
            Gram::Raw(g)
        } else if r.source == Source::Tqdm {
            Gram::Tqdm
        } else if r.source == Source::Cann {
            Gram::Cann
        } else {
            Gram::Plain
        };
        let me = Head {
            seq: i,
            record: r.record,
            proc: r.proc,
            role: r.role,
        };
        let opens = if head && !dem { raw } else { None };
        if let Some(kind) = kind {
            s.block = Some(Block {
                head: me,
                kind,
                line: r.line,
                pr: s.rows,
                glued: r.glued,
                exk: false,
                dump: (dem && raw == Some(SPY)).then(Dump::default),
            });
        }
        // (in a stream several processes write, such a blank line may be anybody's)
        let past_dump = !head
            && s.block
                .as_mut()
                .and_then(|b| b.dump.as_mut())
                .is_some_and(|d| d.past(is_blank))
            && r.shared;
        if let Some(g) = opens {
            s.last[g] = Some(me);
        }
        let bhk = s.block.map(|b| b.kind);
        let takes = [
            matches!(bhk, Some(Kind::Exc | Kind::Ann)),
            bhk == Some(Kind::Ann),
            bhk == Some(Kind::Ann),
            matches!(bhk, Some(Kind::Ann | Kind::CppExc)),
        ];
        let tb_seen = s.last[TB].is_some();
        let reopen_tb = gram == Gram::Raw(TB) && reopen;
        let tb_end = gram == Gram::Raw(TB) && p::EXC_RE.is_match(m) && !r.starts;
        let fh_end = gram == Gram::Raw(FH) && m.starts_with("Extension modules:");
        let mut n = [0i64; 5];
        let mut x = [false; RAW];
        for g in 0..RAW {
            let opened = opens == Some(g) || (g == TB && reopen_tb && (!takes[TB] || tb_seen));
            let closed = match g {
                TB => tb_end && !takes[TB],
                FH => fh_end && !takes[FH],
                _ => false,
            };
            (n[g], x[g]) = s.count(g, i, opened, closed);
        }
        let exc_opened = kind == Some(Kind::Exc) || (reopen_tb && bhk == Some(Kind::Exc));
        let exc_closed = tb_end && bhk == Some(Kind::Exc);
        (n[AT], _) = s.count(AT, i, exc_opened, exc_closed);
        if head {
            if let Some(block) = &mut s.block {
                block.exk = r.crowded && n[AT] >= 2;
            }
        }
        let raw_open: i64 = n[..RAW].iter().sum();
        if raw_open > 0 {
            s.lastact = Some(i);
        }
        let block = s.block;
        let act = match (s.lastact, block) {
            (Some(last), Some(b)) => last >= b.head.seq,
            _ => false,
        };
        let exk = block.is_some_and(|b| b.exk);
        let mut assigned: Option<Head> = None;
        let mut ambiguous = false;
        if let Gram::Raw(g) = gram {
            let block_ok = n[g] == 0
                && (g != TB || !tb_seen)
                && match bhk {
                    Some(Kind::Exc) => !exk,
                    Some(Kind::Ann) => n[AT] == 0,
                    _ => true,
                };
            let raw_ok = n[g] == 1 && !x[g] && s.last[g].is_some();
            if takes[g] {
                if block_ok {
                    assigned = block.map(|b| b.head);
                }
                ambiguous |= !block_ok;
            } else {
                if raw_ok {
                    assigned = s.last[g];
                }
                ambiguous |= n[g] >= 1 && !raw_ok;
            }
        }
        let plain_block = matches!(bhk, Some(Kind::Exc | Kind::Ann | Kind::CppExc));
        let quiet = raw_open == 0 && !act;
        let plain_ok = quiet && !tb_seen && (bhk != Some(Kind::Exc) || !exk);
        let full = WIDTHS.contains(&crate::text::len_chars(r.text));
        let pr = s.rows;
        let lastshort = s.lastshort;
        if !full {
            s.lastshort = Some(i);
        }
        s.rows += 1;
        let one_ok = bhk == Some(Kind::One)
            && (!r.shared || hard_wrapped(r, gram, block, lastshort, pr))
            && quiet;
        let blank_in_block =
            gram == Gram::Blank && matches!(bhk, Some(Kind::Exc | Kind::Ann)) && !past_dump;
        if (gram == Gram::Plain && ((plain_block && plain_ok) || one_ok))
            || (blank_in_block && plain_ok)
            || gram == Gram::Cann
        {
            assigned = block.map(|b| b.head);
        }
        ambiguous |= ((gram == Gram::Plain && plain_block) || blank_in_block) && !plain_ok;
        ambiguous |= past_dump;
        let taken = block.is_none_or(|b| !b.glued);
        let target = if head {
            Some(me)
        } else if r.source == Source::Tqdm || !taken {
            None
        } else {
            assigned
        };
        let mut verdict = Verdict {
            head: target,
            ambiguous,
            ..Verdict::default()
        };
        if let Some(t) = target {
            if t.seq == i {
                // (a record's first row: its identity is its own; kept once a later row of
                // the record needs it, made then from the head as this row would make it)
                verdict.kid = r.proc;
                verdict.krole = r.role;
            } else {
                let id = self.identities.entry(t.seq).or_insert(Identity {
                    first: t.proc,
                    conflict: false,
                    role: t.role,
                });
                if let Some(proc) = r.proc {
                    match id.first {
                        None => id.first = Some(proc),
                        Some(first) if first != proc => id.conflict = true,
                        _ => {}
                    }
                }
                if r.role.is_some() {
                    id.role = r.role;
                }
                verdict.kid = if id.conflict { None } else { id.first };
                verdict.kidc = id.conflict;
                verdict.krole = id.role;
            }
        }
        verdict
    }

    /// Forget the records no stream can still refer to.
    pub fn prune(&mut self) {
        let live: Vec<u64> = self
            .streams
            .iter()
            .flat_map(|(_, s)| {
                s.block
                    .map(|b| b.head.seq)
                    .into_iter()
                    .chain(s.last.iter().flatten().map(|h| h.seq))
            })
            .collect();
        self.identities.retain(|seq, _| live.contains(seq));
    }
}

fn contains_exception(text: &str) -> bool {
    static EXCEPTION: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new("(?i)exception").expect("exception"));
    EXCEPTION.is_match(text)
}

/// The row and every row of its block before it, from the header on, are consecutive lines
/// and all but the row fill a terminal width, and the row starts inside a word (not with a
/// capital or a space): the row is the tail of a hard-wrapped header.
fn hard_wrapped(
    r: &Row<'_>,
    gram: Gram,
    block: Option<Block>,
    lastshort: Option<u64>,
    pr: u64,
) -> bool {
    let Some(b) = block else { return false };
    let inside = gram == Gram::Plain
        && r.text
            .chars()
            .next()
            .is_some_and(|c| !(c.is_ascii_uppercase() || c.is_whitespace()));
    let short_before = lastshort.map_or(-1, |s| s as i64) < b.head.seq as i64;
    let consecutive = i64::from(r.line) - i64::from(b.line) == pr as i64 - b.pr as i64;
    short_before && consecutive && inside
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The verdicts of an announced py-spy dump's rows, read as one stream (`shared`: several
    /// processes write it).
    fn dump_verdicts(shared: bool) -> Vec<(bool, bool)> {
        let rows = [
            (
                Source::Sglang,
                true,
                "[2026-11-29 10:10:01 TP0] Pyspy dump for PID 4321:",
            ),
            (Source::Pyspy, true, "Process 4321: sglang::scheduler_TP0"),
            (Source::Pyspy, false, "Python v3.12.3 (/usr/bin/python3.12)"),
            (Source::Other, false, ""),
            (Source::Other, false, ""),
            (Source::Pyspy, false, "Thread 4321 (idle): \"MainThread\""),
            (
                Source::Pyspy,
                false,
                "    all_reduce (torch/distributed/distributed_c10d.py:2501)",
            ),
            (Source::Other, false, ""),
            (Source::Other, false, " "),
            (
                Source::Pyspy,
                false,
                "    event_loop_overlap (sglang/srt/managers/scheduler.py:1012)",
            ),
            (Source::Other, false, ""),
        ];
        let mut grammar = FileGrammar::default();
        let mut record = 0;
        rows.iter()
            .enumerate()
            .map(|(i, &(source, starts, text))| {
                record += u32::from(starts);
                let verdict = grammar.row(&Row {
                    seq: i as u64,
                    record,
                    line: i as u32 + 1,
                    stream: None,
                    source,
                    text,
                    message: text,
                    starts,
                    exc: false,
                    crowded: false,
                    glued: false,
                    proc: (i == 0).then_some(0),
                    role: None,
                    shared,
                });
                (verdict.head.is_some(), verdict.ambiguous)
            })
            .collect()
    }

    #[test]
    fn a_dump_takes_the_blank_lines_py_spy_and_its_record_write() {
        let (taken, ambiguous): (Vec<bool>, Vec<bool>) = dump_verdicts(true).into_iter().unzip();
        // (the blank line after `Python v…` and the one after the last frame; not a second in
        // a row, nor any after those two)
        let past = [4, 8, 10];
        assert_eq!(
            taken,
            (0..11).map(|i| !past.contains(&i)).collect::<Vec<_>>()
        );
        assert_eq!(
            ambiguous,
            (0..11).map(|i| past.contains(&i)).collect::<Vec<_>>()
        );
        // (a stream one process writes: every line is the dump's)
        assert!(dump_verdicts(false)
            .iter()
            .all(|&(taken, ambiguous)| taken && !ambiguous));
    }

    proptest! {
        /// "Ends with `:`" is what its pattern says: `:` at the end, or `:\s*$` on a line
        /// ending in a space, tab or CR.
        #[test]
        fn ends_with_colon_is_the_pattern(head in "\\PC{0,6}", mark in prop::sample::select(vec![":", "", "::", "a"]),
                                          tail in prop::collection::vec(prop::sample::select(vec![" ", "\t", "\r", "\u{a0}", "\u{3000}", "\u{200b}", "a", "\u{0}"]), 0..4)) {
            let text = format!("{head}{mark}{}", tail.concat());
            let padded = text.ends_with([' ', '\t', '\r']);
            let pattern = regex::Regex::new(r":\s*$").expect("pattern");
            let expected = text.ends_with(':') || (padded && pattern.is_match(&text));
            prop_assert_eq!(ends_with_colon(&text), expected);
        }
    }
}
