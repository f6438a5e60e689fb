"""Hostile cases for `benchmarks/fuzz.py --hostile`: one command-line call per case, each held
to its bounds.

A case belongs to one of CLASSES and is a command line plus what its run must be:

* `folder`: a log folder of splices and cuts of real lines, glued records by the thousand
  (bare or behind a wrapper), NUL runs (a hole before the text, a tail after it, a mostly-NUL
  file), wrapped streams (CRI, kubectl, Loki, Ray, srun, compose, Docker json-file), gzip
  (whole, cut, a flipped byte, a damaged trailer), odd names (bytes that are not UTF-8,
  backslashes, newlines, controls), text under misleading suffixes, stamps at the calendar's
  extremes, symlinks and binary formats by their magic bytes;
* `server_args_lines`: logs holding SGLang `server_args=` lines cut anywhere and continued by
  a tail that once made the reader backtrack (colour sequences, `key=(` never closed, brackets,
  quotes, separators; up to 250 kB), or with a launch value out of range (`base_gpu_id=2^31`,
  `10^20`, negative, 5,000 digits): each such line becomes a contradiction, never a failure;
* `calendar_incident`: a fixture's incident (crash, hang, watchdog, NCCL init hang, missing
  rank) moved to the first minutes of year 1 or the last of year 9999, with or without its
  launch config: the diagnosis's windows must stop at the calendar's edge;
* `config_out_of_range`: `--config` (args.json, a JSON array of tokens, a launch command,
  launch.sh, a log with a `server_args=` line) with a value out of range or a layout past
  65,536 processes or 2^31 GPU ids: exit 2 with one `logcorr: error:` line naming the field,
  before any log line is read;
* `config_server_args`: `--config` that is one adversarial `server_args=` line of up to 1 MB:
  read or refused (exit 0 or 2, one error line) in a second.

Every case must end without a traceback, with its class's exit code; an analysed folder must
give every line of every text file exactly once (gzip: its decompressed lines; a damaged gzip:
a warning naming it) and one warning for every other file; and the case must stay under its
CPU-time bound (the class's, else `--seconds`) and the peak RSS bound (`--rss-mb`, reset per
case through /proc/self/clear_refs). A new class (files of millions of tiny lines, long lines,
20,000 files) is a builder added to CLASSES, with its own time bound if it needs one.
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
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from test_robustness import INSERTS, PIECES, REAL_LINES, expected_lines, run_cli

from logcorr.config import INT_RANGES, MAX_GPU_ID
from logcorr.ingest import shown
from logcorr.render_timeline import inert  # (stderr shows names with their controls escaped)

FIXTURES = ROOT / "fixtures" / "analyze"


def pieced(rng: random.Random) -> bytes:
    return b"".join(rng.choice(PIECES) for _ in range(rng.randrange(0, 40)))


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


# ---------------------------------------------------------------------------------------------
# a case and how its run is judged


@dataclass
class Case:
    """A command line, and what its run must be: exit with one of `codes` (2: with one
    `logcorr: error:` line holding `names`); for an analysed folder, `files` (name -> (kind,
    expected)) all read into `out`; at most `seconds` of CPU (None: the run's --seconds)."""

    argv: list[str]
    codes: tuple[int, ...] = (0,)
    names: str | None = None
    files: dict[bytes, tuple[str, object]] = field(default_factory=dict)
    out: Path | None = None
    seconds: float | None = None


@dataclass(frozen=True)
class Bounds:
    seconds: float
    rss_mb: float


def judge(case: Case, code: int, err: str, spent: float, peak: float, bounds: Bounds
          ) -> tuple[list[str], int]:
    """(failures, lines compared) of one run."""
    failures: list[str] = []
    errors = [line for line in err.splitlines() if line.startswith("logcorr: error:")]
    if "Traceback" in err or code not in case.codes:
        failures.append(f"exit {code} (expected {case.codes}): {err[-300:]}")
    elif code == 2 and (len(errors) != 1 or (case.names or "") not in errors[0]):
        failures.append(f"expected one error line naming {case.names!r}: {err[-300:]}")
    limit = case.seconds if case.seconds is not None else bounds.seconds
    if spent > limit:
        failures.append(f"{spent:.1f} CPU s, over {limit:g} s")
    if peak > bounds.rss_mb:
        failures.append(f"peak RSS {peak:.0f} MB over {bounds.rss_mb:.0f} MB")
    if failures or case.out is None:
        return failures, 0
    return _compare_case(case.files, case.out, err)


def _compare_case(files: dict[bytes, tuple[str, object]], out: Path, err: str
                  ) -> tuple[list[str], int]:
    got: dict[str, dict[int, str]] = {}
    for raw in out.read_text(encoding="utf-8").splitlines():
        record = json.loads(raw)
        lines = got.setdefault(record["file"], {})
        lines[record["line"]] = lines.get(record["line"], "") + record["text"]
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
        elif kind == "gzip" and expected is None and texts == [] and inert(display) not in err:
            failures.append(f"{display!r}: a damaged gzip lost without a warning")
        elif kind == "skip" and (texts or "skipped: binary file" not in err):
            failures.append(f"{display!r}: a binary file read or not warned about")
    return failures, compared


# ---------------------------------------------------------------------------------------------
# folders of hostile files

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


# a real server_args line (SGLang 0.5.x, two nodes of TP16 with attention DP8 and DeepEP)
SERVER_ARGS = (FIXTURES / "tp16-dpattn8-ep-hang-per-node" / "logs" / "node0.log"
               ).read_bytes().split(b"\n", 1)[0]
# what once made the reader backtrack, when it follows a cut
TAILS = (b"\x1b[0m", b"\x1b[0mx", b", k=(", b"k=(x, ", b"(k=(", b", k='", b'"\\', b"k=['a, ",
         b"k=[(, ", b",", b"(", b"[", b"]", b"{'a': [", b"<a: 'b'>, ", b"'\\'", b", tp_size=1")


def out_of_range(rng: random.Random, name: str) -> str:
    """A value launch field `name` cannot take."""
    lowest, highest = INT_RANGES[name]
    return rng.choice((str(lowest - 1), str(highest + 1), str(-(2**31)), str(2**31), str(2**63),
                       str(10**20), str(-(10**20)), "9" * rng.choice((41, 5000))))


def _with_value(line: bytes, name: str, value: str) -> bytes:
    """`line` with `name=value` as its first field (SGLang's repr: the first value counts)."""
    return line.replace(b"ServerArgs(", b"ServerArgs(%s=%s, " % (name.encode(), value.encode()), 1)


def text_server_args(rng: random.Random) -> bytes:
    """Real lines around server_args lines cut and continued by a hostile tail, or holding a
    value out of range."""
    lines = _real(rng, rng.randrange(0, 6))
    for _ in range(rng.randrange(1, 4)):
        if rng.random() < 0.5:
            tail = rng.choice(TAILS)
            count = rng.choice((1, 100, 5000, 250_000 // len(tail)))
            line = SERVER_ARGS[: rng.randrange(len(SERVER_ARGS))] + tail * count
        else:
            name = rng.choice(sorted(INT_RANGES))
            line = _with_value(SERVER_ARGS, name, out_of_range(rng, name))
        lines.insert(rng.randrange(len(lines) + 1), line)
    return b"\n".join(lines) + rng.choice((b"\n", b""))


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


def make_files(rng: random.Random, folder: Path, texts: tuple[Callable[[random.Random], bytes], ...]
               ) -> dict[bytes, tuple[str, object]]:
    """Write one case's files, of the text classes `texts`; name -> (kind, expected), where
    kind is `text` (expected: the lines), `gzip` (the lines, or None when damaged: a warning
    is expected), `skip` (one warning) or `link` (the name it points to)."""
    files: dict[bytes, tuple[str, object]] = {}
    for index in range(rng.randrange(1, 5)):
        name = odd_name(rng, index)
        roll = rng.random()
        data = rng.choice(texts)(rng)
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


def _analyze(folder: Path, files: dict[bytes, tuple[str, object]], *extra: str) -> Case:
    out = folder.parent / "out.jsonl"
    return Case(["analyze", str(folder), "--format", "jsonl", "-o", str(out), *extra],
                files=files, out=out)


def folder_case(rng: random.Random, folder: Path) -> Case:
    return _analyze(folder, make_files(rng, folder, (text_splice, text_glued, text_nul,
                                                     text_wrapped, text_calendar)))


def server_args_case(rng: random.Random, folder: Path) -> Case:
    case = _analyze(folder, make_files(rng, folder, (text_server_args,)))
    case.seconds = 10.0  # (a line once took minutes)
    return case


# ---------------------------------------------------------------------------------------------
# incidents at the calendar's edges

# The fixtures' stamps (`2026-11-29 10:MM`, glog `E1129 10:MM`; incidents at 10:00-10:11) moved
# to the first minutes of year 1 or the last of year 9999.
_STAMP = re.compile(rb"2026-11-29 10:(\d\d)|([IWEF])1129 10:(\d\d)")
EDGES = {"year 1": (b"0001-01-01", b"0101", 0, 0), "year 9999": (b"9999-12-31", b"1231", 23, 48)}


def at_edge(text: bytes, edge: str) -> bytes:
    """`text` with its fixture stamps moved to `edge`.

    >>> at_edge(b"[2026-11-29 10:11:09 TP0] x [E1129 10:01:02", "year 9999")
    b'[9999-12-31 23:59:09 TP0] x [E1231 23:49:02'
    """
    date, month_day, hour, first = EDGES[edge]

    def moved(found: re.Match[bytes]) -> bytes:
        minute = b"%02d:%02d" % (hour, min(59, first + int(found.group(1) or found.group(3))))
        return (date + b" " + minute if found.group(1) is not None
                else found.group(2) + month_day + b" " + minute)
    return _STAMP.sub(moved, text)


def incident_case(rng: random.Random, folder: Path) -> Case:
    fixture = rng.choice(sorted(p for p in FIXTURES.iterdir() if (p / "logs").is_dir()))
    edge = rng.choice(sorted(EDGES))
    files: dict[bytes, tuple[str, object]] = {}
    for path in sorted((fixture / "logs").rglob("*")):
        if path.is_file():
            data = at_edge(path.read_bytes(), edge)
            if rng.random() < 0.2:  # cut short, as a crash leaves a log
                data = data[: rng.randrange(len(data) + 1)]
            target = folder / path.relative_to(fixture / "logs")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            files[str(path.relative_to(fixture / "logs")).encode()] = ("text", expected_lines(data))
    config = fixture / "args.json"
    extra = ["--config", str(config)] if config.exists() and rng.random() < 0.7 else []
    if rng.random() < 0.3:  # the pictures' passes over the times too
        extra += ["--html", str(folder.parent / "report.html")]
    if rng.random() < 0.3:
        extra += ["--report", str(folder.parent / "report.json")]
    return _analyze(folder, files, *extra)


# ---------------------------------------------------------------------------------------------
# launch configs out of range

LOGS = FIXTURES / "tp8-crash-per-node" / "logs"
# layouts past what logcorr builds: (fields, what the one error line names)
TOO_LARGE = (({"tp_size": 512, "pp_size": 256}, "scheduler processes"),
             ({"tp_size": 8, "dp_size": 65536}, "scheduler processes"),
             ({"tp_size": 64, "gpu_id_step": 2**26}, "gpu_id_step"),
             ({"tp_size": 16, "base_gpu_id": MAX_GPU_ID - 8}, "base_gpu_id"))


def _spelled(rng: random.Random, values: dict[str, object]) -> tuple[str, str]:
    """(file name, text) of launch args `values` in one of the spellings --config reads."""
    flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in values.items())
    command = f"python -m sglang.launch_server --model-path /m {flags}"
    fields = ", ".join(f"{k}={v}" for k, v in values.items())
    entries = ", ".join(f"'{k}': {v}" for k, v in values.items())
    return rng.choice((
        ("args.json", "{" + ", ".join(f'"{k}": {v}' for k, v in values.items()) + "}"),
        ("args.json", json.dumps(command.split())),
        ("command.txt", command),
        ("launch.sh", f"#!/bin/bash\nexport NCCL_DEBUG=INFO\n{command} \\\n  --trust-remote-code\n"),
        ("server.log", f"[2026-11-29 10:00:00] server_args=ServerArgs({fields})\n"),
        ("server.log", f"[2026-11-29 10:00:00] server_args={{{entries}}}\n"),
    ))


def config_case(rng: random.Random, folder: Path) -> Case:
    if rng.random() < 0.2:
        values, names = rng.choice(TOO_LARGE)
    else:
        names = rng.choice(sorted(INT_RANGES))
        values = {"tp_size": 8, names: out_of_range(rng, names)}
    name, text = _spelled(rng, dict(values))
    (folder / name).write_text(text)
    argv = rng.choice((["analyze", str(LOGS), "--format", "jsonl", "-o", str(folder / "o")],
                       ["topology", "--format", "json"], ["topology", "--no-validate"]))
    return Case([*argv, "--config", str(folder / name)], codes=(2,), names=names, seconds=2.0)


def config_line_case(rng: random.Random, folder: Path) -> Case:
    tail = rng.choice(TAILS)
    line = SERVER_ARGS[: rng.randrange(len(SERVER_ARGS))] + tail * (1_000_000 // len(tail))
    (folder / "server.log").write_bytes(line + b"\n")
    return Case(["topology", "--format", "json", "--config", str(folder / "server.log")],
                codes=(0, 2), seconds=2.0)


# class -> (weight, builder): what `--hostile` draws a case from
CLASSES: dict[str, tuple[float, Callable[[random.Random, Path], Case]]] = {
    "folder": (6.0, folder_case),
    "server_args_lines": (2.0, server_args_case),
    "calendar_incident": (2.0, incident_case),
    "config_out_of_range": (1.5, config_case),
    "config_server_args": (0.5, config_line_case),
}


# ---------------------------------------------------------------------------------------------
# the run


def _peak_reset() -> None:
    with open("/proc/self/clear_refs", "w") as handle:  # 5: reset the peak RSS (VmHWM)
        handle.write("5")


def _peak_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def check_case(args: tuple[int, int, str, Bounds, tuple[str, ...]]
               ) -> tuple[str, float, float, list[str], int]:
    """Build and run one case; (class, peak RSS MB, CPU seconds, failures, lines compared)."""
    seed, number, keep, bounds, classes = args
    rng = random.Random(seed * 1_000_003 + number)
    kind = rng.choices(classes, weights=[CLASSES[c][0] for c in classes])[0]
    folder = Path(tempfile.mkdtemp(prefix="logcorr-hostile-"))
    try:
        logs = folder / "logs"
        logs.mkdir()
        case = CLASSES[kind][1](rng, logs)
        _peak_reset()
        began = time.process_time()
        try:
            code, _, err = run_cli(case.argv)
        except BaseException:  # noqa: BLE001 - a raise out of main is the failure looked for
            failure = f"case {number} ({kind}): " + traceback.format_exc()
            return kind, _peak_mb(), 0.0, [_keep_case(logs, keep, seed, number, failure)], 0
        spent, peak = time.process_time() - began, _peak_mb()
        found, compared = judge(case, code, err, spent, peak, bounds)
        failures = [f"case {number} ({kind}): {f} (seed {seed})" for f in found]
        if failures:
            _keep_case(logs, keep, seed, number, "\n".join(failures + [" ".join(case.argv)]))
        return kind, peak, spent, failures, compared
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _keep_case(logs: Path, keep: str, seed: int, number: int, description: str) -> str:
    target = Path(keep) / f"hostile-seed{seed}-case{number}"
    shutil.copytree(logs, target, symlinks=True, dirs_exist_ok=True)
    (target.parent / f"{target.name}.FAILURE.txt").write_text(description)
    return description


def _quantiles(values: list[float], digits: int = 0) -> str:
    values = sorted(values) or [0.0]
    at = (lambda q: f"{values[min(len(values) - 1, int(q * len(values)))]:.{digits}f}")
    return f"median {at(0.5)}, p90 {at(0.9)}, p99 {at(0.99)}, max {at(1.0)}"


def hostile(args: argparse.Namespace) -> int:
    classes = tuple(args.classes.split(",")) if args.classes else tuple(CLASSES)
    unknown = sorted(set(classes) - set(CLASSES))
    if unknown:
        print(f"unknown class(es) {unknown}; known: {', '.join(CLASSES)}", file=sys.stderr)
        return 2
    bounds = Bounds(args.seconds, args.rss_mb)
    jobs = [(args.seed, number, args.keep, bounds, classes) for number in range(args.cases)]
    began, failures, lines = time.monotonic(), [], 0
    peaks: list[float] = []
    seconds: dict[str, list[float]] = {}
    with ProcessPoolExecutor(args.jobs) as pool:
        for kind, peak, spent, found, compared in pool.map(check_case, jobs, chunksize=4):
            peaks.append(peak)
            seconds.setdefault(kind, []).append(spent)
            failures += found
            lines += compared
    for failure in failures[:20]:
        print(failure, file=sys.stderr)
    print(f"fuzz --hostile: {len(jobs)} cases ({lines} lines compared), {len(failures)} failures, "
          f"{time.monotonic() - began:.0f} s (seed {args.seed}); peak RSS per case MB: "
          f"{_quantiles(peaks)} (bound {args.rss_mb:.0f})")
    for kind in classes:
        spent = seconds.get(kind, [])
        print(f"  {kind}: {len(spent)} cases, CPU s per case {_quantiles(spent, 2)}")
    return 1 if failures else 0
