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
pub mod kept;
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

/// A test's folder of files under the system's temporary folder, removed when dropped.
#[cfg(test)]
pub(crate) struct TestDir(std::path::PathBuf);

#[cfg(test)]
impl TestDir {
    /// A new, empty folder named after `name`, the process and a count.
    pub(crate) fn new(name: &str) -> TestDir {
        static MADE: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let count = MADE.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let path =
            std::env::temp_dir().join(format!("logcorr-{name}-{}-{count}", std::process::id()));
        std::fs::create_dir_all(&path).expect("a test folder");
        TestDir(path)
    }

    pub(crate) fn join(&self, name: impl AsRef<std::path::Path>) -> std::path::PathBuf {
        self.0.join(name)
    }
}

#[cfg(test)]
impl Drop for TestDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
