//! A step of the timeline's k-way merge (`logcorr_scan::merge`) over polars frames.

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, UInt16Type, UInt32Type};
use arrow_array::{Array, RecordBatch, UInt32Array};
use arrow_schema::{DataType, Field, Schema};
use logcorr_scan::merge::{step, Key};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::sync::Arc;

use crate::arrow::ArrowBatch;
use crate::ffi::batches_of;

/// The timeline keys of a frame of the four key columns (`_sk`, `file_id`, `line`, `part`).
fn keys_of(frame: &Bound<'_, PyAny>) -> PyResult<Vec<Key>> {
    let mut keys = Vec::new();
    for batch in batches_of(frame)? {
        let batch = batch.map_err(|error| PyValueError::new_err(error.to_string()))?;
        keys.extend(batch_keys(&batch).map_err(PyValueError::new_err)?);
    }
    Ok(keys)
}

fn batch_keys(batch: &RecordBatch) -> Result<Vec<Key>, String> {
    let types = [
        DataType::Int64,
        DataType::UInt32,
        DataType::UInt32,
        DataType::UInt16,
    ];
    let columns = batch.columns();
    if columns.len() != 4
        || columns.iter().zip(&types).any(|(c, t)| c.data_type() != t)
        || columns.iter().any(|c| c.null_count() > 0)
    {
        return Err("the merge's keys are four columns (i64, u32, u32, u16), no nulls".into());
    }
    let sk = columns[0].as_primitive::<Int64Type>().values();
    let file = columns[1].as_primitive::<UInt32Type>().values();
    let line = columns[2].as_primitive::<UInt32Type>().values();
    let part = columns[3].as_primitive::<UInt16Type>().values();
    Ok((0..batch.num_rows())
        .map(|i| (sk[i], file[i], line[i], part[i]))
        .collect())
}

/// The timeline keys of a run's buffered rows (read once, when a piece is loaded), from the
/// first row the merge has not taken yet.
#[pyclass(module = "logcorr._core")]
pub struct RunKeys {
    keys: Vec<Key>,
    next: usize,
}

#[pymethods]
impl RunKeys {
    /// The keys of `frame`: its four key columns (`_sk`, `file_id`, `line`, `part`), sorted.
    #[new]
    fn new(frame: &Bound<'_, PyAny>) -> PyResult<RunKeys> {
        Ok(RunKeys {
            keys: keys_of(frame)?,
            next: 0,
        })
    }

    /// The rows not taken yet.
    fn __len__(&self) -> usize {
        self.keys.len() - self.next
    }
}

/// One merge step over the runs' buffered rows (`runs`: each run's keys, sorted): how many
/// leading rows of each it takes (each run's keys move past them), and their order as an
/// `order` column of indices into the taken rows laid end to end (None when that is their
/// order already).
#[pyfunction]
#[pyo3(signature = (runs, bound, limit))]
pub fn merge_step(
    py: Python<'_>,
    mut runs: Vec<PyRefMut<'_, RunKeys>>,
    bound: Option<Key>,
    limit: usize,
) -> PyResult<(Vec<usize>, Option<ArrowBatch>)> {
    let slices: Vec<&[Key]> = runs.iter().map(|r| &r.keys[r.next..]).collect();
    let taken =
        py.detach(|| crate::guarded("merging the timeline", || step(&slices, bound, limit)))?;
    for (run, &count) in runs.iter_mut().zip(&taken.taken) {
        run.next += count;
    }
    let order = match taken.order {
        None => None,
        Some(order) => {
            let schema = Schema::new(vec![Field::new("order", DataType::UInt32, false)]);
            let column = Arc::new(UInt32Array::from(order));
            let batch = RecordBatch::try_new(Arc::new(schema), vec![column])
                .map_err(|error| PyValueError::new_err(error.to_string()))?;
            Some(ArrowBatch::new(batch))
        }
    };
    Ok((taken.taken, order))
}
