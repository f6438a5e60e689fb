"""Fuzz `analyze` for totality: N generated inputs, each a file, many files per analyze call.

    python benchmarks/fuzz.py [--inputs 100000] [--batch 2000] [--seed 0] [--jobs 2]
                              [--config ARGS.json | --config none] [--exclude-known]
    python benchmarks/fuzz.py --hostile [--cases 2000] [--seed 0] [--jobs 2] [--rss-mb 800]
                              [--seconds 30] [--classes folder,server_args_lines,...]
    python benchmarks/fuzz.py --corpus DIR [--inputs 2000] [--seed 0]

`--hostile` runs hostile cases through the command line instead, one case per call: log
folders of hostile files, server_args lines that once made the reader backtrack or hold
values out of range, incidents at the calendar's edges, launch configs out of range; each
held to its exit code, every line kept, a CPU-time bound and a peak RSS bound (see
`benchmarks/hostile.py`, whose CLASSES is where a new class goes). `--classes a,b` draws from
those classes only.

An input is one file's bytes: pieces logs are made of joined at random (with invalid UTF-8,
NULs, CR, ANSI/OSC sequences, the parts splitter's sentinel, ...), raw random bytes, or real
fixture lines with random cuts, glue, hard wraps and inserts. Each batch is analysed in
chunks of a random size (16 kB, 64 kB or the default), so state carried from
chunk to chunk is fuzzed too. For every input the run must
either keep it line for line (the texts of a line's parts concatenate to the line, undecodable
bytes as U+FFFD) or skip it with exactly one warning naming it; `analyze` must not raise.
`--corpus DIR` writes `--inputs` seeds for the line core's fuzz target (`rust/fuzz`) instead:
each a few files of this generator's inputs and of the hostile folders' texts (splices, glued
records by the thousand, NUL runs, wrapped streams, calendar edges, server_args lines), some
gzipped whole or damaged, in the target's input format. Failing batches are copied to `--keep`
for reproduction. `--exclude-known` draws again when
an input matches `KNOWN_BUGS` (inputs that reach bugs already marked xfail in the tests), so
that a run looks for new ones. Prints one summary line at the end.
"""

from __future__ import annotations

import argparse
import gzip
import random
import re
import shutil
import sys
import tempfile
import time
import traceback
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from hostile import (
    _damage_gzip,
    damaged,
    hostile,
    pieced,
    text_calendar,
    text_glued,
    text_nul,
    text_server_args,
    text_splice,
    text_wrapped,
)
from test_robustness import expected_lines

from logcorr.api import analyze

DEFAULT_CONFIG = ROOT / "fixtures" / "analyze" / "tp16-dpattn8-ep-hang-per-node" / "args.json"


# Inputs that reach known bugs (mark them xfail in the tests when there are any);
# --exclude-known draws again instead of using them. None at present: damaged server_args
# values (once an int() in api._file_nodes) are read or refused line by line.
KNOWN_BUGS: tuple[re.Pattern[bytes], ...] = ()


def known_bug(data: bytes) -> bool:
    return any(pattern.search(data) for pattern in KNOWN_BUGS)


def raw(rng: random.Random) -> bytes:
    return rng.randbytes(rng.randrange(0, 200))


GENERATORS = (pieced, pieced, raw, damaged, damaged)


# The texts of hostile folders, for the fuzz target's seeds.
HOSTILE_TEXTS = (text_splice, text_glued, text_nul, text_wrapped, text_calendar, text_server_args)
# What ends one file's bytes in an input of the fuzz target (rust/fuzz/fuzz_targets/scan.rs).
SEPARATOR = b"\x00\xffFILE\xff\x00"


def corpus(folder: Path, inputs: int, seed: int) -> int:
    """Write `inputs` seeds for the fuzz target: two bytes of plan (chunk size, lines a chunk
    holds) and up to four files' bytes. Prints one line."""
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(inputs):
        files = []
        for _ in range(rng.randrange(1, 5)):
            data = rng.choice((*GENERATORS, *HOSTILE_TEXTS))(rng)
            if rng.random() < 0.15:
                data = _damage_gzip(rng, gzip.compress(data, compresslevel=1))[0]
            files.append(data)
        plan = bytes((rng.randrange(256), rng.randrange(256)))
        (folder / f"seed-{seed}-{index:06d}").write_bytes(plan + SEPARATOR.join(files))
    print(f"fuzz: {inputs} seeds in {folder} (seed {seed})")
    return 0


def check_batch(args: tuple[int, int, int, str | None, str, bool]) -> tuple[int, list[str]]:
    """Generate and analyze one batch; (inputs checked, failure descriptions)."""
    seed, start, count, config, keep, exclude = args
    rng = random.Random(seed * 1_000_003 + start)
    files = {f"in{start + i:07d}.log": _draw(rng, exclude) for i in range(count)}
    folder = Path(tempfile.mkdtemp(prefix="logcorr-fuzz-"))
    try:
        for name, data in files.items():
            (folder / name).write_bytes(data)
        try:
            # chunk sizes that cut the batch into about 30 to 130 chunks, or one chunk
            chunk = rng.choice((None, None, None, 16384, 65536))
            analysis = analyze([folder], config=config, chunk_bytes=chunk)
        except Exception:  # noqa: BLE001 - any exception is the failure being looked for
            return count, [_keep(folder, keep, f"batch {start}: " + traceback.format_exc())]
        failures = _compare(files, analysis)
        if failures:
            _keep(folder, keep, "\n".join(failures))
        return count, failures
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _draw(rng: random.Random, exclude: bool) -> bytes:
    while True:
        data = rng.choice(GENERATORS)(rng)
        if not (exclude and known_bug(data)):
            return data


def _compare(files: dict[str, bytes], analysis: object) -> list[str]:
    timeline = analysis.timeline.sort("file", "line", "part")  # type: ignore[attr-defined]
    warned: dict[str, int] = {}
    for warning in analysis.warnings:  # type: ignore[attr-defined]
        name = warning.partition(": ")[0]
        warned[name] = warned.get(name, 0) + 1
    got: dict[str, list[str]] = {}
    last: tuple[str, int] | None = None
    for name, line, text in timeline.select("file", "line", "text").iter_rows():
        if (name, line) == last:
            got[name][-1] += text
        else:
            got.setdefault(name, []).append(text)
        last = (name, line)
    failures = []
    for name, data in files.items():
        if warned.get(name, 0) > 1:
            failures.append(f"{name}: {warned[name]} warnings")
        elif warned.get(name) == 1:
            if name in got:
                failures.append(f"{name}: skipped and processed")
        elif got.get(name, []) != expected_lines(data):
            failures.append(f"{name}: lines differ: {data[:120]!r}")
    return failures


def _keep(folder: Path, keep: str, description: str) -> str:
    target = Path(keep) / folder.name
    shutil.copytree(folder, target, dirs_exist_ok=True)
    (target / "FAILURE.txt").write_text(description)
    return f"{description.splitlines()[-1] if description else ''} (kept in {target})"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, help="inputs to check (default 100,000), or seeds "
                        "to write (--corpus, default 2,000)")
    parser.add_argument("--batch", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--config", default=str(DEFAULT_CONFIG),
                        help="launch args for every batch, or `none` (default: a TP16 fixture)")
    parser.add_argument("--keep", default=str(Path(tempfile.gettempdir()) / "logcorr-fuzz-failures"))
    parser.add_argument("--exclude-known", action="store_true",
                        help="draw again for inputs that reach known, listed bugs")
    parser.add_argument("--hostile", action="store_true",
                        help="whole hostile folders through the command line, one per case")
    parser.add_argument("--cases", type=int, default=2000, help="--hostile: cases to run")
    parser.add_argument("--classes", default="",
                        help="--hostile: the case classes to draw from, comma-separated "
                        "(default: all of hostile.CLASSES)")
    parser.add_argument("--rss-mb", type=float, default=800.0,
                        help="--hostile: the peak RSS a case may reach")
    parser.add_argument("--corpus", type=Path,
                        help="write --inputs seeds for the core's fuzz target (rust/fuzz) here")
    parser.add_argument("--seconds", type=float, default=30.0,
                        help="--hostile: the CPU seconds a case may take (unless its class "
                        "has a bound of its own)")
    args = parser.parse_args()
    if args.corpus is not None:
        return corpus(args.corpus, args.inputs or 2000, args.seed)
    args.inputs = args.inputs or 100_000
    if args.hostile:
        return hostile(args)
    config = None if args.config == "none" else args.config
    batches = [(args.seed, start, min(args.batch, args.inputs - start), config, args.keep,
                args.exclude_known) for start in range(0, args.inputs, args.batch)]
    began, checked, failures = time.monotonic(), 0, []
    with ProcessPoolExecutor(args.jobs) as pool:
        for count, found in pool.map(check_batch, batches):
            checked += count
            failures += found
    for failure in failures[:20]:
        print(failure, file=sys.stderr)
    print(f"fuzz: {checked} inputs in {len(batches)} analyze calls, {len(failures)} failures, "
          f"{time.monotonic() - began:.0f} s (seed {args.seed}, config {args.config}"
          f"{', known bugs excluded' if args.exclude_known else ''})")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
