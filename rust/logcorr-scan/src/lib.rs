//! logcorr's line scanner: every byte of a log set read once, per-line work done here.
//!
//! `read` turns files into blocks of physical lines (gzip by magic, CRLF, damaged streams),
//! `parse` turns a chunk of lines into record parts with their fields (wrappers, glued lines,
//! the line families), `scan` ties them into a chunked reader. No Python here: the binding
//! crate hands the columns to polars.

#![forbid(unsafe_code)]

pub mod attribute;
pub mod clock;
pub mod families;
pub mod gather;
pub mod grammar;
pub mod keys;
pub mod merge;
pub mod model;
pub mod parse;
pub mod parts;
pub mod pass;
pub mod patterns;
pub mod pipeline;
pub mod portable;
pub mod read;
pub mod scan;
pub mod stamp;
pub mod survey;
pub mod text;
pub mod wrappers;
