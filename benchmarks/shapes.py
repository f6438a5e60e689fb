"""Peak memory and time on hostile shapes of input: many lines of nothing, very long lines, many
small files, and a mix of them. A run's memory must be bounded by its chunks, not by the
number of lines, files or the length of a line.

    python benchmarks/shapes.py [--scale 1.0] [--data DIR] [--only NAME,...] [--small]

Each shape is generated once under DATA/shapes/<scale>/<name>/:

* empty       50M empty lines (one file, 50 MB)
* one-byte    50M lines of one byte (one file, 100 MB)
* files       20,000 files of three SGLang scheduler lines each (about 5 MB)
* long        one 10 MB line, then 10 lines of 1 MB (one file, 20 MB)
* long-gzip   the same lines gzipped (one .gz file)
* mix         10M empty lines, 10M one-byte lines, 5,000 small files, two 5 MB lines

For each, `logcorr analyze DIR --format text` and `--format parquet -o OUT` are timed and their
peak RSS taken as `run.py` does, beside the bound the README states: 1 GB for any shape, and
for the long lines at most ten times their size beyond a run's base (the peak of a run on
the `files` shape, whose lines are short). `--scale` multiplies every count (0.1: a quick
look); `--small` is a scale of 0.001 for the test suite. Exit 1 when a run fails or passes
its bound.
"""

from __future__ import annotations

import argparse
import gzip
import random
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from run import count_lines, measure

BOUND = 1 << 30  # peak RSS of any shape
LONG_FACTOR = 10  # a long line's cost beyond the base, per byte of it
SLACK = 64 << 20  # beside it: the allocator's and the measure's noise
SCHEDULER_LINE = ("[2026-11-29 10:00:{second:02d} TP{tp}] Decode batch. #running-req: 1, "
                  "#token: 100, token usage: 0.01, gen throughput (token/s): 20.0\n")


def _write_repeated(path: Path, unit: bytes, count: int) -> None:
    block = unit * 65536
    with path.open("wb") as out:
        for _ in range(count // 65536):
            out.write(block)
        out.write(unit * (count % 65536))


def _small_files(folder: Path, count: int, prefix: str = "rank") -> None:
    for index in range(count):
        text = "".join(SCHEDULER_LINE.format(second=(index + k) % 60, tp=index % 8)
                       for k in range(3))
        (folder / f"{prefix}{index}.log").write_text(text)


def _long_lines(rng: random.Random, scale: float) -> bytes:
    def line(size: int) -> bytes:
        words = bytes(rng.choice(b"abcdefgh ") for _ in range(4096))
        body = (words * (size // len(words) + 1))[:size]
        return b"[2026-11-29 10:00:00 TP0] " + body + b"\n"
    big = max(1, int(10_000_000 * scale))
    return line(big) + b"".join(line(big // 10) for _ in range(10))


def empty(folder: Path, scale: float, rng: random.Random) -> None:
    _write_repeated(folder / "empty.log", b"\n", int(50_000_000 * scale))


def one_byte(folder: Path, scale: float, rng: random.Random) -> None:
    _write_repeated(folder / "x.log", b"x\n", int(50_000_000 * scale))


def files(folder: Path, scale: float, rng: random.Random) -> None:
    _small_files(folder, max(1, int(20_000 * scale)))


def long(folder: Path, scale: float, rng: random.Random) -> None:
    (folder / "long.log").write_bytes(_long_lines(rng, scale))


def long_gzip(folder: Path, scale: float, rng: random.Random) -> None:
    (folder / "long.log.gz").write_bytes(gzip.compress(_long_lines(rng, scale), 1))


def mix(folder: Path, scale: float, rng: random.Random) -> None:
    _write_repeated(folder / "empty.log", b"\n", int(10_000_000 * scale))
    _write_repeated(folder / "x.log", b"x\n", int(10_000_000 * scale))
    _small_files(folder, max(1, int(5_000 * scale)), prefix="small")
    (folder / "long.log").write_bytes(_long_lines(rng, scale / 2)[: int(10_000_000 * scale)] + b"\n")


SHAPES: dict[str, Callable[[Path, float, random.Random], None]] = {
    "empty": empty, "one-byte": one_byte, "files": files, "long": long, "long-gzip": long_gzip,
    "mix": mix,
}


def ensure(folder: Path, name: str, scale: float) -> tuple[int, int, int]:
    """The shape's folder, generated once; (files, lines, bytes) as stored."""
    done = folder / ".done"
    if not done.exists():
        folder.mkdir(parents=True, exist_ok=True)
        SHAPES[name](folder, scale, random.Random(name))
        done.touch()
    paths = [p for p in folder.iterdir() if p.name != ".done"]
    lines = sum(count_lines(path) for path in paths)
    return len(paths), lines, sum(p.stat().st_size for p in paths)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--data", type=Path, default=Path(tempfile.gettempdir()) / "logcorr-bench")
    parser.add_argument("--only", default="", help="shapes to run, by name, comma-separated")
    parser.add_argument("--small", action="store_true", help="a scale of 0.001")
    args = parser.parse_args(argv)
    scale = 0.001 if args.small else args.scale
    names = [n for n in args.only.split(",") if n] or list(SHAPES)
    unknown = sorted(set(names) - set(SHAPES))
    if unknown:
        parser.error(f"unknown shape(s) {unknown}; known: {', '.join(SHAPES)}")
    logcorr = [sys.executable, "-m", "logcorr", "analyze"]
    print(f"scale {scale:g}; bound: {BOUND / 2**20:,.0f} MB peak RSS, long lines at most "
          f"{LONG_FACTOR}x their size beyond the base")
    print("| shape | output | files | lines | MB | seconds | peak RSS MB | within |")
    print("|---|---|---|---|---|---|---|---|")
    failed = False
    base: dict[str, int] = {}
    # (the base first: a run on short lines)
    for name in sorted(names, key=lambda n: n != "files"):
        folder = args.data / "shapes" / f"{scale:g}" / name
        count, lines, size = ensure(folder, name, scale)
        target = folder.parent / f"{name}.parquet"
        outputs = {"text view": [*logcorr, str(folder), "--format", "text"],
                   "parquet": [*logcorr, str(folder), "--format", "parquet", "-o", str(target)]}
        for label, command in outputs.items():
            run = measure(command)
            if name == "files":
                base[label] = run.peak_rss
            bound = BOUND
            if name.startswith("long") and label in base:
                bound = min(BOUND, base[label] + LONG_FACTOR * _long_bytes(folder) + SLACK)
            within = run.code == 0 and run.peak_rss <= bound
            failed |= not within
            print(f"| {name} | {label} | {count:,} | {lines:,} | {size / 1e6:,.0f} | "
                  f"{run.seconds:.2f} | {run.peak_rss / 2**20:,.0f} | "
                  f"{'yes' if within else 'NO'} (≤ {bound / 2**20:,.0f}) |", flush=True)
    return 1 if failed else 0


def _long_bytes(folder: Path) -> int:
    """The decoded bytes of the shape's files."""
    total = 0
    for path in folder.iterdir():
        if path.name == ".done":
            continue
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rb") as data:
            total += sum(len(chunk) for chunk in iter(lambda d=data: d.read(1 << 20), b""))
    return total


if __name__ == "__main__":
    sys.exit(main())
