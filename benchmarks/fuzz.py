"""Fuzz `analyze` for totality: N generated inputs, each a file, many files per analyze call.

    python benchmarks/fuzz.py [--inputs 100000] [--batch 2000] [--seed 0] [--jobs 2]
                              [--config ARGS.json | --config none] [--exclude-known]
    python benchmarks/fuzz.py --hostile [--cases 2000] [--seed 0] [--jobs 2] [--rss-mb 800]

`--hostile` runs whole log folders through the command line instead (`logcorr analyze DIR
--format jsonl -o FILE`), one case per call, each folder made of files of these classes:
splices and cuts of real lines, glued records by the thousand (bare or behind a wrapper), NUL
runs (a hole before the text, a tail after it, a mostly-NUL file), wrapped streams (CRI,
kubectl, Loki, Ray, srun, compose, Docker json-file), gzip (whole, cut, a flipped byte, a
damaged trailer), odd names (bytes that are not UTF-8, backslashes, newlines, controls),
text under misleading suffixes (`.gz`, `.bin`, `.db`, `.pt`, `.parquet`), year and calendar
extremes (years 0 and 9999, zone shifts past the calendar, Feb 29 in common years), symlinks
(to a file of the set, sorting before or after it) and binary formats by their magic bytes.
Each case must exit 0 with no traceback; every line of every text file must come out exactly
once (gzip: its decompressed lines; a damaged gzip: a warning naming it); every other file one
warning; and the case's peak RSS (reset per case through /proc/self/clear_refs) must stay
under `--rss-mb`. Prints the cases, the time, the failures and the peak RSS distribution.

An input is one file's bytes: pieces logs are made of joined at random (with invalid UTF-8,
NULs, CR, ANSI/OSC sequences, the parts splitter's sentinel, ...), raw random bytes, or real
fixture lines with random cuts, glue, hard wraps and inserts. Each batch is analysed in
chunks of a random size (16 kB, 64 kB or the default), so state carried from
chunk to chunk is fuzzed too. For every input the run must
either keep it line for line (the texts of a line's parts concatenate to the line, undecodable
bytes as U+FFFD) or skip it with exactly one warning naming it; `analyze` must not raise.
Failing batches are copied to `--keep` for reproduction. `--exclude-known` draws again when
an input matches `KNOWN_BUGS` (inputs that reach bugs already marked xfail in the tests), so
that a run looks for new ones. Prints one summary line at the end.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
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

from test_robustness import INSERTS, PIECES, REAL_LINES, expected_lines, run_cli

from logcorr.api import analyze
from logcorr.ingest import shown

DEFAULT_CONFIG = ROOT / "fixtures" / "analyze" / "tp16-dpattn8-ep-hang-per-node" / "args.json"


# Inputs that reach known bugs (mark them xfail in the tests when there are any);
# --exclude-known draws again instead of using them. None at present: damaged server_args
# values (once an int() in api._file_nodes) are read or refused line by line.
KNOWN_BUGS: tuple[re.Pattern[bytes], ...] = ()


def known_bug(data: bytes) -> bool:
    return any(pattern.search(data) for pattern in KNOWN_BUGS)


def pieced(rng: random.Random) -> bytes:
    return b"".join(rng.choice(PIECES) for _ in range(rng.randrange(0, 40)))


def raw(rng: random.Random) -> bytes:
    return rng.randbytes(rng.randrange(0, 200))


def damaged(rng: random.Random) -> bytes:
    data = bytearray(b"\n".join(rng.choices(REAL_LINES, k=rng.randrange(1, 12))) + b"\n")
    for _ in range(rng.randrange(0, 9)):
        kind = rng.choice(("cut", "glue", "wrap", "insert", "crlf"))
        at = rng.randrange(0, max(len(data), 1))
        newline = data.find(b"\n", at)
        if kind == "cut":
            del data[at : newline if newline >= 0 else len(data)]
        elif kind == "glue" and newline >= 0:
            del data[newline]
        elif kind == "wrap":
            data[at:at] = b"\n"
        elif kind == "crlf" and newline >= 0:
            data[newline:newline] = b"\r"
        else:
            data[at:at] = rng.choice(INSERTS)
    return bytes(data)


GENERATORS = (pieced, pieced, raw, damaged, damaged)


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


# ---------------------------------------------------------------------------------------------
# hostile folders: one CLI call per case

WRAPPERS = (b"2025-07-25T07:53:08.21748708+08:00 stdout F ", b"2025-07-25T07:53:08.217487080Z ",
            b"1779264164797\t2026-05-20T08:02:44.797Z\t", b"[pod/sglang-0/sglang] ",
            b"(RayWorkerWrapper pid=270291, ip=10.1.1.1) ", b"0: ", b"sglang-1  | ",
            b"\x1b[36m(WorkerDict pid=859188)\x1b[0m ", b"[2025-02-27T16:30:43.48675097Z] ")
CALENDAR = (b"[0000-01-01 00:00:00 TP0] year zero", b"[9999-12-31 23:59:59 TP1] last second",
            b"9999-12-31T23:59:59.5-01:00 stdout F past the calendar in UTC",
            b"0001-01-01T00:00:00.1+01:00 stdout F before the calendar in UTC",
            b"[rank0]:[E229 10:00:01.000000000 ProcessGroupNCCL.cpp:632] Feb 29",
            b"E0229 10:00:00.123456 123 foo.cc:12] glog Feb 29", b"[rank1]:[E1231 23:59:59.9 x.cpp:1] eve",
            b"[rank2]:[E101 00:00:00.1 x.cpp:1] new year", b"[2023-02-28 23:59:59 TP3] common year",
            b"[2024-02-29 00:00:00 TP4] leap day", b"[2025-13-45 99:99:99 TP5] no such time",
            b"[15:58:39 TP0] time only", b"ERROR 02-29 16:43:26 tp_worker.py:112] vllm style")
SUFFIXES = (".log", ".gz", ".bin", ".db", ".pt", ".parquet", ".txt", "", ".log.gz", ".out")
MAGICS = (b"\x7fELF\x02\x01\x01", b"PK\x03\x04", b"\x80\x04\x95", b"\x89PNG\r\n\x1a\n",
          b"PAR1", b"SQLite format 3\x00")


def _real(rng: random.Random, count: int) -> list[bytes]:
    return rng.choices(REAL_LINES, k=count)


def text_splice(rng: random.Random) -> bytes:
    return damaged(rng) if rng.random() < 0.7 else pieced(rng)


def text_glued(rng: random.Random) -> bytes:
    wrap = rng.choice((b"", *WRAPPERS))
    glued = wrap + b"".join(_real(rng, rng.choice((100, 1000, 3000, 6000))))
    around = b"\n".join(_real(rng, rng.randrange(0, 4)))
    return around + b"\n" + glued + rng.choice((b"\n", b"", b"\r\n", b"\r"))


def text_nul(rng: random.Random) -> bytes:
    body = b"\n".join(_real(rng, rng.randrange(1, 20))) + b"\n"
    run = b"\x00" * rng.choice((1, 100, 4096, 70_000, 300_000))
    return rng.choice((run + body, body + run, run + body + run, run + b"\n" + body,
                       body[: len(body) // 2] + run + body[len(body) // 2:]))


def text_wrapped(rng: random.Random) -> bytes:
    lines = _real(rng, rng.randrange(1, 30))
    if rng.random() < 0.2:
        return b"".join(b'{"log":"%s\\n","stream":"stderr","time":"2025-07-25T07:53:08.1Z"}\n'
                        % line.replace(b"\\", b"\\\\").replace(b'"', b'\\"') for line in lines)
    wrap = rng.choice(WRAPPERS)
    return b"".join(wrap + line + b"\n" for line in lines)


def text_calendar(rng: random.Random) -> bytes:
    lines = rng.choices(CALENDAR, k=rng.randrange(1, 12)) + _real(rng, rng.randrange(0, 5))
    rng.shuffle(lines)
    return b"\n".join(lines) + b"\n"


TEXT_CLASSES = (text_splice, text_glued, text_nul, text_wrapped, text_calendar)


def odd_name(rng: random.Random, index: int) -> bytes:
    stem = rng.choice((b"node%d" % index, b"n\xff\xfe%d" % index, b"back\\slash%d" % index,
                       b"new\nline%d" % index, b"ctl\x1b[31m%d" % index, b"\xe2\x80\xae%d" % index,
                       "r\u00e9sum\u00e9%d".encode() % index, b" space %d" % index, b"-dash%d" % index))
    return stem + rng.choice(SUFFIXES).encode()


def _damage_gzip(rng: random.Random, packed: bytes) -> tuple[bytes, str]:
    kind = rng.choice(("whole", "whole", "cut", "flip", "trailer", "members"))
    data = bytearray(packed)
    if kind == "cut":
        return bytes(data[: rng.randrange(10, max(11, len(data)))]), kind
    if kind == "flip" and len(data) > 30:
        data[rng.randrange(10, len(data) - 8)] ^= 1 << rng.randrange(8)
    elif kind == "trailer":
        data[-rng.randrange(1, 9)] ^= 0xFF
    elif kind == "members":
        data += packed
    return bytes(data), kind


def make_case(rng: random.Random, folder: Path) -> dict[bytes, tuple[str, object]]:
    """Write one case's files; name -> (kind, expected), where kind is `text` (expected:
    the lines), `gzip` (the lines, or None when damaged: a warning is expected), `skip` (one
    warning) or `link` (the name it points to)."""
    files: dict[bytes, tuple[str, object]] = {}
    for index in range(rng.randrange(1, 5)):
        name = odd_name(rng, index)
        roll = rng.random()
        data = rng.choice(TEXT_CLASSES)(rng)
        if roll < 0.15:
            packed, kind = _damage_gzip(rng, gzip.compress(data, compresslevel=1))
            doubled = data + data if kind == "members" else data
            expected = expected_lines(doubled) if kind in ("whole", "members") else None
            files[name] = ("gzip", expected)
            data = packed
        elif roll < 0.22:
            data = rng.choice(MAGICS) + rng.randbytes(rng.randrange(0, 2000))
            files[name] = ("skip", None)
        else:
            files[name] = ("text", expected_lines(data))
        (folder / os.fsdecode(name)).write_bytes(data)
    if rng.random() < 0.3:
        target = rng.choice(sorted(files))
        link = rng.choice((b"a", b"zz", b"")) + b"link" + rng.choice((b".gz", b".log"))
        if link not in files:
            os.symlink(os.fsdecode(target), folder / os.fsdecode(link))
            files[link] = ("link", target)
    return files


def _peak_reset() -> None:
    with open("/proc/self/clear_refs", "w") as handle:  # 5: reset the peak RSS (VmHWM)
        handle.write("5")


def _peak_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def check_case(args: tuple[int, int, str, float]) -> tuple[float, list[str], int]:
    """Generate one hostile case, run the CLI on it; (peak RSS in MB, failures, lines
    compared)."""
    seed, number, keep, rss_mb = args
    rng = random.Random(seed * 1_000_003 + number)
    folder = Path(tempfile.mkdtemp(prefix="logcorr-hostile-"))
    try:
        logs = folder / "logs"
        logs.mkdir()
        files = make_case(rng, logs)
        out = folder / "out.jsonl"
        _peak_reset()
        try:
            code, _, err = run_cli(["analyze", str(logs), "--format", "jsonl", "-o", str(out)])
        except BaseException:  # noqa: BLE001 - a raise out of main is the failure looked for
            return _peak_mb(), [_keep_case(logs, keep, seed, number,
                                           f"case {number}: " + traceback.format_exc())], 0
        peak = _peak_mb()
        failures: list[str] = []
        compared = 0
        if code != 0 or "Traceback" in err:
            failures.append(f"case {number}: exit {code}: {err[-300:]}")
        elif peak > rss_mb:
            failures.append(f"case {number}: peak RSS {peak:.0f} MB over {rss_mb:.0f} MB")
        else:
            found, compared = _compare_case(files, out, err)
            failures += found
        if failures:
            _keep_case(logs, keep, seed, number, "\n".join(failures))
        return peak, [f"{f} (seed {seed})" for f in failures], compared
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _keep_case(logs: Path, keep: str, seed: int, number: int, description: str) -> str:
    target = Path(keep) / f"hostile-seed{seed}-case{number}"
    shutil.copytree(logs, target, symlinks=True, dirs_exist_ok=True)
    (target.parent / f"{target.name}.FAILURE.txt").write_text(description)
    return description


def _compare_case(files: dict[bytes, tuple[str, object]], out: Path, err: str
                  ) -> tuple[list[str], int]:
    got: dict[str, dict[int, str]] = {}
    for raw in out.read_text(encoding="utf-8").splitlines():
        record = json.loads(raw)
        lines = got.setdefault(record["file"], {})
        lines[record["line"]] = lines.get(record["line"], "") + record["text"]
    warned = err
    links = {name: target for name, (kind, target) in files.items() if kind == "link"}
    read_as: dict[bytes, bytes] = {}  # a linked pair is read under its first name
    for link, target in links.items():
        first = min((link, target), key=lambda n: shown(os.fsdecode(n)))  # type: ignore[arg-type]
        read_as[target] = first  # type: ignore[index]
        read_as[link] = first
    failures = []
    compared = 0
    for name, (kind, expected) in files.items():
        if kind == "link":
            continue
        display = shown(os.fsdecode(read_as.get(name, name)))
        lines = got.get(display, {})
        texts = [lines[n] for n in sorted(lines)]
        compared += len(texts) if isinstance(expected, list) else 0
        if sorted(lines) != list(range(1, len(lines) + 1)):
            failures.append(f"{display!r}: line numbers not 1..n")
        elif kind in ("text", "gzip") and expected is not None and texts != expected:
            failures.append(f"{display!r}: lines differ ({kind}, {len(texts)} vs "
                            f"{len(expected)})")  # type: ignore[arg-type]
        elif kind == "gzip" and expected is None and texts == [] and display not in warned:
            failures.append(f"{display!r}: a damaged gzip lost without a warning")
        elif kind == "skip" and (texts or "skipped: binary file" not in warned):
            failures.append(f"{display!r}: a binary file read or not warned about")
    return failures, compared


def hostile(args: argparse.Namespace) -> int:
    jobs = [(args.seed, number, args.keep, args.rss_mb) for number in range(args.cases)]
    began, peaks, failures, lines = time.monotonic(), [], [], 0
    with ProcessPoolExecutor(args.jobs) as pool:
        for peak, found, compared in pool.map(check_case, jobs, chunksize=4):
            peaks.append(peak)
            failures += found
            lines += compared
    for failure in failures[:20]:
        print(failure, file=sys.stderr)
    peaks.sort()
    quantile = (lambda q: peaks[min(len(peaks) - 1, int(q * len(peaks)))]) if peaks else (
        lambda q: 0.0)
    print(f"fuzz --hostile: {len(jobs)} cases ({lines} lines compared), {len(failures)} failures, "
          f"{time.monotonic() - began:.0f} s (seed {args.seed}); peak RSS per case MB: "
          f"median {quantile(0.5):.0f}, p90 {quantile(0.9):.0f}, p99 {quantile(0.99):.0f}, "
          f"max {quantile(1.0):.0f} (bound {args.rss_mb:.0f})")
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=100_000)
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
    parser.add_argument("--rss-mb", type=float, default=800.0,
                        help="--hostile: the peak RSS a case may reach")
    args = parser.parse_args()
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
