"""The benchmark script runs end to end on a tiny log set and prints its table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_small_benchmark_prints_table(tmp_path: Path) -> None:
    """`benchmarks/run.py --small` generates a set, times floor/logcorr (lnav if present)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "run.py"), "--small", "--text", "--stages",
         "--data", str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith("| set ") and "lines/s" in line for line in lines), done.stdout
    assert any("logcorr parquet" in line for line in lines), done.stdout
    assert any("floor (wc -l)" in line for line in lines), done.stdout
    assert any("logcorr text view" in line for line in lines), done.stdout
    stages = {line.split("|")[1].strip() for line in lines if line.startswith("| ")}
    assert {"survey", "resolve", "attribute", "order", "write parquet", "analysis (sum)"} <= stages
    assert "failed" not in done.stderr
    assert any(line.startswith("5k rich view: ") and "first timeline row at" in line
               for line in lines), done.stdout


def test_repeats_benchmark_prints_a_row_per_set(tmp_path: Path) -> None:
    """`benchmarks/repeats.py --small` generates its four one-kind sets and measures each."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "repeats.py"), "--small", "--data",
         str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    rows = [line.split("|")[1:-1] for line in done.stdout.splitlines()
            if line.startswith("| ") and "text view" in line]
    assert [row[0].strip() for row in rows] == ["transfer", "torch", "nccl", "tracebacks"]
    assert all(int(row[2].strip().replace(",", "")) >= 3000 for row in rows), done.stdout
    assert all(float(row[5].strip().replace(",", "")) > 0 for row in rows), done.stdout


def test_shapes_benchmark_measures_every_shape_within_its_bound(tmp_path: Path) -> None:
    """`benchmarks/shapes.py --small` makes each hostile shape (tiny lines by the million, long
    lines, many files, a mix) at a thousandth of its size and holds each run to its bound."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "shapes.py"), "--small", "--data",
         str(tmp_path)],
        capture_output=True, text=True, timeout=300, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [line.split("|")[1:-1] for line in done.stdout.splitlines() if line.startswith("| ")]
    shapes = {row[0].strip() for row in rows if row[0].strip() != "shape"}
    assert shapes == {"empty", "one-byte", "files", "long", "long-gzip", "mix"}, done.stdout
    empty = next(row for row in rows if row[0].strip() == "empty")
    assert int(empty[3].strip().replace(",", "")) == 50_000, done.stdout


def test_instruction_counts_name_each_thread_and_count_lines(tmp_path: Path) -> None:
    """benchmarks/instructions.py reads callgrind's per-thread profiles: a thread is named by
    the core's function it ran, its count is the profile's total, and the lines are counted
    as physical lines (gzip decoded, a last line without a newline counted)."""
    import gzip
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "instructions", Path(__file__).resolve().parent.parent / "benchmarks" / "instructions.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)

    def profile(name: str, functions: list[str], total: int) -> Path:
        path = tmp_path / name
        body = "".join(f"fn=({i}) {f}\n0 1\n" for i, f in enumerate(functions, 1))
        path.write_text(f"version: 1\ncmd: python\n{body}totals: {total}\n")
        return path

    attribute = profile("a", ["logcorr_scan::attribute::Attributor::attribute",
                              "logcorr_scan::parse::parse_into",
                              "logcorr_scan::scan::ChunkReader::next_chunk"], 900)
    survey = profile("b", ["logcorr_scan::pipeline::survey_chunks",
                           "<logcorr_scan::survey::Survey as logcorr_scan::parse::Sink>::push"],
                     500)
    # (the reader parses the lines before a chunk too)
    reader = profile("c", ["logcorr_scan::scan::ChunkReader::next_chunk",
                           "logcorr_scan::parse::parse_into"], 40)
    polars = profile("d", ["polars_core::frame::DataFrame::new"], 7)
    assert module.thread_of(attribute, main=False) == "pass 2"
    assert module.thread_of(survey, main=False) == "pass 1"
    assert module.thread_of(reader, main=False) == "read"
    assert module.thread_of(polars, main=False) == "other"
    assert module.thread_of(polars, main=True) == "main"
    assert module.totals(attribute) == 900
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a.log").write_bytes(b"one\ntwo\nthree")
    with gzip.open(logs / "b.log.gz", "wb") as packed:
        packed.write(b"x\n" * 5)
    assert module.lines_of(logs) == 8
