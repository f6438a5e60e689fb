//! The passes over a *part* of a set (a group of whole files), for an engine that runs them on
//! other machines (`logcorr.engine_ray`):
//!
//! * `survey_part(files, …)`: pass 1 over the group, its survey as bytes;
//! * `SurveyParts`: the driver merges the groups' surveys in file order (key rows numbered as
//!   one reader numbers them) and gives the same tables as `LogSet.survey_tables`, the merged
//!   key rows as bytes, and the bounds that cut the timeline into ranges;
//! * `AttributePart`: pass 2 over a group with the whole set's tables (the merged key rows and
//!   `start_attribution`'s arguments), stepped like `LogSet` (`attribute_step`,
//!   `take_events`, `tally`), and `rows_of` for the driver's lookups.
//!
//! A part's files carry their state (records open across chunks, a file's time so far, rows
//! waiting for a first time, the next line) from chunk to chunk as one reader does: the state
//! never leaves the part, because a part is whole files.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::Arc;

use logcorr_scan::attribute::{Attributor, Whole};
use logcorr_scan::gather::{Event, Gather};
use logcorr_scan::keys::Keys;
use logcorr_scan::pass::{AttributePass, Step, SurveyPass};
use logcorr_scan::portable::{bounds, keys_from_bytes, keys_to_bytes, SurveyPart};
use logcorr_scan::scan::FileSpec;
use logcorr_scan::survey::Survey;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};
use rustc_hash::FxHashSet as HashSet;

use crate::arrow::{attributed_batch, events_batch, ArrowBatch};
use crate::set::{survey_dict, tally_dict, RowsOf, WholeTables};

type Files = Vec<(u32, Vec<u8>, String)>;

fn specs(files: Files) -> Vec<FileSpec> {
    files
        .into_iter()
        .map(|(file_id, path, display)| FileSpec {
            file_id,
            path: PathBuf::from(OsStr::from_bytes(&path)),
            display,
        })
        .collect()
}

/// A panic in the core (a bug), as the error the CLI reports with the files named.
fn internal(payload: Box<dyn std::any::Any + Send>, files: &[FileSpec]) -> PyErr {
    let what = payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_string());
    let names: Vec<&str> = files.iter().map(|f| f.display.as_str()).collect();
    PyRuntimeError::new_err(format!(
        "internal error while reading {}: {what}",
        names.join(", ")
    ))
}

/// Pass 1 over a group of whole files (`(file_id, path bytes, display name)`, in file order):
/// what it found, as bytes for `SurveyParts.add`.
#[pyfunction]
pub fn survey_part<'py>(
    py: Python<'py>,
    files: Files,
    chunk_bytes: usize,
    max_rows: usize,
) -> PyResult<Bound<'py, PyBytes>> {
    let files = specs(files);
    let bytes = py.detach(|| {
        catch_unwind(AssertUnwindSafe(|| {
            let mut pass = SurveyPass::new(files.clone(), chunk_bytes, max_rows);
            while pass.step().is_some() {}
            let warnings = std::mem::take(&mut pass.scanner.reader.warnings);
            SurveyPart::of(&pass.survey, pass.lines, warnings).to_bytes()
        }))
        .map_err(|payload| internal(payload, &files))
    })?;
    Ok(PyBytes::new(py, &bytes))
}

/// The surveys of a set's groups, merged in file order.
#[pyclass(module = "logcorr._core")]
#[derive(Default)]
pub struct SurveyParts {
    survey: Survey,
    lines: u64,
    warnings: Vec<String>,
}

#[pymethods]
impl SurveyParts {
    #[new]
    fn new() -> SurveyParts {
        SurveyParts::default()
    }

    /// Merge the next group's survey (`survey_part`'s bytes; groups in file order).
    fn add(&mut self, py: Python<'_>, part: &[u8]) -> PyResult<()> {
        let survey = &mut self.survey;
        let (lines, warnings) = py
            .detach(|| -> Result<_, String> {
                let mut part = SurveyPart::from_bytes(part)?;
                let (lines, warnings) = (part.lines, std::mem::take(&mut part.warnings));
                survey.merge(part.into_survey()?);
                Ok((lines, warnings))
            })
            .map_err(PyValueError::new_err)?;
        self.lines += lines;
        self.warnings.extend(warnings);
        Ok(())
    }

    /// What pass 1 found in the whole set, as `LogSet.survey_tables` gives it.
    fn survey_tables<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        survey_dict(py, &self.survey, self.lines)
    }

    /// The read warnings of every group, in file order, taken.
    fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }

    /// The merged key rows, as bytes for `AttributePart`.
    fn keys<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &keys_to_bytes(&self.survey.keys))
    }

    /// Times (µs) that cut the set's fully dated lines into `ranges` ranges of about equal
    /// counts (fewer when many lines share a time).
    fn bounds(&self, ranges: usize) -> Vec<i64> {
        bounds(&self.survey, ranges)
    }
}

/// Pass 2 over a group of whole files, with the whole set's tables.
#[pyclass(module = "logcorr._core")]
pub struct AttributePart {
    files: Vec<FileSpec>,
    chunk_bytes: usize,
    max_rows: usize,
    keys: Arc<Keys>,
    whole: Option<Arc<Whole>>,
    pass: Option<AttributePass>,
    events: Vec<Event>,
}

#[pymethods]
impl AttributePart {
    /// `keys`: the whole set's key rows (`SurveyParts.keys`).
    #[new]
    fn new(
        py: Python<'_>,
        files: Files,
        chunk_bytes: usize,
        max_rows: usize,
        keys: &[u8],
    ) -> PyResult<AttributePart> {
        let keys = py
            .detach(|| keys_from_bytes(keys))
            .map_err(PyValueError::new_err)?;
        Ok(AttributePart {
            files: specs(files),
            chunk_bytes: chunk_bytes.max(1),
            max_rows: max_rows.max(1),
            keys: Arc::new(keys),
            whole: None,
            pass: None,
            events: Vec::new(),
        })
    }

    /// Start pass 2 with what the whole set says: `LogSet.start_attribution`'s `tables` (a
    /// part hands over every row).
    fn start_attribution(&mut self, tables: WholeTables) -> PyResult<()> {
        let (whole, selection) = tables.whole()?;
        let whole = Arc::new(whole);
        let attributor = Attributor::new(
            whole.clone(),
            self.keys.clone(),
            Some(Gather::new(selection)),
        );
        self.pass = Some(AttributePass::new(
            self.files.clone(),
            self.chunk_bytes,
            self.max_rows,
            attributor,
            None,
        ));
        self.whole = Some(whole);
        Ok(())
    }

    /// Pass 2 on the next chunk: (its rows as the runs store them; [(file, key or None)] of
    /// files whose waiting rows were placed; bytes), as `LogSet.attribute_step`; None at the
    /// end.
    #[allow(clippy::type_complexity)]
    fn attribute_step(
        &mut self,
        py: Python<'_>,
    ) -> PyResult<Option<(ArrowBatch, Vec<(u32, Option<i64>)>, usize)>> {
        let files = &self.files;
        let whole = self
            .whole
            .clone()
            .ok_or_else(|| PyValueError::new_err("pass 2 has not started"))?;
        let pass = self
            .pass
            .as_mut()
            .ok_or_else(|| PyValueError::new_err("pass 2 has not started"))?;
        let events = &mut self.events;
        let done = py.detach(|| {
            catch_unwind(AssertUnwindSafe(|| {
                let Step::Attributed(mut columns, attributed, bytes) = pass.step()? else {
                    return None; // (every file is wanted: no chunk is passed over)
                };
                let settled = attributed
                    .settled
                    .iter()
                    .map(|s| (s.file_id, s.key))
                    .collect();
                if let Some(gather) = pass.attributor.gather.as_mut() {
                    events.append(&mut gather.events);
                }
                Some((
                    attributed_batch(&mut columns, &attributed, &whole),
                    settled,
                    bytes,
                ))
            }))
            .map_err(|payload| internal(payload, files))
        })?;
        Ok(done.map(|(batch, settled, bytes)| (ArrowBatch::new(batch), settled, bytes)))
    }

    /// The event rows gathered since the last call (a record batch), taken.
    fn take_events(&mut self) -> ArrowBatch {
        ArrowBatch::new(events_batch(&std::mem::take(&mut self.events)))
    }

    /// Pass 2 reports no warnings (pass 1 read the same files and reported them).
    fn take_warnings(&mut self) -> Vec<String> {
        Vec::new()
    }

    /// The counts of pass 2 over the group, as `LogSet.tally` gives them.
    fn tally<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let (Some(pass), Some(whole)) = (&self.pass, &self.whole) else {
            return Err(PyValueError::new_err("pass 2 has not started"));
        };
        match &pass.attributor.gather {
            Some(gather) => tally_dict(py, &gather.tally, &whole.eff_host),
            None => Err(PyValueError::new_err("pass 2 has not started")),
        }
    }

    /// The files `file_ids` read again (the driver's lookups for the diagnosis), a chunk at a
    /// time, as `LogSet.rows_of`.
    fn rows_of(&self, file_ids: Vec<u32>) -> PyResult<RowsOf> {
        let whole = self
            .whole
            .clone()
            .ok_or_else(|| PyValueError::new_err("pass 2 has not started"))?;
        let wanted: HashSet<u32> = file_ids.into_iter().collect();
        let attributor = Attributor::new(whole.clone(), self.keys.clone(), None);
        let pass = AttributePass::new(
            self.files.clone(),
            self.chunk_bytes,
            self.max_rows,
            attributor,
            Some(wanted.clone()),
        );
        Ok(RowsOf::new(&self.files, pass, wanted, whole))
    }

    /// Forget what the files carry from chunk to chunk (open records, a file's time so far,
    /// waiting rows), as a reader that starts mid-file without that state would: the tests
    /// show that the answers change, i.e. that the state must travel with the work.
    fn forget(&mut self) -> PyResult<()> {
        let (Some(pass), Some(whole)) = (self.pass.as_mut(), &self.whole) else {
            return Err(PyValueError::new_err("pass 2 has not started"));
        };
        let gather = pass.attributor.gather.take();
        pass.attributor = Attributor::new(whole.clone(), self.keys.clone(), gather);
        Ok(())
    }
}
