//! Pass 1 over files, timed: `cargo run --release --example scan -- FILE...`.

use std::time::Instant;

use logcorr_scan::pass::SurveyPass;
use logcorr_scan::scan::FileSpec;

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
    let mut pass = SurveyPass::new(files, 12 << 20, 1 << 30);
    let mut bytes = 0;
    while let Some(read) = pass.step() {
        bytes += read;
    }
    let seconds = start.elapsed().as_secs_f64();
    println!(
        "{} lines, {} key rows, {:.1} MB in {seconds:.2} s ({:.0} MB/s)",
        pass.lines,
        pass.survey.keys.len(),
        bytes as f64 / 1e6,
        bytes as f64 / 1e6 / seconds
    );
}
