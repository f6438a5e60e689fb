//! The crate's one module with `unsafe` code: taking an Arrow stream that Python hands over
//! (a polars frame's `__arrow_c_stream__`, the Arrow PyCapsule interface), writing to a
//! file descriptor Python holds open, and making a string-view array of text known to be
//! UTF-8 without reading it all again.
//!
//! Everything else in the crate is safe Rust (`#![deny(unsafe_code)]` in `lib.rs`); what is
//! unsafe here is reading the capsule's pointer as the C stream struct the interface defines,
//! borrowing a descriptor that Rust did not open, and skipping arrow's check of every
//! string's UTF-8 once what makes it UTF-8 is checked here.

#![allow(unsafe_code)]

use std::fs::File;
use std::io::Write;
use std::os::fd::{BorrowedFd, RawFd};
use std::sync::Arc;

use arrow_array::ffi_stream::{FFI_ArrowArrayStream, RecordBatchStreamReader};
use arrow_array::StringViewArray;
use arrow_buffer::{Buffer, NullBuffer, ScalarBuffer};
use arrow_data::ByteView;
use arrow_schema::ArrowError;
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

/// The high bit of each of an inline view's 12 bytes (all clear: the bytes are ASCII, and so
/// UTF-8; the bytes past a value's length are checked to be zero first).
const INLINE_HIGH_BITS: u128 = 0x8080_8080_8080_8080_8080_8080;

/// A string-view array over `buffers` (moved, not copied) from `views` made by `make_view` of
/// `&str`s: each a slice of its buffer, or (12 bytes or fewer) held in the view itself.
///
/// `StringViewArray::try_new` reads every string again to prove it UTF-8 (about a third of
/// the cost of handing a chunk's rows to Python). Here the buffers are `String`s, so a view
/// is UTF-8 when its bytes lie in its buffer and start and end on character boundaries
/// (`str::get`), or, inline, are UTF-8 themselves (12 bytes at most): each view is checked
/// for that, for its prefix and for zero padding (what `try_new` checks besides), in a few
/// operations whatever its length. Err (a bug) when one is not so.
pub fn string_views(
    views: Vec<u128>,
    buffers: Vec<String>,
    nulls: Option<NullBuffer>,
) -> Result<StringViewArray, ArrowError> {
    let wrong = |what: &str| ArrowError::InvalidArgumentError(format!("string view {what}"));
    if nulls.as_ref().is_some_and(|n| n.len() != views.len()) {
        return Err(wrong("validity of another length"));
    }
    for &view in &views {
        let len = view as u32 as usize;
        if len <= 12 {
            if len < 12 && view >> (32 + 8 * len) != 0 {
                return Err(wrong("padded with other bytes than zero"));
            }
            // (ASCII, as most short values are, at a glance; else read)
            let ascii = (view >> 32) & INLINE_HIGH_BITS == 0;
            if !ascii && std::str::from_utf8(&view.to_le_bytes()[4..4 + len]).is_err() {
                return Err(wrong("inline bytes not UTF-8"));
            }
            continue;
        }
        let view = ByteView::from(view);
        let start = view.offset as usize;
        let text = buffers
            .get(view.buffer_index as usize)
            .and_then(|buffer| buffer.get(start..start + len))
            .ok_or_else(|| wrong("outside its buffer or not on character boundaries"))?;
        if text.as_bytes()[..4] != view.prefix.to_le_bytes() {
            return Err(wrong("prefix differs"));
        }
    }
    let buffers: Arc<[Buffer]> = buffers
        .into_iter()
        .map(|b| Buffer::from_vec(b.into_bytes()))
        .collect();
    // SAFETY: `try_new` would not fail: every view's bytes were just found to be UTF-8 (a
    // `str` slice of a `String`, or checked inline) within a buffer it names, with its
    // prefix; `nulls` has the views' length; `views` and `buffers` are owned and moved in.
    Ok(unsafe { StringViewArray::new_unchecked(ScalarBuffer::from(views), buffers, nulls) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::builder::make_view;
    use arrow_array::Array;

    fn view_of(buffer: &str, index: u32, start: usize, end: usize) -> u128 {
        make_view(&buffer.as_bytes()[start..end], index, start as u32)
    }

    #[test]
    fn views_of_str_slices_and_inline_text_are_taken_as_try_new_takes_them() {
        let first = "[2026-11-29 10:00:00 DP5 TP10 EP10] Decode batch, #running-req: 5".to_string();
        let second = "héllo wörld, a longer line than twelve bytes ✓".to_string();
        let views = vec![
            view_of(&first, 0, 0, first.len()),
            make_view("TP10".as_bytes(), 0, 0),
            0,
            view_of(&second, 1, 0, second.len()),
            view_of(&second, 1, 1, 14), // (from "é": starts and ends on boundaries)
            make_view("✓ é".as_bytes(), 0, 0),
        ];
        let nulls = Some(NullBuffer::from(vec![true, true, false, true, true, true]));
        let buffers = vec![first.clone(), second.clone()];
        let ours = string_views(views.clone(), buffers.clone(), nulls.clone()).expect("valid");
        let checked = StringViewArray::try_new(
            ScalarBuffer::from(views),
            buffers
                .into_iter()
                .map(|b| Buffer::from_vec(b.into_bytes()))
                .collect::<Vec<_>>(),
            nulls,
        )
        .expect("valid for arrow too");
        assert_eq!(ours, checked);
        assert_eq!(ours.value(0), first);
        assert_eq!(ours.value(4), &second[1..14]);
        assert!(ours.is_null(2));
    }

    #[test]
    fn a_view_that_would_not_be_utf8_or_lies_outside_its_buffer_is_refused() {
        let text = "une tasse de café crème, s'il vous plaît, et vite".to_string();
        let cut = text.find('é').expect("an é") + 1; // (inside the é's two bytes)
        let refused = [
            // ends inside a character
            make_view(&text.as_bytes()[..cut], 0, 0),
            // starts inside a character
            make_view(&text.as_bytes()[cut..cut + 20], 0, cut as u32),
            // in a buffer that does not exist
            make_view(&text.as_bytes()[..20], 1, 0),
            // past its buffer's end
            make_view(&text.as_bytes()[..20], 0, text.len() as u32 - 10),
            // the prefix of other bytes
            make_view(&text.as_bytes()[1..21], 0, 0),
            // inline bytes that are not UTF-8
            make_view(&[0xc3, b'a'], 0, 0),
            // inline bytes padded with other bytes than zero
            make_view(b"ab", 0, 0) | (1u128 << (32 + 8 * 5)),
        ];
        for view in refused {
            assert!(string_views(vec![view], vec![text.clone()], None).is_err());
            let arrow = StringViewArray::try_new(
                ScalarBuffer::from(vec![view]),
                vec![Buffer::from_vec(text.clone().into_bytes())],
                None,
            );
            assert!(arrow.is_err(), "arrow refuses it too");
        }
        let nulls = Some(NullBuffer::from(vec![true, false]));
        assert!(string_views(vec![0], vec![text], nulls).is_err());
    }
}
