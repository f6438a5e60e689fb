//! Both passes on several threads, with the same answers as on one.
//!
//! Pass 1: one thread reads the files into chunks (each with what the two lines before it
//! say), workers parse them into surveys of their own, and a thread merges the surveys in
//! chunk order (so that key rows are numbered as one thread would number them).
//!
//! Pass 2: the chunks that carry state one to the next (a file's chunks, and small files read
//! together) form *runs*; runs share nothing, so workers take a run each, read its files again
//! and attribute them in order; once a worker has no run left, the others read and parse
//! their runs a chunk ahead on a thread of their own (`Reader`), on the core it left. The
//! caller takes the chunks as they come (their order in the timeline is their sort key's).
//!
//! A panic in a worker (a bug: no input should cause one) ends the pass with an error naming
//! the chunk's files; dropping a pass stops its threads.

use std::collections::{BTreeMap, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::attribute::{Ahead, Attributed, Attributor, Whole};
use crate::gather::{Event, Gather, Tally};
use crate::kept::{Kept, KeptChunk, Tee};
use crate::keys::Keys;
use crate::model::Columns;
use crate::parse::{parse_into, Said, Scratch};
use crate::read::Spare;
use crate::scan::{context, last_lines, Chunk, ChunkReader, FileSpec, RawChunk, Scanner};
use crate::survey::Survey;

/// How the files are read: chunk sizes and threads.
#[derive(Clone, Copy, Debug)]
pub struct Plan {
    pub chunk_bytes: usize,
    pub max_rows: usize,
    /// Workers that parse (pass 1) or attribute (pass 2) at once (at least one).
    pub threads: usize,
    /// Bytes of pass 1's parse kept in memory for pass 2 (`kept`); the chunks past them are
    /// written to files in a folder when `SurveyRun::start_keeping` is given one, else parsed
    /// again.
    pub keep_parsed: usize,
}

/// What a panic says, with the files of the chunk it happened in.
pub fn panic_message(payload: Box<dyn std::any::Any + Send>, files: &str) -> String {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_string());
    format!("internal error while reading {files}: {what}")
}

fn names(files: &[FileSpec], ids: impl Iterator<Item = u32>) -> String {
    let mut shown: Vec<&str> = ids
        .filter_map(|id| {
            files
                .iter()
                .find(|f| f.file_id == id)
                .map(|f| f.display.as_str())
        })
        .collect();
    shown.dedup();
    shown.join(", ")
}

/// The threads of a pass: stopped and joined when the pass is dropped.
struct Workers {
    cancel: Arc<AtomicBool>,
    handles: Vec<JoinHandle<()>>,
}

/// How long stopping a pass waits for its threads: a thread blocked in the system (opening a
/// file that never opens: a hung mount, a FIFO) is left to end by itself, so that a run that
/// is being ended, holding the interpreter, is not held by it.
const STOP_WAIT: Duration = Duration::from_millis(500);

impl Workers {
    /// Tell the threads to stop and wait for them (until `STOP_WAIT` has passed): the time by
    /// which every thread of the pass should be done.
    fn stop(&mut self) -> Instant {
        self.cancel.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + STOP_WAIT;
        for handle in self.handles.drain(..) {
            join_by(handle, deadline);
        }
        deadline
    }
}

/// Join `handle` if its thread ends by `deadline`; else leave it to end by itself.
fn join_by<T>(handle: JoinHandle<T>, deadline: Instant) -> Option<T> {
    while !handle.is_finished() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    if handle.is_finished() {
        handle.join().ok()
    } else {
        None
    }
}

// ------------------------------------------------------------------------------- pass 1

/// A chunk's survey, with its place.
struct Surveyed {
    index: usize,
    survey: Survey,
    /// the chunk's parse, kept for pass 2 (with the room set aside for it)
    kept: Option<(KeptChunk, usize)>,
    bytes: usize,
    rows: usize,
    span: (u32, u32),
}

/// Pass 1 over the files on `plan.threads` workers. The surveys are merged in chunk order on a
/// thread of their own, so the pass goes on whether or not the caller is asking for its
/// progress (the command line starts it before its heavy modules are imported).
pub struct SurveyRun {
    /// Each merged chunk's bytes of lines, as it is merged (or the error that ended the pass).
    progress: Option<Mutex<Receiver<Result<usize, String>>>>,
    merger: Option<JoinHandle<Option<Merged>>>,
    pub survey: Survey,
    pub lines: u64,
    /// Each chunk's first and last file, in order.
    pub spans: Vec<(u32, u32)>,
    pub warnings: Arc<Mutex<Vec<String>>>,
    /// The chunks' parse kept for pass 2.
    pub kept: Arc<Kept>,
    workers: Workers,
}

/// The surveys merged: what the pass found.
#[derive(Default)]
struct Merged {
    survey: Survey,
    lines: u64,
    spans: Vec<(u32, u32)>,
}

type Work = (usize, RawChunk, Vec<Said>);

impl SurveyRun {
    pub fn start(files: Vec<FileSpec>, plan: Plan) -> SurveyRun {
        SurveyRun::start_keeping(files, plan, None)
    }

    /// `start`, with the chunks' parse past `plan.keep_parsed` bytes kept in files in `folder`
    /// (created when first needed; removed with what is left in it once the pass and the
    /// next are done with it).
    pub fn start_keeping(
        files: Vec<FileSpec>,
        plan: Plan,
        folder: Option<std::path::PathBuf>,
    ) -> SurveyRun {
        let threads = plan.threads.max(1);
        let cancel = Arc::new(AtomicBool::new(false));
        let warnings = Arc::new(Mutex::new(Vec::new()));
        let (work_tx, work_rx) = sync_channel::<Work>(threads * 2);
        let work_rx = Arc::new(Mutex::new(work_rx));
        let (done_tx, done_rx) = sync_channel::<Result<Surveyed, String>>(threads * 2);
        let (progress_tx, progress_rx) = channel::<Result<usize, String>>();
        let mut handles = Vec::new();
        // (the workers give the reader back the buffers of the chunks they surveyed)
        let spare = Arc::new(Spare::default());
        let kept = Arc::new(Kept::new(plan.keep_parsed, folder));
        {
            let (cancel, warnings, files) = (cancel.clone(), warnings.clone(), files.clone());
            let failed = done_tx.clone();
            let reader =
                ChunkReader::new(files, plan.chunk_bytes, plan.max_rows).with_spare(spare.clone());
            handles.push(std::thread::spawn(move || {
                read_chunks(reader, &cancel, &warnings, &work_tx, &failed);
            }));
        }
        for _ in 0..threads {
            let (cancel, work_rx, done_tx, files, spare, kept) = (
                cancel.clone(),
                work_rx.clone(),
                done_tx.clone(),
                files.clone(),
                spare.clone(),
                kept.clone(),
            );
            handles.push(std::thread::spawn(move || {
                survey_chunks(&files, &cancel, &work_rx, &done_tx, &spare, &kept);
            }));
        }
        drop(done_tx);
        let merger = {
            let (cancel, kept) = (cancel.clone(), kept.clone());
            std::thread::spawn(move || merge_surveys(&done_rx, &progress_tx, &cancel, &kept))
        };
        SurveyRun {
            progress: Some(Mutex::new(progress_rx)),
            merger: Some(merger),
            survey: Survey::default(),
            lines: 0,
            spans: Vec::new(),
            warnings,
            kept,
            workers: Workers { cancel, handles },
        }
    }

    /// The next chunk merged (waiting for it): its bytes of lines; None at the end, when the
    /// survey, lines and spans are the whole set's.
    pub fn step(&mut self) -> Result<Option<usize>, String> {
        let Some(progress) = &self.progress else {
            return Ok(None);
        };
        let received = progress
            .lock()
            .map_err(|_| "internal error: pass 1 stopped".to_string())?
            .recv();
        match received {
            Ok(Ok(bytes)) => Ok(Some(bytes)),
            Ok(Err(message)) => Err(message),
            Err(_) => {
                self.progress = None;
                match self
                    .merger
                    .take()
                    .and_then(|merger| merger.join().ok())
                    .flatten()
                {
                    Some(merged) => {
                        self.survey = merged.survey;
                        self.lines = merged.lines;
                        self.spans = merged.spans;
                        Ok(None)
                    }
                    None => Err("internal error: pass 1 stopped".to_string()),
                }
            }
        }
    }
}

impl Drop for SurveyRun {
    fn drop(&mut self) {
        self.progress = None;
        let deadline = self.workers.stop();
        if let Some(merger) = self.merger.take() {
            join_by(merger, deadline);
        }
    }
}

/// Merge the chunks' surveys in chunk order as they come, telling `progress` each one's bytes;
/// the merged survey when every chunk came (None after an error, sent to `progress`, or when
/// the pass was stopped).
fn merge_surveys(
    results: &Receiver<Result<Surveyed, String>>,
    progress: &Sender<Result<usize, String>>,
    cancel: &AtomicBool,
    kept: &Kept,
) -> Option<Merged> {
    let mut waiting: BTreeMap<usize, Surveyed> = BTreeMap::new();
    let mut merged = Merged::default();
    let mut next = 0;
    // (ends when the reader and every worker are done: they hold the senders)
    for received in results {
        if cancel.load(Ordering::SeqCst) {
            return None;
        }
        let done = match received {
            Ok(done) => done,
            Err(message) => {
                let _ = progress.send(Err(message));
                return None;
            }
        };
        waiting.insert(done.index, done);
        while let Some(done) = waiting.remove(&next) {
            next += 1;
            let bytes = done.bytes;
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                merged.lines += done.rows as u64;
                merged.spans.push(done.span);
                let mapping = merged.survey.merge(done.survey);
                if let Some((mut chunk, promised)) = done.kept {
                    // (the chunk's key rows, numbered as the merged survey numbers them)
                    for id in &mut chunk.ids {
                        *id = mapping[*id as usize];
                    }
                    kept.keep(chunk, promised);
                }
            }));
            if let Err(payload) = outcome {
                let _ = progress.send(Err(panic_message(payload, "the files")));
                return None;
            }
            if progress.send(Ok(bytes)).is_err() {
                return None;
            }
        }
    }
    if !waiting.is_empty() {
        let _ = progress.send(Err("internal error: a chunk of pass 1 was lost".to_string()));
        return None;
    }
    Some(merged)
}

fn read_chunks(
    mut reader: ChunkReader,
    cancel: &AtomicBool,
    warnings: &Mutex<Vec<String>>,
    work: &SyncSender<Work>,
    failed: &SyncSender<Result<Surveyed, String>>,
) {
    let mut previous: Vec<(u32, u32, String)> = Vec::new();
    let mut index = 0;
    while !cancel.load(Ordering::SeqCst) {
        // (a panic here would end the pass early, as if the files had ended)
        let raw = match catch_unwind(AssertUnwindSafe(|| reader.next_chunk())) {
            Ok(Some(raw)) => raw,
            Ok(None) => break,
            Err(payload) => {
                let reading = reader.reading().unwrap_or("the files");
                let _ = failed.send(Err(panic_message(payload, reading)));
                return;
            }
        };
        let before = context(&previous);
        previous = last_lines(&previous, &raw);
        if work.send((index, raw, before)).is_err() {
            break;
        }
        index += 1;
    }
    if let Ok(mut shared) = warnings.lock() {
        shared.append(&mut reader.warnings);
    }
}

// (a thread's body: out of line, so that a profile names the thread; benchmarks/instructions.py)
#[inline(never)]
fn survey_chunks(
    files: &[FileSpec],
    cancel: &AtomicBool,
    work: &Mutex<Receiver<Work>>,
    done: &SyncSender<Result<Surveyed, String>>,
    spare: &Spare,
    kept: &Kept,
) {
    let mut scratch = Scratch::default();
    loop {
        if cancel.load(Ordering::SeqCst) {
            return;
        }
        let next = match work.lock() {
            Ok(receiver) => receiver.recv(),
            Err(_) => return,
        };
        let Ok((index, raw, before)) = next else {
            return;
        };
        let result = catch_unwind(AssertUnwindSafe(|| {
            let lines = raw.lines();
            let (survey, kept) = match kept.room_for(lines.len()) {
                None => {
                    let mut survey = Survey::default();
                    parse_into(&lines, &before, &mut survey, &mut scratch);
                    (survey, None)
                }
                Some(promised) => {
                    let mut tee = Tee::new(&lines);
                    parse_into(&lines, &before, &mut tee, &mut scratch);
                    let (survey, chunk) = tee.kept(&raw, &before);
                    if chunk.is_none() {
                        kept.forgo(promised);
                    }
                    (survey, chunk.map(|chunk| (chunk, promised)))
                }
            };
            let span = (
                lines.first().map_or(0, |l| l.file_id),
                lines.last().map_or(0, |l| l.file_id),
            );
            Surveyed {
                index,
                survey,
                kept,
                bytes: raw.bytes(),
                rows: lines.len(),
                span,
            }
        }))
        .map_err(|payload| {
            panic_message(payload, &names(files, raw.blocks.iter().map(|b| b.file_id)))
        });
        for block in raw.blocks {
            spare.give(block.text);
        }
        if done.send(result).is_err() {
            return;
        }
    }
}

/// The runs of chunks that carry state one to the next (a chunk goes on from the one before
/// when it starts in the file that one ends in): each run's files, from its first chunk's
/// first file to its last chunk's last.
pub fn runs(spans: &[(u32, u32)]) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = Vec::new();
    for (i, &(first, last)) in spans.iter().enumerate() {
        match out.last_mut() {
            Some(run) if i > 0 && spans[i - 1].1 == first => run.1 = last,
            _ => out.push((first, last)),
        }
    }
    out
}

// ------------------------------------------------------------------------------- pass 2

/// A chunk of pass 2, converted by the caller's function, with the files whose waiting rows
/// took a key, its event rows and its bytes.
pub struct Done<T> {
    pub output: T,
    pub settled: Vec<(u32, Option<i64>)>,
    pub events: Vec<Event>,
    pub bytes: usize,
}

/// A chunk of pass 2 done, or the pass's error.
type Finished<T> = Result<Done<T>, String>;

type Convert<T> =
    dyn Fn(&mut Columns, &Attributed, &mut rustc_hash::FxHashMap<u32, usize>) -> T + Send + Sync;

/// Pass 2 over the files on `plan.threads` workers, each a run at a time.
pub struct AttributeRun<T: Send + 'static> {
    results: Option<Mutex<Receiver<Finished<T>>>>,
    tallies: Arc<Mutex<Vec<Tally>>>,
    workers: Workers,
}

impl<T: Send + 'static> AttributeRun<T> {
    /// Start pass 2: `runs` from pass 1's spans; `convert` makes each chunk's output (its
    /// third argument: rows handed over per file so far, the worker's own).
    pub fn start(
        files: Vec<FileSpec>,
        runs: Vec<(u32, u32)>,
        plan: Plan,
        tables: (Arc<Whole>, Arc<Keys>),
        gather: Gather,
        convert: Arc<Convert<T>>,
        kept: Arc<Kept>,
    ) -> AttributeRun<T> {
        let threads = plan.threads.max(1);
        let cancel = Arc::new(AtomicBool::new(false));
        let queue = Arc::new(Mutex::new(runs.into_iter().collect::<VecDeque<_>>()));
        let tallies = Arc::new(Mutex::new(Vec::new()));
        let (done_tx, done_rx) = sync_channel::<Result<Done<T>, String>>(threads * 2);
        let working = Arc::new(AtomicUsize::new(threads));
        let mut handles = Vec::new();
        for _ in 0..threads {
            let worker = Worker {
                files: files.clone(),
                plan,
                tables: tables.clone(),
                gather: gather.clone(),
                convert: convert.clone(),
                kept: kept.clone(),
                cancel: cancel.clone(),
                queue: queue.clone(),
                tallies: tallies.clone(),
                done: done_tx.clone(),
                working: working.clone(),
            };
            handles.push(std::thread::spawn(move || worker.work()));
        }
        AttributeRun {
            results: Some(Mutex::new(done_rx)),
            tallies,
            workers: Workers { cancel, handles },
        }
    }

    /// The next chunk attributed (waiting for one); None at the end.
    pub fn step(&mut self) -> Result<Option<Done<T>>, String> {
        let Some(results) = &self.results else {
            return Ok(None);
        };
        let received = results
            .lock()
            .map_err(|_| "internal error: pass 2 stopped".to_string())?
            .recv();
        match received {
            Ok(result) => result.map(Some),
            Err(_) => {
                self.results = None;
                Ok(None)
            }
        }
    }

    /// The counts of every worker (once every chunk was taken).
    pub fn tally(&self) -> Tally {
        let mut tally = Tally::default();
        if let Ok(mut parts) = self.tallies.lock() {
            for part in parts.drain(..) {
                tally.merge(part);
            }
            parts.push(tally.clone());
        }
        tally
    }
}

impl<T: Send + 'static> Drop for AttributeRun<T> {
    fn drop(&mut self) {
        self.results = None;
        self.workers.stop();
    }
}

struct Worker<T: Send + 'static> {
    files: Vec<FileSpec>,
    plan: Plan,
    tables: (Arc<Whole>, Arc<Keys>),
    gather: Gather,
    convert: Arc<Convert<T>>,
    /// pass 1's parse of the chunks it kept
    kept: Arc<Kept>,
    cancel: Arc<AtomicBool>,
    queue: Arc<Mutex<VecDeque<(u32, u32)>>>,
    tallies: Arc<Mutex<Vec<Tally>>>,
    done: SyncSender<Result<Done<T>, String>>,
    /// The workers still at work (a worker that ends leaves its core to the others).
    working: Arc<AtomicUsize>,
}

/// Counts a worker out of `working` when it ends, however it ends.
struct Leaving(Arc<AtomicUsize>);

impl Drop for Leaving {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl<T: Send + 'static> Worker<T> {
    fn work(self) {
        let _leaving = Leaving(self.working.clone());
        let mut attributor = Attributor::new(
            self.tables.0.clone(),
            self.tables.1.clone(),
            Some(self.gather.clone()),
        );
        let mut handed = rustc_hash::FxHashMap::default();
        // (the texts of chunks whose output copied what it keeps are read into again)
        let spare = Arc::new(Spare::default());
        loop {
            if self.cancel.load(Ordering::SeqCst) {
                return;
            }
            let run = match self.queue.lock() {
                Ok(mut queue) => queue.pop_front(),
                Err(_) => return,
            };
            let Some((first, last)) = run else { break };
            let files: Vec<FileSpec> = self
                .files
                .iter()
                .filter(|f| (first..=last).contains(&f.file_id))
                .cloned()
                .collect();
            let shown = names(&files, files.iter().map(|f| f.file_id));
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                self.run(files, &shown, &mut attributor, &mut handed, &spare)
            }));
            match outcome {
                Ok(true) => {}
                Ok(false) => return,
                Err(payload) => {
                    let _ = self.done.send(Err(panic_message(payload, &shown)));
                    return;
                }
            }
        }
        if let Some(gather) = attributor.gather.take() {
            if let Ok(mut tallies) = self.tallies.lock() {
                tallies.push(gather.tally);
            }
        }
    }

    /// Attribute one run's files; false when the caller went away. Once a worker has ended
    /// (no run is left for it), the files are read and parsed on a thread of their own, a
    /// chunk ahead, on the core it left: a set of one file, or with one file larger than the
    /// rest, is not attributed on one core alone.
    fn run(
        &self,
        files: Vec<FileSpec>,
        shown: &str,
        attributor: &mut Attributor,
        handed: &mut rustc_hash::FxHashMap<u32, usize>,
        spare: &Arc<Spare>,
    ) -> bool {
        let scanner = Scanner::with_spare(
            files,
            self.plan.chunk_bytes,
            self.plan.max_rows,
            spare.clone(),
        )
        .with_kept(self.kept.clone());
        let mut chunks = Chunks::Here(Box::new(scanner), self.tables.1.clone());
        let mut next = chunks.next();
        loop {
            let (mut columns, ids, bytes) = match std::mem::replace(&mut next, Ok(None)) {
                Ok(Some(Chunk::Parsed(columns, ids, bytes))) => (columns, ids, bytes),
                Ok(_) => return true,
                Err(error) => {
                    // (the reading thread's panic)
                    let _ = self.done.send(Err(error));
                    return false;
                }
            };
            if self.cancel.load(Ordering::SeqCst) {
                return false;
            }
            if self.working.load(Ordering::SeqCst) < self.plan.threads {
                chunks = chunks.ahead(&self.cancel, shown);
            }
            next = chunks.next();
            let ahead = match &next {
                Ok(Some(Chunk::Parsed(c, _, _))) if !c.is_empty() => Some(Ahead::of(c, 0)),
                _ => None,
            };
            let attributed = attributor.attribute(&columns, &ids, ahead.as_ref());
            let settled = attributed
                .settled
                .iter()
                .map(|s| (s.file_id, s.key))
                .collect();
            let events = attributor
                .gather
                .as_mut()
                .map(|g| std::mem::take(&mut g.events))
                .unwrap_or_default();
            let output = (self.convert)(&mut columns, &attributed, handed);
            // (an output that took the texts left none)
            for text in columns.text.blocks.drain(..) {
                spare.give(text);
            }
            if self
                .done
                .send(Ok(Done {
                    output,
                    settled,
                    events,
                    bytes,
                }))
                .is_err()
            {
                return false;
            }
        }
    }
}

/// A run's chunks, read and parsed here or on a thread of their own (a chunk ahead).
enum Chunks {
    Here(Box<Scanner>, Arc<Keys>),
    Ahead(Reader<Chunk>),
}

impl Chunks {
    /// The rest of the chunks, read on a thread of their own (`Reader`).
    fn ahead(self, cancel: &Arc<AtomicBool>, shown: &str) -> Chunks {
        match self {
            Chunks::Here(mut scanner, keys) => Chunks::Ahead(Reader::start(
                move || scanner.next_keyed(&keys, None),
                cancel,
                shown,
            )),
            ahead => ahead,
        }
    }

    fn next(&mut self) -> Result<Option<Chunk>, String> {
        match self {
            Chunks::Here(scanner, keys) => Ok(scanner.next_keyed(keys, None)),
            Chunks::Ahead(reader) => reader.next(),
        }
    }
}

/// A thread that makes items (`produce`, until it gives None) one ahead of their taker.
struct Reader<T> {
    items: Option<Receiver<Result<Option<T>, String>>>,
    thread: Option<JoinHandle<()>>,
}

impl<T: Send + 'static> Reader<T> {
    /// The thread ends after the last item, when the pass is cancelled or when the reader is
    /// dropped; a panic in `produce` is its last item, an error naming `shown`.
    fn start(
        mut produce: impl FnMut() -> Option<T> + Send + 'static,
        cancel: &Arc<AtomicBool>,
        shown: &str,
    ) -> Reader<T> {
        let (cancel, shown) = (cancel.clone(), shown.to_string());
        let (tx, rx) = sync_channel::<Result<Option<T>, String>>(0);
        let thread = std::thread::spawn(move || loop {
            if cancel.load(Ordering::SeqCst) {
                return;
            }
            let outcome = catch_unwind(AssertUnwindSafe(&mut produce))
                .map_err(|payload| panic_message(payload, &shown));
            let last = !matches!(outcome, Ok(Some(_)));
            if tx.send(outcome).is_err() || last {
                return;
            }
        });
        Reader {
            items: Some(rx),
            thread: Some(thread),
        }
    }

    /// The next item (None after the last, or once the thread has ended).
    fn next(&mut self) -> Result<Option<T>, String> {
        match &self.items {
            Some(items) => items.recv().unwrap_or(Ok(None)),
            None => Ok(None),
        }
    }
}

impl<T> Drop for Reader<T> {
    fn drop(&mut self) {
        // (the thread, waiting to hand over an item, ends when the receiver goes)
        self.items = None;
        if let Some(thread) = self.thread.take() {
            join_by(thread, Instant::now() + STOP_WAIT);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Files of `lines` NCCL and SGLang lines each, in a folder of their own (removed when
    /// the folder is dropped).
    fn files(name: &str, count: u32, lines: usize) -> (crate::TestDir, Vec<FileSpec>) {
        let dir = crate::TestDir::new(name);
        let specs = (0..count)
            .map(|i| {
                let path = dir.join(format!("node{i}.log"));
                let text: String = (0..lines)
                    .map(|n| {
                        if n % 2 == 0 {
                            format!(
                                "[2026-11-29 10:00:{:02} TP{i}] Decode batch, #running-req: {n}\n",
                                n % 60
                            )
                        } else {
                            format!(
                                "gpu-{i}:{}:{} [{i}] NCCL INFO comm 0x{n:x} rank {i} nranks 8\n",
                                100 + i,
                                100 + i
                            )
                        }
                    })
                    .collect();
                std::fs::write(&path, text).expect("write");
                FileSpec {
                    file_id: i,
                    path,
                    display: format!("node{i}.log"),
                }
            })
            .collect();
        (dir, specs)
    }

    #[test]
    fn pass_1_goes_on_to_its_end_while_the_caller_does_not_ask_for_its_progress() {
        // many more chunks than the workers' queues hold (2 per worker)
        let plan = Plan {
            chunk_bytes: 1 << 12,
            max_rows: 64,
            threads: 1,
            keep_parsed: 1 << 20,
        };
        let (_dir, files) = files("unasked", 3, 2000);
        let mut alone = SurveyRun::start(files.clone(), plan);
        let started = Instant::now();
        while !alone.merger.as_ref().is_some_and(JoinHandle::is_finished) {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "pass 1 waited for its caller"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        let (mut chunks, mut bytes) = (0, 0);
        while let Some(read) = alone.step().expect("no error") {
            chunks += 1;
            bytes += read;
        }
        assert!(chunks > 20, "{chunks} chunks");
        // the same survey as a pass whose every chunk was asked for as it came
        let mut asked = SurveyRun::start(files, plan);
        let mut asked_bytes = 0;
        while let Some(read) = asked.step().expect("no error") {
            asked_bytes += read;
        }
        assert_eq!(bytes, asked_bytes);
        assert_eq!(alone.lines, 6000);
        assert_eq!(alone.lines, asked.lines);
        assert_eq!(alone.spans, asked.spans);
        assert_eq!(alone.survey.keys.len(), asked.survey.keys.len());
        assert_eq!(alone.survey.keys.counts, asked.survey.keys.counts);
    }

    #[test]
    fn a_reader_hands_over_its_items_in_order_and_a_panic_as_an_error_naming_the_files() {
        let cancel = Arc::new(AtomicBool::new(false));
        let mut made = 0;
        let mut reader = Reader::start(
            move || {
                made += 1;
                assert!(made < 4, "a fourth item fails");
                Some(made)
            },
            &cancel,
            "node0.log",
        );
        assert_eq!(reader.next(), Ok(Some(1)));
        assert_eq!(reader.next(), Ok(Some(2)));
        assert_eq!(reader.next(), Ok(Some(3)));
        let error = reader.next().expect_err("the panic");
        assert!(error.contains("node0.log"), "{error}");
        // (the thread ended with it)
        assert_eq!(reader.next(), Ok(None));
    }

    #[test]
    fn a_reader_dropped_or_cancelled_ends_its_thread() {
        let cancel = Arc::new(AtomicBool::new(false));
        let ended = Arc::new(AtomicBool::new(false));
        let mut reader = Reader::start(|| Some(7), &cancel, "f");
        assert_eq!(reader.next(), Ok(Some(7)));
        let thread = reader.thread.take().expect("a thread");
        let watch = ended.clone();
        let waited = std::thread::spawn(move || {
            thread.join().expect("no panic");
            watch.store(true, Ordering::SeqCst);
        });
        drop(reader); // (the thread waits to hand over the next item)
        waited.join().expect("joined");
        assert!(ended.load(Ordering::SeqCst));
        // a cancelled pass: the thread ends before making another item
        cancel.store(true, Ordering::SeqCst);
        let mut reader = Reader::start(|| Some(1), &cancel, "f");
        assert_eq!(reader.next(), Ok(None));
    }
}
