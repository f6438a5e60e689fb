//! `LogSet`: the two passes over a set of files, driven from Python a chunk at a time (so that
//! progress is reported and Ctrl-C is heard between chunks); each chunk's work runs with the
//! GIL released.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::RecordBatch;
use logcorr_scan::attribute::Attributed;
use logcorr_scan::attribute::{Attributor, Coordinates, Whole, EVIDENCE};
use logcorr_scan::clock::Clock;
use logcorr_scan::gather::Event;
use logcorr_scan::gather::{Gather, Selection, Tally};
use logcorr_scan::keys::Keys;
use logcorr_scan::model::Columns;
use logcorr_scan::model::Role;
use logcorr_scan::pass::{AttributePass, Step};
use logcorr_scan::pipeline::{panic_message, runs, AttributeRun, Plan, SurveyRun};
use logcorr_scan::scan::FileSpec;
use logcorr_scan::survey::Survey;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::arrow::{
    attributed_batch, events_batch, headers_batch, keys_batch, tally_batches, ArrowBatch,
};

#[pyclass(module = "logcorr._core")]
pub struct LogSet {
    files: Vec<FileSpec>,
    plan: Plan,
    survey: Option<SurveyRun>,
    /// Pass 1's chunks' first and last files (the runs of pass 2 follow from them).
    spans: Vec<(u32, u32)>,
    attribute: Option<AttributeRun<RecordBatch>>,
    warnings: Vec<String>,
    /// The whole-set tables and key rows, for a second reading of some files.
    tables: Option<(Arc<Whole>, Arc<Keys>)>,
    /// The event rows of the chunks handed over since they were last taken.
    events: Vec<Event>,
}

/// A core error (a panic caught in a worker) as the Python exception the CLI reports, with
/// where the panic happened.
fn internal(message: String) -> PyErr {
    let place = crate::last_panic()
        .map(|place| format!(" (at {place})"))
        .unwrap_or_default();
    pyo3::exceptions::PyRuntimeError::new_err(format!("{message}{place}"))
}

/// Test-only (`tests/test_cli_errors.py`): with `LOGCORR_TEST_PANIC=NAME` (a file's name as
/// shown), the core panics where it hands over that file's rows, as a bug would; read when a
/// pass starts, and nowhere else.
fn test_panic(files: &[FileSpec]) -> Option<(u32, String)> {
    let name = std::env::var("LOGCORR_TEST_PANIC").ok()?;
    let file = files.iter().find(|f| f.display == name)?;
    Some((file.file_id, name))
}

fn panic_if_asked(asked: &Option<(u32, String)>, file_ids: &[u32]) {
    if let Some((file_id, name)) = asked {
        if file_ids.contains(file_id) {
            panic!("LOGCORR_TEST_PANIC asked for a panic on {name}");
        }
    }
}

fn role(name: Option<String>) -> PyResult<Option<Role>> {
    name.map(|n| {
        Role::from_name(&n).ok_or_else(|| PyValueError::new_err(format!("unknown role {n}")))
    })
    .transpose()
}

#[pymethods]
impl LogSet {
    /// `threads`: workers that parse or attribute at once; `keep_parsed`: bytes of pass 1's
    /// parse kept in memory for pass 2, the rest written to files in `kept_folder` (created
    /// when needed, removed when the set is done with it) when given, else parsed again.
    #[new]
    #[pyo3(signature = (files, chunk_bytes, max_rows, threads=1, keep_parsed=0, kept_folder=None))]
    fn new(
        files: Vec<(u32, Bound<'_, PyBytes>, String)>,
        chunk_bytes: usize,
        max_rows: usize,
        threads: usize,
        keep_parsed: usize,
        kept_folder: Option<PathBuf>,
    ) -> LogSet {
        let files: Vec<FileSpec> = files
            .into_iter()
            .map(|(file_id, path, display)| FileSpec {
                file_id,
                path: PathBuf::from(OsStr::from_bytes(path.as_bytes())),
                display,
            })
            .collect();
        let plan = Plan {
            chunk_bytes,
            max_rows,
            threads: threads.max(1),
            keep_parsed,
        };
        let survey = Some(SurveyRun::start_keeping(files.clone(), plan, kept_folder));
        LogSet {
            files,
            plan,
            survey,
            spans: Vec::new(),
            attribute: None,
            warnings: Vec::new(),
            tables: None,
            events: Vec::new(),
        }
    }

    /// Pass 1 on the next chunk: its bytes of lines; None when every file is read.
    fn survey_step(&mut self, py: Python<'_>) -> PyResult<Option<usize>> {
        let pass = self
            .survey
            .as_mut()
            .ok_or_else(|| PyValueError::new_err("pass 1 is over"))?;
        let done = py.detach(|| pass.step()).map_err(internal)?;
        if done.is_none() {
            if let Ok(mut warnings) = pass.warnings.lock() {
                self.warnings.append(&mut warnings);
            }
        }
        Ok(done)
    }

    /// What pass 1 found: `keys` (record batch), `server_args` [(file, line, text)],
    /// `headers` (record batch: `_second` µs, `_key`), `first_dated` [(file, first µs, wrapper offset s)],
    /// `median` (µs), `wrap_default` (s), `lines`, `rank_spans` [(key, first µs, last µs)].
    fn survey_tables<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let pass = self
            .survey
            .as_ref()
            .ok_or_else(|| PyValueError::new_err("pass 1 is over"))?;
        survey_dict(py, &pass.survey, pass.lines)
    }

    /// End pass 1 and start pass 2 with what the whole set says (`tables`, as
    /// `api.attribution_arguments` gives them; `keep`: the lean view's rows per file end).
    #[pyo3(signature = (tables, keep=None))]
    fn start_attribution(&mut self, tables: WholeTables, keep: Option<usize>) -> PyResult<()> {
        let (whole, selection) = tables.whole()?;
        let mut pass = self
            .survey
            .take()
            .ok_or_else(|| PyValueError::new_err("pass 1 is over"))?;
        let spans = std::mem::take(&mut pass.spans);
        let keys = std::mem::take(&mut pass.survey.keys);
        let kept = pass.kept.clone();
        drop(pass);
        let (whole, keys) = (Arc::new(whole), Arc::new(keys));
        self.tables = Some((whole.clone(), keys.clone()));
        let gather = Gather::new(selection);
        let asked = test_panic(&self.files);
        // (the lean view hands over each file's first `keep` rows and each chunk's last `keep`
        // rows of each file; else every row)
        let tables = whole.clone();
        let convert = Arc::new(
            move |columns: &mut Columns,
                  attributed: &Attributed,
                  handed: &mut HashMap<u32, usize>| {
                panic_if_asked(&asked, &columns.file_id);
                match keep {
                    None => attributed_batch(columns, attributed, &tables),
                    Some(keep) => {
                        let rows = ends(&columns.file_id, handed, keep);
                        attributed_batch(
                            &mut columns.select(&rows),
                            &attributed.select(&rows),
                            &tables,
                        )
                    }
                }
            },
        );
        self.spans = spans.clone();
        self.attribute = Some(AttributeRun::start(
            self.files.clone(),
            runs(&spans),
            self.plan,
            (whole, keys),
            gather,
            convert,
            kept,
        ));
        Ok(())
    }

    /// Pass 2 on the next chunk (as the workers finish them): (its rows as the runs store
    /// them, or in the lean view the rows it keeps; [(file, key or None)] of files whose
    /// waiting rows were placed; bytes); None at the end.
    #[allow(clippy::type_complexity)]
    fn attribute_step(
        &mut self,
        py: Python<'_>,
    ) -> PyResult<Option<(ArrowBatch, Vec<(u32, Option<i64>)>, usize)>> {
        let pass = self
            .attribute
            .as_mut()
            .ok_or_else(|| PyValueError::new_err("pass 2 has not started"))?;
        let Some(done) = py.detach(|| pass.step()).map_err(internal)? else {
            return Ok(None);
        };
        self.events.extend(done.events);
        Ok(Some((
            ArrowBatch::new(done.output),
            done.settled,
            done.bytes,
        )))
    }

    /// Pass 2 again over the files `file_ids` only (the chunks that hold none of them are read,
    /// not parsed): their rows, a chunk at a time, for the diagnosis's lookups.
    fn rows_of(&self, file_ids: Vec<u32>) -> PyResult<RowsOf> {
        let (whole, keys) = self
            .tables
            .clone()
            .ok_or_else(|| PyValueError::new_err("pass 2 has not started"))?;
        let attributor = Attributor::new(whole.clone(), keys, None);
        let wanted: HashSet<u32> = file_ids.into_iter().collect();
        let pass = AttributePass::new(
            self.files.clone(),
            self.plan.chunk_bytes,
            self.plan.max_rows,
            attributor,
            Some(wanted.clone()),
        );
        Ok(RowsOf::new(&self.files, pass, wanted, whole))
    }

    /// The event rows gathered since the last call (a record batch), taken.
    fn take_events(&mut self) -> PyResult<ArrowBatch> {
        let pass = self
            .attribute
            .as_mut()
            .ok_or_else(|| PyValueError::new_err("pass 2 has not started"))?;
        let _ = pass;
        let events = std::mem::take(&mut self.events);
        Ok(ArrowBatch::new(events_batch(&events)))
    }

    /// The counts of pass 2: `lines`, `evidence` {name: n}, `why`, `notes`, `capped`, `procs`,
    /// and the tables `people`, `last`, `progress`, `file_procs` (record batches).
    fn tally<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let pass = self
            .attribute
            .as_ref()
            .ok_or_else(|| PyValueError::new_err("pass 2 has not started"))?;
        let whole = &self
            .tables
            .as_ref()
            .ok_or_else(|| PyValueError::new_err("pass 2 has not started"))?
            .0;
        tally_dict(py, &pass.tally(), &whole.eff_host)
    }

    /// The warnings so far (files that stopped early), taken.
    fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }
}

/// What pass 1 found, as `LogSet.survey_tables` gives it.
pub(crate) fn survey_dict<'py>(
    py: Python<'py>,
    s: &Survey,
    lines: u64,
) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("keys", ArrowBatch::new(keys_batch(&s.keys)))?;
    out.set_item("server_args", s.server_args.clone())?;
    let mut headers: Vec<(i64, u32)> = s.headers.iter().copied().collect();
    headers.sort_unstable();
    out.set_item("headers", ArrowBatch::new(headers_batch(&headers)))?;
    out.set_item("first_dated", s.first_dated.clone())?;
    out.set_item("median", s.median())?;
    out.set_item("wrap_default", s.wrap_default())?;
    out.set_item("lines", lines)?;
    let mut spans: Vec<(u32, i64, i64)> =
        s.rank_spans.iter().map(|(&k, &(a, b))| (k, a, b)).collect();
    spans.sort_unstable();
    out.set_item("rank_spans", spans)?;
    Ok(out)
}

/// What `start_attribution` is given of the whole set (a dict: `api.attribution_arguments`):
/// per key number its process, evidence, conflict, role and effective host; the set's
/// tables; what makes a line an event row; the processes that are no SGLang scheduler,
/// whose lines take no role.
#[derive(FromPyObject)]
#[pyo3(from_item_all)]
pub(crate) struct WholeTables {
    proc: Vec<Option<u32>>,
    evidence: Vec<Option<String>>,
    conflict: Vec<bool>,
    roles: Vec<Option<String>>,
    eff_host: Vec<Option<String>>,
    crowded: Vec<(u32, Option<String>, i64)>,
    shared: Vec<u32>,
    file_procs: Vec<(u32, u32)>,
    local_ranks: Option<Vec<(u32, i32)>>,
    processes: Vec<Coordinates>,
    file_nodes: Vec<(u32, i32)>,
    file_names: Vec<(u32, String)>,
    first_dated: Vec<(u32, Option<i64>, Option<i64>)>,
    median: Option<i64>,
    wrap_default: Option<i64>,
    clock_offsets: Vec<(String, i64)>,
    /// (stems, child_died, glog_fatal, progress stems, wrap_min)
    events: (Vec<String>, String, String, Vec<String>, usize),
    plain: Vec<u32>,
}

impl WholeTables {
    /// The whole-set tables of pass 2 and what makes a line an event row.
    pub(crate) fn whole(self) -> PyResult<(Whole, Selection)> {
        let evidence = self
            .evidence
            .into_iter()
            .map(|e| {
                e.map(|e| {
                    EVIDENCE
                        .iter()
                        .position(|x| *x == e)
                        .map(|i| i as u8)
                        .ok_or_else(|| PyValueError::new_err(format!("unknown evidence {e}")))
                })
                .transpose()
            })
            .collect::<PyResult<Vec<_>>>()?;
        let (stems, child_died, glog_fatal, progress, wrap_min) = self.events;
        let selection = Selection::new(&stems, &child_died, &glog_fatal, &progress, wrap_min)
            .map_err(PyValueError::new_err)?;
        let whole = Whole {
            proc: self.proc,
            evidence,
            conflict: self.conflict,
            role: self
                .roles
                .into_iter()
                .map(role)
                .collect::<PyResult<Vec<_>>>()?,
            eff_host: self.eff_host,
            crowded: self.crowded.into_iter().collect(),
            shared: self.shared.into_iter().collect(),
            file_procs: self.file_procs.into_iter().collect(),
            local_ranks: self
                .local_ranks
                .map(|r| r.into_iter().collect::<HashSet<_>>()),
            processes: self.processes,
            plain: self.plain.into_iter().collect(),
            file_nodes: self.file_nodes.into_iter().collect(),
            file_names: self.file_names.into_iter().collect(),
            clock: Clock {
                files: self
                    .first_dated
                    .into_iter()
                    .map(|(f, first, offset)| (f, (first, offset)))
                    .collect::<HashMap<_, _>>(),
                overall: self.median,
                wrap_default: self.wrap_default,
            },
            clock_offsets: self.clock_offsets.into_iter().collect(),
        };
        Ok((whole, selection))
    }
}

/// The counts of pass 2, as `LogSet.tally` gives them.
pub(crate) fn tally_dict<'py>(
    py: Python<'py>,
    t: &Tally,
    eff_host: &[Option<String>],
) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("lines", t.lines)?;
    let evidence: HashMap<&str, u64> = t
        .evidence
        .iter()
        .map(|(&e, &n)| (EVIDENCE[e as usize], n))
        .collect();
    out.set_item("evidence", evidence)?;
    out.set_item("why", t.why.clone())?;
    out.set_item("notes", t.notes.clone())?;
    out.set_item("capped", t.capped)?;
    out.set_item("procs", t.procs.iter().copied().collect::<Vec<_>>())?;
    let (people, last, progress, file_procs) = tally_batches(t, eff_host);
    out.set_item("people", ArrowBatch::new(people))?;
    out.set_item("last", ArrowBatch::new(last))?;
    out.set_item("progress", ArrowBatch::new(progress))?;
    out.set_item("file_procs", ArrowBatch::new(file_procs))?;
    Ok(out)
}

/// The rows of a chunk the lean view keeps: each file's first `keep` rows of all (`heads`
/// counts what was handed over), and the chunk's last `keep` rows of each file.
fn ends(files: &[u32], heads: &mut HashMap<u32, usize>, keep: usize) -> Vec<usize> {
    let mut rows = Vec::new();
    let mut start = 0;
    while start < files.len() {
        let file = files[start];
        let end = start + files[start..].iter().take_while(|&&f| f == file).count();
        let given = heads.entry(file).or_default();
        let head_end = start + keep.saturating_sub(*given).min(end - start);
        *given += head_end - start;
        let tail_start = end.saturating_sub(keep).max(head_end);
        rows.extend(start..head_end);
        rows.extend(tail_start..end);
        start = end;
    }
    rows
}

/// Rows of some files read again (`LogSet.rows_of`), a chunk at a time.
#[pyclass(module = "logcorr._core")]
pub struct RowsOf {
    pass: AttributePass,
    wanted: HashSet<u32>,
    whole: Arc<Whole>,
    /// The wanted files' names, for an error.
    shown: String,
    asked: Option<(u32, String)>,
}

impl RowsOf {
    /// The reading `pass` of `files` again, for the rows of the files `wanted`.
    pub(crate) fn new(
        files: &[FileSpec],
        pass: AttributePass,
        wanted: HashSet<u32>,
        whole: Arc<Whole>,
    ) -> RowsOf {
        let mut shown: Vec<&str> = files
            .iter()
            .filter(|f| wanted.contains(&f.file_id))
            .map(|f| f.display.as_str())
            .collect();
        shown.dedup();
        RowsOf {
            pass,
            wanted,
            whole,
            shown: shown.join(", "),
            asked: test_panic(files),
        }
    }
}

#[pymethods]
impl RowsOf {
    /// The next chunk's rows of the wanted files; None at the end. A panic (a bug) is an
    /// error naming the files, as in the passes.
    fn next_chunk(&mut self, py: Python<'_>) -> PyResult<Option<ArrowBatch>> {
        let (pass, wanted, whole) = (&mut self.pass, &self.wanted, &self.whole);
        let (asked, shown) = (&self.asked, &self.shown);
        let batch = py.detach(|| {
            catch_unwind(AssertUnwindSafe(|| next_rows(pass, wanted, whole, asked)))
                .map_err(|payload| panic_message(payload, shown))
        });
        Ok(batch.map_err(internal)?.map(ArrowBatch::new))
    }
}

/// The next chunk's rows of the wanted files read again.
fn next_rows(
    pass: &mut AttributePass,
    wanted: &HashSet<u32>,
    whole: &Whole,
    asked: &Option<(u32, String)>,
) -> Option<RecordBatch> {
    loop {
        match pass.step()? {
            Step::Skipped(_) => continue,
            Step::Attributed(columns, attributed, _) => {
                panic_if_asked(asked, &columns.file_id);
                let rows: Vec<usize> = (0..columns.len())
                    .filter(|&r| wanted.contains(&columns.file_id[r]))
                    .collect();
                if rows.is_empty() {
                    continue;
                }
                return Some(attributed_batch(
                    &mut columns.select(&rows),
                    &attributed.select(&rows),
                    whole,
                ));
            }
        }
    }
}
