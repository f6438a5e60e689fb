//! `logcorr._core`: the Python binding of the line scanner. Files are read and parsed here
//! with the GIL released; chunks reach polars as Arrow record batches.
//!
//! No `unsafe` code but in `ffi` (its header says why).

#![deny(unsafe_code)]

mod arrow;
mod ffi;
mod json_lines;
mod merge_step;
mod part;
mod set;

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::sync::Mutex;

use logcorr_scan::model::NOWHERE;
use logcorr_scan::parse::{parse_chunk, Line};
use logcorr_scan::scan::{context, ChunkReader, FileSpec, Scanner as Inner};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::arrow::{lines_batch, parsed_batch, ArrowBatch};

/// Reads files (`(file_id, path bytes, display name)`) a chunk at a time and parses them.
#[pyclass(module = "logcorr._core")]
struct Scanner {
    inner: Inner,
}

#[pymethods]
impl Scanner {
    #[new]
    fn new(
        files: Vec<(u32, Bound<'_, PyBytes>, String)>,
        chunk_bytes: usize,
        max_rows: usize,
    ) -> Scanner {
        let specs = files
            .into_iter()
            .map(|(file_id, path, display)| FileSpec {
                file_id,
                path: PathBuf::from(OsStr::from_bytes(path.as_bytes())),
                display,
            })
            .collect();
        Scanner {
            inner: Inner::new(specs, chunk_bytes, max_rows),
        }
    }

    /// The next parsed chunk as (batch, bytes of lines, rows); None at the end.
    fn next_chunk(&mut self, py: Python<'_>) -> Option<(ArrowBatch, usize, usize)> {
        let inner = &mut self.inner;
        let parsed = py.detach(|| {
            inner
                .next_chunk()
                .map(|mut p| (parsed_batch(&mut p.columns), p.bytes, p.rows))
        })?;
        Some((ArrowBatch::new(parsed.0), parsed.1, parsed.2))
    }

    /// The warnings so far (files that stopped early), taken.
    fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.inner.reader.warnings)
    }
}

/// Reads files a chunk of physical lines at a time, without parsing them.
#[pyclass(module = "logcorr._core")]
struct LineReader {
    reader: ChunkReader,
}

#[pymethods]
impl LineReader {
    #[new]
    fn new(
        files: Vec<(u32, Bound<'_, PyBytes>, String)>,
        chunk_bytes: usize,
        max_rows: usize,
    ) -> LineReader {
        LineReader {
            reader: ChunkReader::new(specs(files), chunk_bytes, max_rows),
        }
    }

    /// The next chunk's lines (file_id, line, text); None at the end.
    fn next_chunk(&mut self, py: Python<'_>) -> Option<ArrowBatch> {
        let reader = &mut self.reader;
        let batch = py.detach(|| reader.next_chunk().map(|raw| lines_batch(&raw.lines())))?;
        Some(ArrowBatch::new(batch))
    }

    /// The warnings so far (files that stopped early), taken.
    fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.reader.warnings)
    }
}

/// The first `size` decoded bytes of a file (gzip decoded), and why it stopped early (None
/// when it did not).
#[pyfunction]
fn sniff<'py>(
    py: Python<'py>,
    path: Bound<'py, PyBytes>,
    size: usize,
) -> PyResult<(Bound<'py, PyBytes>, Option<String>)> {
    let path = PathBuf::from(OsStr::from_bytes(path.as_bytes()));
    let (head, problem) = py
        .detach(|| logcorr_scan::read::head(&path, size))
        .map_err(|e| {
            pyo3::exceptions::PyOSError::new_err((e.raw_os_error().unwrap_or(0), e.to_string()))
        })?;
    Ok((PyBytes::new(py, &head), problem))
}

fn specs(files: Vec<(u32, Bound<'_, PyBytes>, String)>) -> Vec<FileSpec> {
    files
        .into_iter()
        .map(|(file_id, path, display)| FileSpec {
            file_id,
            path: PathBuf::from(OsStr::from_bytes(path.as_bytes())),
            display,
        })
        .collect()
}

/// Parse physical lines given as columns (`before`: the raw lines right before them, for
/// their first lines): the parts of a chunk, as the scanner makes them from files.
#[pyfunction]
fn parse_lines(
    py: Python<'_>,
    file_ids: Vec<u32>,
    lines: Vec<u32>,
    texts: Vec<String>,
    before: Vec<(u32, u32, String)>,
) -> ArrowBatch {
    let batch = py.detach(|| {
        let rows: Vec<Line<'_>> = file_ids
            .iter()
            .zip(&lines)
            .zip(&texts)
            .map(|((&file_id, &line), text)| Line {
                file_id,
                line,
                text,
                at: NOWHERE,
            })
            .collect();
        let (mut columns, _) = parse_chunk(&rows, &context(&before));
        parsed_batch(&mut columns)
    });
    ArrowBatch::new(batch)
}

/// Write a frame's rows (anything with `__arrow_c_stream__`: a polars frame) to the open
/// file descriptor `fd` as JSON lines, the bytes polars' `write_ndjson` writes; made and
/// written with the GIL released, in a buffer each thread keeps (a batch's JSON is tens of
/// MB: fresh pages for each would cost a page fault per 4 kB). Returns the bytes written.
#[pyfunction]
fn write_json_lines(py: Python<'_>, frame: &Bound<'_, PyAny>, fd: i32) -> PyResult<usize> {
    thread_local! {
        static BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    }
    let reader = ffi::batches_of(frame)?;
    let made = py.detach(|| {
        guarded("writing JSON lines", || {
            BUFFER.with_borrow_mut(|out| {
                out.clear();
                json_lines::write_batches(reader, out)?;
                ffi::write_all_to(fd, out).map_err(Problem::Io)?;
                Ok::<_, Problem>(out.len())
            })
        })
    })?;
    made.map_err(|problem| match problem {
        Problem::Io(error) => pyo3::exceptions::PyOSError::new_err((
            error.raw_os_error().unwrap_or(0),
            error.to_string(),
        )),
        Problem::Data(message) => pyo3::exceptions::PyValueError::new_err(message),
    })
}

/// A frame's rows as JSON lines (`write_json_lines`), as bytes: for a stream with no file
/// descriptor.
#[pyfunction]
fn json_lines_bytes<'py>(
    py: Python<'py>,
    frame: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyBytes>> {
    let reader = ffi::batches_of(frame)?;
    let made = py.detach(|| {
        guarded("writing JSON lines", || {
            let mut out = Vec::new();
            json_lines::write_batches(reader, &mut out).map(|()| out)
        })
    })?;
    let out = made.map_err(pyo3::exceptions::PyValueError::new_err)?;
    Ok(PyBytes::new(py, &out))
}

/// Why a frame could not be written as JSON lines.
enum Problem {
    Data(String),
    Io(std::io::Error),
}

impl From<String> for Problem {
    fn from(message: String) -> Problem {
        Problem::Data(message)
    }
}

/// `work()`, with a panic in it (a bug) caught and given as the error the CLI reports as one
/// line (`internal error while WHAT (at file:line)`), never an abort or a traceback.
fn guarded<T>(what: &str, work: impl FnOnce() -> T) -> PyResult<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)).map_err(|_| {
        pyo3::exceptions::PyRuntimeError::new_err(format!(
            "internal error while {what}{}",
            last_panic()
                .map(|place| format!(" (at {place})"))
                .unwrap_or_default()
        ))
    })
}

/// Where the last panic happened (`file:line`), kept by the hook `quiet_panics` sets.
static LAST_PANIC: Mutex<Option<String>> = Mutex::new(None);

/// A panic (a bug: no input should cause one) is caught where the core runs and ends the run as
/// one error line that names the files; the default hook would first print its own lines on
/// stderr. Keep its place for that line instead (printed as well when RUST_BACKTRACE is set).
fn quiet_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if std::env::var_os("RUST_BACKTRACE").is_some() {
            default(info);
        }
        if let (Some(place), Ok(mut last)) = (info.location(), LAST_PANIC.lock()) {
            *last = Some(format!("{}:{}", place.file(), place.line()));
        }
    }));
}

/// Where the last panic happened, if one did.
fn last_panic() -> Option<String> {
    LAST_PANIC.lock().ok().and_then(|last| last.clone())
}

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    quiet_panics();
    m.add_class::<Scanner>()?;
    m.add_function(wrap_pyfunction!(parse_lines, m)?)?;
    m.add_function(wrap_pyfunction!(sniff, m)?)?;
    m.add_function(wrap_pyfunction!(write_json_lines, m)?)?;
    m.add_function(wrap_pyfunction!(json_lines_bytes, m)?)?;
    m.add_function(wrap_pyfunction!(merge_step::merge_step, m)?)?;
    m.add_class::<merge_step::RunKeys>()?;
    m.add_class::<LineReader>()?;
    let patterns = pyo3::types::PyDict::new(m.py());
    for (name, text) in logcorr_scan::patterns::shared() {
        patterns.set_item(name, text)?;
    }
    m.add("PATTERNS", patterns)?;
    m.add_class::<ArrowBatch>()?;
    m.add_class::<set::LogSet>()?;
    m.add_class::<set::RowsOf>()?;
    m.add_function(wrap_pyfunction!(part::survey_part, m)?)?;
    m.add_class::<part::SurveyParts>()?;
    m.add_class::<part::AttributePart>()?;
    m.add("MAX_PARTS", logcorr_scan::parts::MAX_PARTS)?;
    Ok(())
}
