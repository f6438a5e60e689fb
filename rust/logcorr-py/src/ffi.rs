//! The crate's one module with `unsafe` code: taking an Arrow stream that Python hands over
//! (a polars frame's `__arrow_c_stream__`, the Arrow PyCapsule interface), and writing to a
//! file descriptor Python holds open.
//!
//! Everything else in the crate is safe Rust (`#![deny(unsafe_code)]` in `lib.rs`); what is
//! unsafe here is reading the capsule's pointer as the C stream struct the interface defines,
//! and borrowing a descriptor that Rust did not open.

#![allow(unsafe_code)]

use std::fs::File;
use std::io::Write;
use std::os::fd::{BorrowedFd, RawFd};

use arrow_array::ffi_stream::{FFI_ArrowArrayStream, RecordBatchStreamReader};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyCapsule;

/// The record batches of `frame` (anything with `__arrow_c_stream__`), read without a copy.
pub fn batches_of(frame: &Bound<'_, PyAny>) -> PyResult<RecordBatchStreamReader> {
    let capsule = frame
        .call_method0("__arrow_c_stream__")?
        .cast_into::<PyCapsule>()
        .map_err(|_| PyTypeError::new_err("__arrow_c_stream__ gave no capsule"))?;
    let pointer = capsule.pointer_checked(Some(c"arrow_array_stream"))?;
    // SAFETY: the Arrow PyCapsule interface: a capsule named "arrow_array_stream" holds a
    // valid `FFI_ArrowArrayStream` for as long as the capsule lives (it does: we hold it).
    // `from_raw` moves the stream out and leaves a released one in its place, which the
    // capsule's destructor then leaves alone; the stream is read once, by us.
    let stream = unsafe { FFI_ArrowArrayStream::from_raw(pointer.as_ptr().cast()) };
    RecordBatchStreamReader::try_new(stream)
        .map_err(|error| PyTypeError::new_err(format!("not an Arrow stream: {error}")))
}

/// Write all of `bytes` to the open file descriptor `fd`.
pub fn write_all_to(fd: RawFd, bytes: &[u8]) -> std::io::Result<()> {
    if fd < 0 {
        return Err(std::io::Error::from_raw_os_error(9)); // EBADF
    }
    // SAFETY: `fd` is the descriptor of a Python file object that the caller keeps open
    // for the whole call (`output.json_lines` holds the file); it is only borrowed to make
    // a duplicate, which this function owns and closes.
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    let mut file = File::from(borrowed.try_clone_to_owned()?);
    file.write_all(bytes)
}
