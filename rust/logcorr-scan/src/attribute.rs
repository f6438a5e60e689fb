//! Pass 2: every line's process, record, time and place, from its parsed fields, the whole-set
//! tables (`Whole`: what each key row resolved to, which files belong to one process, the
//! clock) and its neighbours (the record grammar, a file's time so far).

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::sync::Arc;

use crate::clock::{self, Clock, FileTime, Stamp};
use crate::gather::{says_of, Counted, Event, Gather};
use crate::grammar::{ends_with_colon, FileGrammar, Row};
use crate::keys::{KeyId, Keys};
use crate::model::{role_code, Columns, Role, Source, StrColumn};

/// How a line's process was identified (the `evidence` column), in the order of `model.EVIDENCE`.
pub const EVIDENCE: [&str; 10] = [
    "prefix",
    "only-scheduler",
    "pid",
    "nccl-device",
    "gpu-prefix",
    "torch-rank",
    "group-rank",
    "continuation",
    "file",
    "srun-task",
];
const CONTINUATION: u8 = 7;
const FILE: u8 = 8;

/// The coordinates of a process, in the order of `model.COORDINATES`.
pub type Coordinates = [Option<i32>; 13];
const NODE: usize = 0;
const GPU: usize = 6;

/// What the whole set says, given once pass 1 is resolved.
#[derive(Default, Debug)]
pub struct Whole {
    /// Per key row (`KeyId`): its process, evidence, conflict, role and effective host.
    pub proc: Vec<Option<u32>>,
    pub evidence: Vec<Option<u8>>,
    pub conflict: Vec<bool>,
    pub role: Vec<Option<Role>>,
    pub eff_host: Vec<Option<String>>,
    /// (file, stream, second) in which exception headers of several processes stand.
    pub crowded: HashSet<(u32, Option<String>, i64)>,
    /// Files several processes write to (no process's own).
    pub shared: HashSet<u32>,
    /// Files that belong to one process.
    pub file_procs: HashMap<u32, u32>,
    /// (process, group-local rank) for every rank each process has; None without a topology.
    pub local_ranks: Option<HashSet<(u32, i32)>>,
    pub processes: Vec<Coordinates>,
    /// Processes that are no SGLang scheduler (the ranks of a plain torch job): their lines
    /// take no role from being attributed.
    pub plain: HashSet<u32>,
    pub file_nodes: HashMap<u32, i32>,
    pub file_names: HashMap<u32, String>,
    pub clock: Clock,
    /// host -> the shift of its lines' sort key (µs)
    pub clock_offsets: HashMap<String, i64>,
}

impl Whole {
    /// The coordinates of a line of process `proc` in a file of node `file_node` (its
    /// server_args line's node_rank): the process's, with the file's node when the process
    /// has none; a process's line in another node's file has neither node nor GPU.
    pub fn coordinates(&self, proc: Option<u32>, file_node: Option<i32>) -> Coordinates {
        let mut coordinates = proc
            .and_then(|p| self.processes.get(p as usize))
            .copied()
            .unwrap_or([None; 13]);
        match (coordinates[NODE], file_node) {
            (Some(node), Some(file)) if node != file => {
                coordinates[NODE] = None;
                coordinates[GPU] = None;
            }
            (node, file) => coordinates[NODE] = node.or(file),
        }
        coordinates
    }
}

/// The latest header (or a file's first row): what continuation lines read of it.
#[derive(Clone, Debug)]
struct HeadRow {
    seq: u64,
    record: u32,
    /// its stream's number in its file (`FileState::stream_id`)
    stream: Option<u32>,
    source: Source,
    exc: bool,
    colon: bool,
    glued: bool,
    ambiguous: bool,
}

/// Where a file stands between chunks.
#[derive(Default, Debug)]
struct FileState {
    seq: u64,
    records: u32,
    head: Option<HeadRow>,
    /// each stream's latest record head (a file has a stream or a few)
    own: Vec<HeadRow>,
    /// the streams met in the file, numbered in the order met, and the last one's number
    streams: Vec<String>,
    last_stream: Option<u32>,
    grammar: FileGrammar,
    time: FileTime,
    waiting: usize,
    /// what the whole set says of the file (read once, not for each of its lines): whether
    /// several processes write it, the one process it belongs to
    shared: bool,
    file_proc: Option<u32>,
}

impl FileState {
    /// The number of a stream of the file (numbered when met first; a row's stream is mostly
    /// the row before's).
    fn stream_id(&mut self, stream: &str) -> u32 {
        if let Some(id) = self
            .last_stream
            .filter(|&id| self.streams[id as usize] == stream)
        {
            return id;
        }
        let id = match self.streams.iter().position(|s| s == stream) {
            Some(at) => at as u32,
            None => {
                self.streams.push(stream.to_string());
                (self.streams.len() - 1) as u32
            }
        };
        self.last_stream = Some(id);
        id
    }

    fn new(file_id: u32, w: &Whole) -> FileState {
        FileState {
            shared: w.shared.contains(&file_id),
            file_proc: w.file_procs.get(&file_id).copied(),
            ..FileState::default()
        }
    }
}

/// Each file's state, found by its number (a chunk's rows mostly stand in the file of the row
/// before: that file's is found without hashing).
#[derive(Default, Debug)]
struct Files {
    states: Vec<FileState>,
    index: HashMap<u32, usize>,
    last: Option<(u32, usize)>,
}

impl Files {
    fn at(&mut self, file_id: u32) -> Option<usize> {
        match self.last {
            Some((last, at)) if last == file_id => Some(at),
            _ => {
                let at = *self.index.get(&file_id)?;
                self.last = Some((file_id, at));
                Some(at)
            }
        }
    }

    /// The file's state, made when it is met first.
    fn get_or_new(&mut self, file_id: u32, w: &Whole) -> &mut FileState {
        let at = match self.at(file_id) {
            Some(at) => at,
            None => {
                self.states.push(FileState::new(file_id, w));
                let at = self.states.len() - 1;
                self.index.insert(file_id, at);
                self.last = Some((file_id, at));
                at
            }
        };
        &mut self.states[at]
    }

    fn get_mut(&mut self, file_id: u32) -> Option<&mut FileState> {
        let at = self.at(file_id)?;
        Some(&mut self.states[at])
    }
}

/// The rows of a file that wait for its first time were given `key` (None: the file ended, or
/// too many waited, without one: they sort last).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Settled {
    pub file_id: u32,
    pub key: Option<i64>,
}

/// A line's attributed columns (what the runs store), column by column.
#[derive(Default, Debug)]
pub struct Attributed {
    pub role: Vec<Option<u8>>,
    /// the key row of each row (its effective host is the whole set's `eff_host` of it)
    pub key: Vec<KeyId>,
    pub evidence: Vec<Option<u8>>,
    /// whether a row without a wrapper stream of its own takes its file's name as its stream
    /// (a file one process writes)
    pub file_stream: Vec<bool>,
    pub proc: Vec<Option<u32>>,
    pub record: Vec<u32>,
    pub why: Vec<Option<&'static str>>,
    pub ts_full: Vec<Option<i64>>,
    pub ts_note: Vec<Option<&'static str>>,
    /// the timeline key (µs); None while the file waits for its first time
    pub sk: Vec<Option<i64>>,
    /// the next physical line's text when it continues this one
    pub next: StrColumn,
    pub settled: Vec<Settled>,
}

impl Attributed {
    /// Room for `rows` more rows in every column.
    pub fn reserve(&mut self, rows: usize) {
        self.role.reserve(rows);
        self.key.reserve(rows);
        self.evidence.reserve(rows);
        self.file_stream.reserve(rows);
        self.proc.reserve(rows);
        self.record.reserve(rows);
        self.why.reserve(rows);
        self.ts_full.reserve(rows);
        self.ts_note.reserve(rows);
        self.sk.reserve(rows);
        self.next.spans.reserve(rows);
    }

    /// The rows `rows` of these columns.
    pub fn select(&self, rows: &[usize]) -> Attributed {
        let mut out = Attributed::default();
        out.reserve(rows.len());
        for &row in rows {
            out.role.push(self.role[row]);
            out.key.push(self.key[row]);
            out.evidence.push(self.evidence[row]);
            out.file_stream.push(self.file_stream[row]);
            out.proc.push(self.proc[row]);
            out.record.push(self.record[row]);
            out.why.push(self.why[row]);
            out.ts_full.push(self.ts_full[row]);
            out.ts_note.push(self.ts_note[row]);
            out.sk.push(self.sk[row]);
            out.next.push(self.next.get(row));
        }
        out
    }

    /// A row's coordinates: its process's in the file it is in (`Whole::coordinates`).
    pub fn coordinates(&self, c: &Columns, whole: &Whole, row: usize) -> Coordinates {
        let file_node = whole.file_nodes.get(&c.file_id[row]).copied();
        whole.coordinates(self.proc[row], file_node)
    }

    /// A row's effective host (its key row's).
    pub fn host<'w>(&self, whole: &'w Whole, row: usize) -> Option<&'w str> {
        whole
            .eff_host
            .get(self.key[row] as usize)
            .and_then(Option::as_deref)
    }

    /// A row's stream: its wrapper's, else its file's name when one process writes the file.
    pub fn stream<'a>(&self, c: &'a Columns, whole: &'a Whole, row: usize) -> Option<&'a str> {
        c.stream.get(row).or_else(|| {
            if self.file_stream[row] {
                whole.file_names.get(&c.file_id[row]).map(String::as_str)
            } else {
                None
            }
        })
    }
}

/// Lines a file's first time may be waited for before they are placed last.
pub const WAITING_ROWS: usize = 1_000_000;

/// The pass-2 state: whole-set tables and each file's state.
pub struct Attributor {
    pub whole: Arc<Whole>,
    pub keys: Arc<Keys>,
    files: Files,
    last_file: Option<u32>,
    /// The counts and event rows of every line attributed (none in a second reading).
    pub gather: Option<Gather>,
    /// The keys of each chunk's rows (the last chunk's), kept to gather them.
    keys_seen: Vec<KeyId>,
}

/// The first row of the next chunk (what the last row of a chunk looks ahead to).
#[derive(Clone, Debug)]
pub struct Ahead {
    pub file_id: u32,
    pub line: u32,
    pub part: u16,
    pub starts: bool,
    pub text: String,
}

impl Ahead {
    /// The first row of a chunk that is not read (it starts another file than the one of
    /// interest: only its file counts).
    pub fn elsewhere(file_id: u32) -> Ahead {
        Ahead {
            file_id,
            line: 0,
            part: 0,
            starts: true,
            text: String::new(),
        }
    }

    pub fn of(c: &Columns, row: usize) -> Ahead {
        Ahead {
            file_id: c.file_id[row],
            line: c.line[row],
            part: c.part[row],
            starts: c.starts_record[row] == Some(true),
            text: c.text.get(row).to_string(),
        }
    }
}

/// A short reason for a row left without a process.
fn why(
    step: &Step,
    proc: Option<u32>,
    foreign: bool,
    c: &Columns,
    row: usize,
) -> Option<&'static str> {
    if proc.is_some() {
        return None;
    }
    let tokens = c.prefix[..6].iter().any(|p| p[row].is_some());
    Some(if step.conflict {
        "evidence disagrees"
    } else if step.interleaved {
        "interleaved records"
    } else if step.printed {
        "plain line in a shared file"
    } else if step.after_glued {
        "after a glued line"
    } else if foreign {
        "group rank not the file's process"
    } else if tokens {
        "prefix outside topology"
    } else if step.role.is_some_and(|r| r != Role::Scheduler) {
        "not a scheduler"
    } else if c.torch_rank[row].is_some() {
        "torch rank ambiguous"
    } else if c.pid[row].is_some() {
        "pid not linked to a process"
    } else if Source::ALL[c.source[row] as usize] == Source::Sglang {
        "no rank prefix"
    } else {
        "no identifying field"
    })
}

/// Per row of a chunk, between the two steps of `attribute`.
struct Step {
    proc: Option<u32>,
    evidence: Option<u8>,
    role: Option<Role>,
    conflict: bool,
    interleaved: bool,
    printed: bool,
    after_glued: bool,
    record: u32,
    head_seq: u64,
    head_ambiguous: bool,
    alien: bool,
    key: KeyId,
}

impl Attributor {
    pub fn new(whole: Arc<Whole>, keys: Arc<Keys>, gather: Option<Gather>) -> Attributor {
        Attributor {
            whole,
            keys,
            files: Files::default(),
            last_file: None,
            gather,
            keys_seen: Vec::new(),
        }
    }

    /// Attribute a parsed chunk (`ahead`: the next chunk's first row, None at the end).
    // (once a chunk: out of line, so that a profile names the thread that runs it;
    // benchmarks/instructions.py)
    #[inline(never)]
    pub fn attribute(&mut self, c: &Columns, keys: &[KeyId], ahead: Option<&Ahead>) -> Attributed {
        let mut steps: Vec<Step> = Vec::with_capacity(c.len());
        for (row, &key) in keys.iter().enumerate().take(c.len()) {
            let text = c.text.get(row);
            let before_warn = blank_before_warn(c, row, text, ahead);
            steps.push(self.row(c, row, text, key, before_warn));
        }
        // a record with a line whose group rank its file's process has in no group is
        // another process's (within the chunk, as a window over the record)
        let mut foreign: HashSet<(u32, u64)> = HashSet::default();
        for (row, step) in steps.iter().enumerate() {
            if step.alien {
                foreign.insert((c.file_id[row], step.head_seq));
            }
        }
        let mut out = Attributed::default();
        out.reserve(c.len());
        let mut ended: Vec<u32> = Vec::new();
        for (row, step) in steps.iter().enumerate() {
            let file_id = c.file_id[row];
            if self.last_file != Some(file_id) {
                ended.extend(self.last_file);
                self.last_file = Some(file_id);
            }
            self.finish(c, row, step, &foreign, ahead, &mut out);
        }
        if ahead.is_none_or(|a| Some(a.file_id) != self.last_file) {
            ended.extend(self.last_file.take());
        }
        self.settle(c, &ended, &mut out);
        self.keys_seen.clear();
        self.keys_seen.extend(keys.iter().take(c.len()));
        if self.gather.is_some() {
            self.gather_chunk(c, &out);
        }
        if let Some(gather) = &mut self.gather {
            for settled in &out.settled {
                gather.settle(settled.file_id, settled.key);
            }
        }
        for state in &mut self.files.states {
            state.grammar.prune();
        }
        out
    }

    /// Gather every row of an attributed chunk (those still waiting for their file's first
    /// time are set aside until it comes).
    fn gather_chunk(&mut self, c: &Columns, out: &Attributed) {
        let Some(gather) = &mut self.gather else {
            return;
        };
        let stems = gather.stems_of(&c.text);
        let held = says_of(&c.text);
        for (row, &stem) in stems.iter().enumerate() {
            let key = self.keys_seen[row];
            let text = c.text.get(row);
            let msg = c.msg.get(row);
            let proc = out.proc[row];
            let ts_full = out.ts_full[row];
            let coordinates = out.coordinates(c, &self.whole, row);
            let counted = Counted {
                file_id: c.file_id[row],
                line: c.line[row],
                part: c.part[row],
                proc,
                key,
                pid: c.pid[row],
                coordinates,
                ts_full,
                evidence: out.evidence[row],
                why: out.why[row],
                note: out.ts_note[row],
                capped: c.capped[row] == Some(true),
                progress: proc.is_some() && ts_full.is_some() && gather.progress(text),
            };
            let next = out.next.get(row);
            let says = gather.says(text, held[row], msg);
            let fields = c.comm_id.spans[row].is_some() || c.torch_rank[row].is_some();
            let event = gather.event_text(text, msg, next, stem, says || fields);
            let event = event.map(|(text, stem)| {
                Box::new(Event {
                    sk: 0,
                    file_id: c.file_id[row],
                    line: c.line[row],
                    part: c.part[row],
                    text,
                    proc,
                    role: out.role[row],
                    ts_full,
                    host: out.host(&self.whole, row).map(str::to_string),
                    pid: c.pid[row],
                    record: out.record[row],
                    starts_record: c.starts_record[row],
                    torch_rank: c.torch_rank[row],
                    pg_desc: c.pg_desc.get(row).map(str::to_string),
                    pg_rank: c.pg_rank[row],
                    seq: c.seq[row],
                    op: c.op.get(row).map(str::to_string),
                    last_enqueued: c.last_enqueued[row],
                    last_completed: c.last_completed[row],
                    comm: c.comm.get(row).map(str::to_string),
                    comm_id: c.comm_id.get(row).map(str::to_string),
                    comm_rank: c.comm_rank[row],
                    comm_nranks: c.comm_nranks[row],
                    nccl_phase: c.nccl_phase.get(row).map(str::to_string),
                    next: next.map(str::to_string),
                    stream: out.stream(c, &self.whole, row).map(str::to_string),
                    said: stem || says,
                })
            });
            gather.add(&counted, event, out.sk[row]);
        }
    }

    /// The first pass over a row: key, grammar, continuation.
    fn row(&mut self, c: &Columns, row: usize, text: &str, key: KeyId, before_warn: bool) -> Step {
        let k = key as usize;
        let w = &self.whole;
        // (every key was numbered in pass 1: a number past the tables resolves to nothing)
        let mut proc = w.proc.get(k).copied().flatten();
        let mut evidence = w.evidence.get(k).copied().flatten();
        let conflict = w.conflict.get(k).copied().unwrap_or(false);
        let mut role = w.role.get(k).copied().flatten();
        let file_id = c.file_id[row];
        let state = self.files.get_or_new(file_id, w);
        let (shared_file, file_proc) = (state.shared, state.file_proc);
        let seq = state.seq;
        state.seq += 1;
        let starts = c.starts_record[row] == Some(true);
        let message = c.msg.get(row).unwrap_or(text);
        let stream = c.stream.get(row);
        let stream_id = stream.map(|s| state.stream_id(s));
        let source = Source::ALL[c.source[row] as usize];
        let glued = c.part[row] > 0 && !text.trim_end().ends_with(':');
        let exc = c.exc[row];
        let crowded = exc
            && c.ts[row].is_some_and(|ts| {
                let second = ts.div_euclid(clock::MICROS) * clock::MICROS;
                w.crowded
                    .contains(&(file_id, stream.map(str::to_string), second))
            });
        if starts {
            state.records += 1;
        }
        let ambiguous_here =
            source == Source::Sglang && starts && c.prefix[..6].iter().all(|p| p[row].is_none());
        let here = HeadRow {
            seq,
            record: state.records,
            stream: stream_id,
            source,
            exc,
            colon: message.trim_end().ends_with(':'),
            glued,
            ambiguous: ambiguous_here,
        };
        if starts || state.head.is_none() {
            state.head = Some(here.clone());
        }
        if starts {
            match state.own.iter_mut().find(|h| h.stream == here.stream) {
                Some(own) => *own = here.clone(),
                None => state.own.push(here.clone()),
            }
        }
        let mut head = state.head.clone().expect("a head");
        if let (Some(mine), Some(theirs)) = (stream_id, head.stream) {
            if mine != theirs {
                if let Some(own) = state.own.iter().find(|h| h.stream == Some(mine)) {
                    head = own.clone();
                }
            }
        }
        let verdict = state.grammar.row(&Row {
            seq,
            record: state.records,
            line: c.line[row],
            stream,
            source,
            text,
            message,
            starts,
            exc,
            crowded,
            glued,
            proc,
            role,
            shared: shared_file || stream.is_some(),
        });
        let printed = !starts
            && shared_file
            && source != Source::Tqdm
            && head.source == Source::Sglang
            && !head.exc
            && !head.colon;
        let inherit =
            proc.is_none() && !starts && verdict.head.is_some() && !conflict && !before_warn;
        if inherit {
            proc = verdict.kid;
            if verdict.kid.is_some() {
                evidence = Some(CONTINUATION);
            }
            if role.is_none() {
                role = verdict.krole;
            }
        }
        let record = match verdict.head {
            Some(h) if !starts => h.record,
            _ => head.record,
        };
        let interleaved = !starts && verdict.ambiguous && proc.is_none();
        let after_glued = proc.is_none() && !starts && head.glued && verdict.head.is_none();
        let alien = proc.is_none()
            && match (file_proc, c.pg_rank[row], &w.local_ranks) {
                (Some(fp), Some(rank), Some(ranks)) => !ranks.contains(&(fp, rank)),
                _ => false,
            };
        Step {
            proc,
            evidence,
            role,
            conflict,
            interleaved,
            printed: proc.is_none() && printed,
            after_glued,
            record,
            head_seq: head.seq,
            head_ambiguous: head.ambiguous,
            alien,
            key,
        }
    }

    /// The second pass over a row: the file's process lent, why not, time, output columns.
    fn finish(
        &mut self,
        c: &Columns,
        row: usize,
        step: &Step,
        foreign: &HashSet<(u32, u64)>,
        ahead: Option<&Ahead>,
        out: &mut Attributed,
    ) {
        let w = &self.whole;
        let file_id = c.file_id[row];
        let starts = c.starts_record[row] == Some(true);
        let source = Source::ALL[c.source[row] as usize];
        let state = self.files.get_mut(file_id).expect("a file state");
        let file_proc = state.file_proc;
        let ambiguous_header =
            source == Source::Sglang && starts && c.prefix[..6].iter().all(|p| p[row].is_none());
        let lend = step.proc.is_none()
            && file_proc.is_some()
            && !step.conflict
            && step.role.is_none()
            && !ambiguous_header
            && (starts || !step.head_ambiguous);
        let is_foreign = foreign.contains(&(file_id, step.head_seq));
        let (proc, evidence) = if lend && !is_foreign {
            (file_proc, Some(FILE))
        } else {
            (step.proc, step.evidence)
        };
        let why = why(step, proc, lend && is_foreign, c, row);
        // time
        let stamp = Stamp {
            ts: c.ts[row],
            has_date: c.ts_has_date[row],
            has_year: c.ts_has_year[row],
            wrap_ts: c.wrap_ts[row],
        };
        let (ts_full, note) = clock::complete(&stamp, file_id, &mut state.time, &w.clock);
        let eff_host = w.eff_host.get(step.key as usize).and_then(Option::as_deref);
        let shift = eff_host.and_then(|h| w.clock_offsets.get(h)).copied();
        if let Some(time) = clock::sort_time(&stamp, ts_full, shift) {
            state.time.running = Some(state.time.running.map_or(time, |r| r.max(time)));
        }
        let sk = state.time.running;
        // output
        out.role
            .push(if proc.is_some_and(|p| !w.plain.contains(&p)) {
                Some(role_code(Role::Scheduler))
            } else {
                step.role.map(role_code)
            });
        out.key.push(step.key);
        out.evidence.push(evidence);
        out.file_stream.push(file_proc.is_some());
        out.proc.push(proc);
        out.record.push(step.record);
        out.why.push(why);
        out.ts_full.push(ts_full);
        out.ts_note.push(note);
        out.sk.push(sk);
        out.next.push(following(c, row, ahead));
    }

    /// Rows of this chunk that wait for their file's first time take it when it comes later in
    /// the chunk; a file's rows held from earlier chunks are settled when it comes (or when
    /// the file ends without one, or too many waited: they sort last).
    fn settle(&mut self, c: &Columns, ended: &[u32], out: &mut Attributed) {
        // (each file's first time in the chunk; a file's rows mostly follow one another, so
        // a row of the file whose first time was just found is not looked up)
        let mut first: HashMap<u32, i64> = HashMap::default();
        let mut found: Option<u32> = None;
        for (row, sk) in out.sk.iter().enumerate() {
            let file_id = c.file_id[row];
            if let (Some(sk), true) = (sk, found != Some(file_id)) {
                first.entry(file_id).or_insert(*sk);
                found = Some(file_id);
            }
        }
        let mut waiting: HashMap<u32, usize> = HashMap::default();
        for row in 0..c.len() {
            if out.sk[row].is_none() {
                match first.get(&c.file_id[row]) {
                    Some(&key) => out.sk[row] = Some(key),
                    None => *waiting.entry(c.file_id[row]).or_default() += 1,
                }
            }
        }
        let mut files: Vec<u32> = first
            .keys()
            .chain(waiting.keys())
            .chain(ended)
            .copied()
            .collect();
        files.sort_unstable();
        files.dedup();
        for file_id in files {
            let state = self.files.get_mut(file_id).expect("a file state");
            if let Some(&key) = first.get(&file_id) {
                if state.waiting > 0 {
                    out.settled.push(Settled {
                        file_id,
                        key: Some(key),
                    });
                }
                state.waiting = 0;
                continue;
            }
            state.waiting += waiting.get(&file_id).copied().unwrap_or(0);
            if state.waiting > 0 && (ended.contains(&file_id) || state.waiting > WAITING_ROWS) {
                out.settled.push(Settled { file_id, key: None });
                state.waiting = 0;
            }
        }
    }
}

/// A blank line right before an NCCL WARN line of the same file: NCCL starts every WARN with a
/// newline, so the blank line is the WARN's writer's.
fn blank_before_warn(c: &Columns, row: usize, text: &str, ahead: Option<&Ahead>) -> bool {
    if !text.trim().is_empty() {
        return false;
    }
    next_line(c, row, ahead).is_some_and(|(_, next)| next.text().contains(" NCCL WARN "))
}

/// The next physical line of `next_line`, its text read only when asked for.
enum Next<'a> {
    Row(&'a Columns, usize),
    Ahead(&'a str),
}

impl<'a> Next<'a> {
    fn text(&self) -> &'a str {
        match *self {
            Next::Row(c, row) => c.text.get(row),
            Next::Ahead(text) => text,
        }
    }
}

/// The next row when it is the next physical line of the same file: (its starts_record, text).
fn next_line<'a>(c: &'a Columns, row: usize, ahead: Option<&'a Ahead>) -> Option<(bool, Next<'a>)> {
    let (file_id, line, part, starts, next) = if row + 1 < c.len() {
        let next = row + 1;
        (
            c.file_id[next],
            c.line[next],
            c.part[next],
            c.starts_record[next] == Some(true),
            Next::Row(c, next),
        )
    } else {
        let a = ahead?;
        (
            a.file_id,
            a.line,
            a.part,
            a.starts,
            Next::Ahead(a.text.as_str()),
        )
    };
    (file_id == c.file_id[row] && Some(line) == c.line[row].checked_add(1) && part == 0)
        .then_some((starts, next))
}

/// The next physical line's text when it continues this one (no header of its own): for
/// fields a hard wrap cut.
fn following<'a>(c: &'a Columns, row: usize, ahead: Option<&'a Ahead>) -> Option<&'a str> {
    next_line(c, row, ahead).and_then(|(starts, next)| (!starts).then(|| next.text()))
}

/// Whether a message ends with `:` (re-exported for the binding's tests).
pub fn announces(text: &str) -> bool {
    ends_with_colon(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_files_state_is_found_again_whichever_file_came_before() {
        let whole = Whole {
            shared: [2].into_iter().collect(),
            file_procs: [(3, 7)].into_iter().collect(),
            ..Whole::default()
        };
        let mut files = Files::default();
        let visits = [1u32, 1, 2, 3, 1, 3, 2, 2, 9];
        for file_id in visits {
            files.get_or_new(file_id, &whole).seq += 1;
        }
        for file_id in [1u32, 2, 3, 9, 1] {
            let seen = visits.iter().filter(|&&f| f == file_id).count() as u64;
            let state = files.get_mut(file_id).expect("a state");
            assert_eq!(state.seq, seen, "file {file_id}");
            assert_eq!(state.shared, file_id == 2);
            assert_eq!(state.file_proc, (file_id == 3).then_some(7));
        }
        assert!(files.get_mut(4).is_none());
        assert_eq!(files.states.len(), 4);
    }

    #[test]
    fn a_line_takes_its_files_node_only_where_its_process_has_none() {
        let mut on_node_1 = [Some(4); 13];
        on_node_1[NODE] = Some(1);
        let mut no_node = [Some(5); 13];
        no_node[NODE] = None;
        let whole = Whole {
            processes: vec![on_node_1, no_node],
            ..Whole::default()
        };
        assert_eq!(whole.coordinates(Some(0), Some(1)), on_node_1);
        assert_eq!(whole.coordinates(Some(0), None), on_node_1);
        // (a process's line in another node's file: neither node nor GPU is known)
        let elsewhere = whole.coordinates(Some(0), Some(2));
        assert_eq!((elsewhere[NODE], elsewhere[GPU]), (None, None));
        assert_eq!(elsewhere[1..6], on_node_1[1..6]);
        assert_eq!(whole.coordinates(Some(1), Some(2))[NODE], Some(2));
        assert_eq!(whole.coordinates(Some(1), Some(2))[GPU], Some(5));
        let mut nobody = [None; 13];
        nobody[NODE] = Some(3);
        assert_eq!(whole.coordinates(None, Some(3)), nobody);
        assert_eq!(whole.coordinates(Some(9), None), [None; 13]);
    }
}
