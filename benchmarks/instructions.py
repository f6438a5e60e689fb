"""Instructions per line of each pass: a measure that a shared, noisy machine does not move.

    python benchmarks/instructions.py SET [--format text|parquet|jsonl] [--keep DIR]

SET is a folder with `logs/` and `args.json` (as `run.py` makes them under DATA/sets/<size>/;
a sample of 100k to 200k lines takes about three minutes). `logcorr analyze` runs once under
valgrind's callgrind with one worker (LOGCORR_THREADS=1) and each thread's instructions are
counted apart (`--separate-threads=yes`); a thread is named by the core's function it runs:

* pass 1     the worker that parses every line for the survey (`pipeline::survey_chunks`)
* merge      pass 1's surveys merged in chunk order (`Keys::merge`)
* read       pass 1's reader (`ChunkReader::next_chunk`)
* pass 2     the worker that reads, parses and attributes every line (`Attributor::attribute`)
* main       the interpreter: imports, the whole-set step, the diagnosis, the output
* other      polars' and the rest

Two builds compared this way differ by what they do, not by what else the machine ran: CPU
seconds of one build varied by more than half from run to run on the development machine,
instruction counts by a few parts in ten thousand. valgrind is installed from Debian's
packages when absent (`apt-get install -y valgrind`).
"""

from __future__ import annotations

import argparse
import gzip
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# (a thread is the first of these whose function its profile names: the core's functions by
# their symbols, which its release build keeps)
THREADS = (
    ("pass 2", "Attributor::attribute"),
    ("read", "ChunkReader::next_chunk"),
    ("pass 1", "logcorr_scan::pipeline::survey_chunks"),
    ("merge", "Keys::merge"),
)


def lines_of(logs: Path) -> int:
    """Physical lines under `logs` (gzip files decoded; a last line without a newline counts)."""
    total = 0
    for path in sorted(p for p in logs.rglob("*") if p.is_file()):
        with path.open("rb") as raw:
            packed = raw.read(2) == b"\x1f\x8b"
        opener = gzip.open if packed else open
        with opener(path, "rb") as stream:
            last = b"\n"
            for block in iter(lambda: stream.read(1 << 20), b""):
                total += block.count(b"\n")
                last = block[-1:]
            total += last != b"\n"
    return total


def ensure_valgrind() -> str:
    found = shutil.which("valgrind")
    if found:
        return found
    subprocess.run(["apt-get", "install", "-y", "-q", "valgrind"], check=False,
                   stdout=subprocess.DEVNULL)
    found = shutil.which("valgrind")
    if not found:
        sys.exit("instructions.py: valgrind is needed (apt-get install valgrind)")
    return found


def totals(profile: Path) -> int:
    text = profile.read_text(errors="replace")
    found = re.search(r"^(?:totals|summary): (\d+)", text, re.MULTILINE)
    return int(found.group(1)) if found else 0


def thread_of(profile: Path, main: bool) -> str:
    if main:
        return "main"
    text = profile.read_text(errors="replace")
    for name, function in THREADS:
        if function in text:
            return name
    return "other"


def measure(data: Path, fmt: str, keep: Path | None) -> dict[str, int]:
    valgrind = ensure_valgrind()
    folder = Path(keep) if keep else Path(tempfile.mkdtemp(prefix="logcorr-callgrind-"))
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / "callgrind.out"
    command = [valgrind, "--tool=callgrind", "--separate-threads=yes",
               f"--callgrind-out-file={out}", sys.executable, "-m", "logcorr", "analyze",
               str(data / "logs"), "--config", str(data / "args.json")]
    if fmt != "text":
        command += ["--format", fmt, "-o", str(folder / f"timeline.{fmt}")]
    env = {**os.environ, "LOGCORR_THREADS": "1"}
    done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                          text=True, check=False)
    if done.returncode not in (0, 1):
        sys.exit(f"instructions.py: logcorr ended with {done.returncode}:\n{done.stderr[-2000:]}")
    counts: dict[str, int] = {}
    profiles = sorted(folder.glob("callgrind.out-*"))
    for index, profile in enumerate(profiles):
        name = thread_of(profile, main=index == 0)
        counts[name] = counts.get(name, 0) + totals(profile)
    if not keep:
        shutil.rmtree(folder, ignore_errors=True)
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("set", type=Path, help="a folder with logs/ and args.json")
    parser.add_argument("--format", default="text", choices=["text", "parquet", "jsonl"])
    parser.add_argument("--keep", type=Path, help="keep the profiles in this folder")
    args = parser.parse_args()
    lines = lines_of(args.set / "logs")
    counts = measure(args.set, args.format, args.keep)
    print(f"{args.set}: {lines:,} lines, `analyze --format {args.format}`, one worker")
    print("| thread | instructions | per line |")
    print("|---|---|---|")
    order = ["pass 1", "merge", "read", "pass 2", "main", "other"]
    if "pass 1" not in counts or "pass 2" not in counts:
        sys.exit("instructions.py: the passes' threads were not found (a build without symbols?)")
    for name in order:
        if name in counts:
            print(f"| {name} | {counts[name]:,} | {counts[name] / max(1, lines):,.0f} |")
    core = sum(counts.get(n, 0) for n in ("pass 1", "merge", "read", "pass 2"))
    print(f"| core (passes 1 and 2) | {core:,} | {core / max(1, lines):,.0f} |")


if __name__ == "__main__":
    main()
