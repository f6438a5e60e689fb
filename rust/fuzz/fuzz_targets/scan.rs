//! Any bytes, as a set of files read by the scanner: no panic, every physical line once, and -
//! where no host is read with the help of its neighbours - the same parts, survey, attribution
//! and events in one chunk, in small chunks and on two threads (the checks of
//! `rust/logcorr-scan/tests/any_bytes.rs`, shared).
//!
//! An input is two bytes of plan (the chunk size, from 1 byte, and the lines a chunk holds at
//! most), then the files' bytes one after the other, cut at `SEPARATOR` (a set of more than
//! `LARGEST` bytes decoded is passed over).

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../logcorr-scan/tests/common/mod.rs"]
mod common;

/// The most bytes a set may hold once decoded.
const LARGEST: usize = 64 << 10;

/// What ends one file's bytes and starts the next one's in an input.
const SEPARATOR: &[u8] = b"\x00\xffFILE\xff\x00";

fuzz_target!(|data: &[u8]| {
    let [size, rows, rest @ ..] = data else {
        return;
    };
    let chunk_bytes = 1 + usize::from(*size) * 3;
    let max_rows = 1 + usize::from(*rows % 16);
    let mut files: Vec<Vec<u8>> = Vec::new();
    let mut start = 0;
    while let Some(at) = find(&rest[start..], SEPARATOR) {
        files.push(rest[start..start + at].to_vec());
        start += at + SEPARATOR.len();
    }
    files.push(rest[start..].to_vec());
    files.truncate(4);
    // (a few bytes of gzip can decode to megabytes of one line: the hostile cases hold those to
    // a time bound; here they would slow every other input down)
    if files.iter().map(|f| decoded(f)).sum::<usize>() > LARGEST {
        return;
    }
    let same_answers = {
        let set = common::Set::write(&files);
        let (parts, _) = common::parts(&set.files, common::WHOLE);
        let (cut, _) = common::parts(
            &set.files,
            logcorr_scan::pipeline::Plan {
                chunk_bytes,
                max_rows,
                threads: 1,
                keep_parsed: 0,
            },
        );
        common::hosts_alone(&common::texts(&set.files, common::WHOLE), &[&parts, &cut])
    };
    if let Err(failure) = common::check(&files, chunk_bytes, max_rows, same_answers) {
        panic!("{failure}");
    }
});

/// How many bytes a file decodes to (gzip: what decodes before any damage), up to past
/// `LARGEST`.
fn decoded(file: &[u8]) -> usize {
    use std::io::Read;
    if !file.starts_with(&[0x1f, 0x8b]) {
        return file.len();
    }
    let mut decoder = flate2::read::MultiGzDecoder::new(file);
    let mut buffer = vec![0u8; 1 << 16];
    let mut total = 0;
    while total <= LARGEST {
        match decoder.read(&mut buffer) {
            Ok(0) | Err(_) => break,
            Ok(n) => total += n,
        }
    }
    total
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
