//! Scan files and print how long it took: `cargo run --release --example scan -- FILE...`.

use std::time::Instant;

use logcorr_scan::scan::{FileSpec, Scanner};

fn main() {
    let files: Vec<FileSpec> = std::env::args()
        .skip(1)
        .enumerate()
        .map(|(i, path)| FileSpec {
            file_id: i as u32,
            path: path.clone().into(),
            display: path,
        })
        .collect();
    let start = Instant::now();
    let mut scanner = Scanner::new(files, 12 << 20, 1 << 18);
    let (mut rows, mut bytes) = (0, 0);
    while let Some(parsed) = scanner.next_chunk() {
        rows += parsed.columns.len();
        bytes += parsed.bytes;
    }
    let seconds = start.elapsed().as_secs_f64();
    println!(
        "{rows} rows, {:.1} MB in {seconds:.2} s ({:.0} MB/s)",
        bytes as f64 / 1e6,
        bytes as f64 / 1e6 / seconds
    );
}
