"""What polars alone needs for a log set, with no analysis: `python benchmarks/floor.py SET`.

Reads every line of SET/logs/* into one string column, runs one SGLang prefix regex over all of
them and writes the lines plus that column as parquet; prints the seconds of each step and the
lines per second. This is the floor of any pipeline built on polars on the machine: logcorr
parses every family, attributes, aligns and writes on top of it.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import polars as pl


def log_files(folder: Path) -> list[Path]:
    return sorted(p for p in (folder / "logs").iterdir() if p.is_file())


def read_lines(files: list[Path]) -> pl.DataFrame:
    frames = [pl.read_csv(f, has_header=False, separator="\x1f", quote_char=None,
                          new_columns=["text"], schema={"text": pl.String},
                          truncate_ragged_lines=True) for f in files]
    return pl.concat(frames)


def one_regex(lines: pl.DataFrame) -> pl.DataFrame:
    return lines.select(pl.col("text").str.extract(
        r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d[^\]]* TP(\d+)", 1).alias("tp"))


def write(lines: pl.DataFrame, tp: pl.DataFrame, folder: Path) -> None:
    lines.with_columns(tp).write_parquet(folder / "floor.parquet")


def main(argv: list[str]) -> int:
    files = log_files(Path(argv[0]))
    start = time.perf_counter()
    lines = read_lines(files)
    read = time.perf_counter()
    tp = one_regex(lines)
    matched = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        write(lines, tp, Path(folder))
    written = time.perf_counter()
    total = written - start
    print(f"{lines.height} lines: read {read - start:.2f} s, one regex {matched - read:.2f} s, "
          f"write parquet {written - matched:.2f} s, total {total:.2f} s = "
          f"{lines.height / total / 1e6:.2f} M lines/s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
