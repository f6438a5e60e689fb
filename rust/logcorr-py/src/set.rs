//! `LogSet`: the two passes over a set of files, driven from Python a chunk at a time (so that
//! progress is reported and Ctrl-C is heard between chunks); each chunk's work runs with the
//! GIL released.

use std::collections::{HashMap, HashSet};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;

use logcorr_scan::attribute::{Attributor, Coordinates, Whole, EVIDENCE};
use logcorr_scan::clock::Clock;
use logcorr_scan::model::Role;
use logcorr_scan::pass::{AttributePass, SurveyPass};
use logcorr_scan::scan::FileSpec;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::arrow::{attributed_batch, keys_batch, ArrowBatch};

#[pyclass(module = "logcorr._core")]
pub struct LogSet {
    files: Vec<FileSpec>,
    chunk_bytes: usize,
    max_rows: usize,
    survey: Option<SurveyPass>,
    attribute: Option<AttributePass>,
    warnings: Vec<String>,
}

fn role(name: Option<String>) -> PyResult<Option<Role>> {
    name.map(|n| {
        Role::from_name(&n).ok_or_else(|| PyValueError::new_err(format!("unknown role {n}")))
    })
    .transpose()
}

#[pymethods]
impl LogSet {
    #[new]
    fn new(
        files: Vec<(u32, Bound<'_, PyBytes>, String)>,
        chunk_bytes: usize,
        max_rows: usize,
    ) -> LogSet {
        let files: Vec<FileSpec> = files
            .into_iter()
            .map(|(file_id, path, display)| FileSpec {
                file_id,
                path: PathBuf::from(OsStr::from_bytes(path.as_bytes())),
                display,
            })
            .collect();
        let survey = Some(SurveyPass::new(files.clone(), chunk_bytes, max_rows));
        LogSet {
            files,
            chunk_bytes,
            max_rows,
            survey,
            attribute: None,
            warnings: Vec::new(),
        }
    }

    /// Pass 1 on the next chunk: its bytes of lines; None when every file is read.
    fn survey_step(&mut self, py: Python<'_>) -> PyResult<Option<usize>> {
        let pass = self
            .survey
            .as_mut()
            .ok_or_else(|| PyValueError::new_err("pass 1 is over"))?;
        let done = py.detach(|| pass.step());
        self.warnings.append(&mut pass.scanner.reader.warnings);
        Ok(done)
    }

    /// What pass 1 found: `keys` (record batch), `server_args` [(file, line, text)],
    /// `headers` [(second µs, key)], `first_dated` [(file, first µs, wrapper offset s)],
    /// `median` (µs), `wrap_default` (s), `lines`, `rank_spans` [(key, first µs, last µs)].
    fn survey_tables<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let pass = self
            .survey
            .as_ref()
            .ok_or_else(|| PyValueError::new_err("pass 1 is over"))?;
        let s = &pass.survey;
        let out = PyDict::new(py);
        out.set_item("keys", ArrowBatch::new(keys_batch(&s.keys)))?;
        out.set_item("server_args", s.server_args.clone())?;
        let mut headers: Vec<(i64, u32)> = s.headers.iter().copied().collect();
        headers.sort_unstable();
        out.set_item("headers", headers)?;
        out.set_item("first_dated", s.first_dated.clone())?;
        out.set_item("median", s.median())?;
        out.set_item("wrap_default", s.wrap_default())?;
        out.set_item("lines", pass.lines)?;
        let mut spans: Vec<(u32, i64, i64)> =
            s.rank_spans.iter().map(|(&k, &(a, b))| (k, a, b)).collect();
        spans.sort_unstable();
        out.set_item("rank_spans", spans)?;
        Ok(out)
    }

    /// End pass 1 and start pass 2 with what the whole set says (per key number: `proc`,
    /// `evidence`, `conflict`, `role`, `eff_host`; and the set's tables; `plain`: the
    /// processes that are no SGLang scheduler, whose lines take no role).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (proc, evidence, conflict, roles, eff_host, crowded, shared, file_procs,
                        local_ranks, processes, file_nodes, file_names, first_dated, median,
                        wrap_default, clock_offsets, plain=Vec::new()))]
    fn start_attribution(
        &mut self,
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
        plain: Vec<u32>,
    ) -> PyResult<()> {
        let pass = self
            .survey
            .take()
            .ok_or_else(|| PyValueError::new_err("pass 1 is over"))?;
        let evidence = evidence
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
        let whole = Whole {
            proc,
            evidence,
            conflict,
            role: roles.into_iter().map(role).collect::<PyResult<Vec<_>>>()?,
            eff_host,
            crowded: crowded.into_iter().collect(),
            shared: shared.into_iter().collect(),
            file_procs: file_procs.into_iter().collect(),
            local_ranks: local_ranks.map(|r| r.into_iter().collect::<HashSet<_>>()),
            processes,
            plain: plain.into_iter().collect(),
            file_nodes: file_nodes.into_iter().collect(),
            file_names: file_names.into_iter().collect(),
            clock: Clock {
                files: first_dated
                    .into_iter()
                    .map(|(f, first, offset)| (f, (first, offset)))
                    .collect::<HashMap<_, _>>(),
                overall: median,
                wrap_default,
            },
            clock_offsets: clock_offsets.into_iter().collect(),
        };
        let attributor = Attributor::new(whole, pass.survey.keys);
        self.attribute = Some(AttributePass::new(
            self.files.clone(),
            self.chunk_bytes,
            self.max_rows,
            attributor,
        ));
        Ok(())
    }

    /// Pass 2 on the next chunk: (its rows as the runs store them, [(file, key or None)] of
    /// files whose waiting rows were placed, bytes); None at the end.
    #[allow(clippy::type_complexity)]
    fn attribute_step(
        &mut self,
        py: Python<'_>,
    ) -> PyResult<Option<(ArrowBatch, Vec<(u32, Option<i64>)>, usize)>> {
        let pass = self
            .attribute
            .as_mut()
            .ok_or_else(|| PyValueError::new_err("pass 2 has not started"))?;
        let step = py.detach(|| {
            pass.step().map(|(columns, attributed, bytes)| {
                let settled = attributed
                    .settled
                    .iter()
                    .map(|s| (s.file_id, s.key))
                    .collect::<Vec<_>>();
                (attributed_batch(&columns, &attributed), settled, bytes)
            })
        });
        Ok(step.map(|(batch, settled, bytes)| (ArrowBatch::new(batch), settled, bytes)))
    }

    /// The warnings so far (files that stopped early), taken.
    fn take_warnings(&mut self) -> Vec<String> {
        std::mem::take(&mut self.warnings)
    }
}
