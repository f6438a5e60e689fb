"""`--format perfetto`: the Chrome trace-event JSON that Perfetto UI and chrome://tracing open.

One process track per row of the digest (a scheduler named by its coordinates, `n1 g2 w10 DP5
TP10 EP10`, then the main process, detokenizer, ... and the unattributed lines), sorted in
topology order. Within a process, threads hold:

* `log`: instant events for warnings, errors, watchdog lines, py-spy dumps and the lines the
  findings cite (file:line and text in args; at large sizes one per kind and time bin, with the
  count of lines it stands for), and the findings themselves on their culprits' tracks;
* `startup`: slices for the startup phases (distributed init, weight loading, memory pool, CUDA
  graph capture), begin line to end line;
* `NCCL init`: a slice per communicator from `Init START` to `Init COMPLETE`;
* `collective wait`: a watchdog's waiting time, from the last progress (the timeout's
  `ran for N milliseconds` before it) to the timeout.

A phase begun and never ended runs to the end of the logs, with `unfinished: true`. Batch
statistics (running requests, tokens, token usage) are counters: their maxima in at most
COUNTER_SAMPLES bins per process (and COUNTER_EVENTS in all). Times are microseconds from the
earliest line (`otherData.start`, naive local time).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import polars as pl
import regex

from logcorr.diagnose.context import PHASES
from logcorr.digest import Digest

THREADS = {"log": 1, "startup": 2, "NCCL init": 3, "collective wait": 4}
INSTANT_KINDS = ("evidence", "watchdog", "error", "pyspy", "warning")
# `comm 0x… rank R nranks N … Init START|COMPLETE`: the communicator (its id when `commId`
# follows its rank at once), then the first Init after it, searched apart so that a line of
# many `comm 0x…` without an Init is read in linear time
_COMM = regex.compile(r"\bcomm (0x[0-9a-fA-F]+)(?: rank (\d+) nranks (\d+))?"
                      r"(?:commId (0x[0-9a-fA-F]+))?")
_INIT = regex.compile(r"Init (START|COMPLETE)")
_RAN_FOR = regex.compile(r"ran for (\d+) milliseconds before timing out")
_WORK = regex.compile(r"SeqNum=(\d+), OpType=(\w+)")
NAME_CHARS = 80
COUNTER_SAMPLES = 500  # counter values per process over the whole span, at most
COUNTER_EVENTS = 100_000  # counter values in the whole trace, at most (20 per process at least)


def trace(digest: Digest) -> dict[str, Any]:
    """The trace document (`{"traceEvents": [...], ...}`)."""
    events = list(_events(digest))
    return {"traceEvents": events, "displayTimeUnit": "ms",
            "otherData": {"producer": "logcorr", "start": digest.iso(digest.base_us),
                          "lines": digest.lines, "time_unit": "microseconds from start"}}


def write_trace(digest: Digest, stream: Any) -> None:
    json.dump(trace(digest), stream, ensure_ascii=False, separators=(",", ":"))
    stream.write("\n")


def _events(d: Digest) -> Iterator[dict[str, Any]]:
    base = d.base_us
    used: dict[int, set[int]] = {}
    body: list[dict[str, Any]] = []

    def rel(t: int) -> int:
        return int(t) - base

    for row, t, kind, file, line, text, chars, n in d.marks.filter(
            pl.col("kind").is_in(INSTANT_KINDS)).select(
            "row", "t", "kind", "file", "line", "text", "chars", "n").iter_rows():
        args: dict[str, Any] = {"file:line": f"{file}:{line}", "text": text}
        if chars and chars > len(text):
            args["text_chars"] = chars
        if n > 1:
            args["lines_of_this_kind_in_bin"] = n
        body.append({"name": f"{kind}: {text[:NAME_CHARS]}", "cat": kind, "ph": "i", "s": "t",
                     "ts": rel(t), "pid": row + 1, "tid": THREADS["log"], "args": args})
    for i, finding in enumerate(d.findings):
        t = _finding_time(d, finding)
        culprits = [r for r, row in enumerate(d.rows) if i in row.findings
                    and row.state in ("culprit", "crashed", "suspect", "missing")]
        args = {"summary": finding.get("summary"), "severity": finding.get("severity"),
                "evidence": [f"{e.get('file')}:{e.get('line')}"
                             for e in finding.get("evidence") or []]}
        name = f"finding {i + 1}: {finding.get('kind')}"
        for r in culprits:
            body.append({"name": name, "cat": "finding", "ph": "i", "s": "p", "ts": rel(t),
                         "pid": r + 1, "tid": THREADS["log"], "args": args})
        if not culprits:
            body.append({"name": name, "cat": "finding", "ph": "i", "s": "g", "ts": rel(t),
                         "pid": len(d.rows), "tid": THREADS["log"], "args": args})
    for row, rows in d.slices.sort("row", "t", maintain_order=True).group_by(
            "row", maintain_order=True):
        body.extend(_slices(int(row[0]), rows, d.end_us, rel))
    for row, bin_, running, tokens, usage in _counters(d).iter_rows():
        values = {k: v for k, v in (("running requests", running), ("tokens", tokens),
                                    ("token usage", usage)) if v is not None}
        if values:
            body.append({"name": "batch", "ph": "C", "ts": rel(bin_), "pid": row + 1,
                         "args": values})
    for event in body:
        used.setdefault(event["pid"], set())
        if "tid" in event:
            used[event["pid"]].add(event["tid"])
    names = {v: k for k, v in THREADS.items()}
    for r, row in enumerate(d.rows):
        pid = r + 1
        label = row.label if row.state == "healthy" else f"{row.label} [{row.state}]"
        yield {"name": "process_name", "ph": "M", "pid": pid, "tid": 0, "ts": 0,
               "args": {"name": label}}
        yield {"name": "process_sort_index", "ph": "M", "pid": pid, "tid": 0, "ts": 0,
               "args": {"sort_index": r}}
        for tid in sorted(used.get(pid, set()) | {THREADS["log"]}):
            yield {"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "ts": 0,
                   "args": {"name": names.get(tid) or _lane_name(tid)}}
            yield {"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "ts": 0,
                   "args": {"sort_index": tid}}
    body.sort(key=lambda e: (e["ts"], e["pid"]))
    yield from body


def _counters(d: Digest) -> pl.DataFrame:
    """Batch statistics per row in at most COUNTER_SAMPLES bins of the whole span (maxima),
    fewer when many processes print them (COUNTER_EVENTS in all)."""
    printing = max(1, d.metrics.get_column("row").n_unique()) if d.metrics.height else 1
    samples = max(20, min(COUNTER_SAMPLES, COUNTER_EVENTS // printing))
    width = max(d.bin_us, -(-(d.end_us - d.base_us + 1) // samples))
    return (d.metrics.with_columns((pl.col("bin") - d.base_us) // width * width + d.base_us)
            .group_by("row", "bin").agg(pl.col("running", "tokens", "usage").max())
            .sort("row", "bin"))


def wait_spans(d: Digest) -> list[tuple[int, int, int]]:
    """(row, start, end) of every watchdog's waiting time: from the last progress to the
    timeout."""
    spans = []
    for row, rows in d.slices.sort("row", "t", maintain_order=True).group_by(
            "row", maintain_order=True):
        for event in _slices(int(row[0]), rows, d.end_us, lambda t: t):
            if event.get("cat") == "watchdog":
                spans.append((int(row[0]), event["ts"], event["ts"] + event["dur"]))
    return spans


def _lane_name(tid: int) -> str:
    """Threads past the first of a kind (overlapping slices go on lanes of their own)."""
    kind = {v: k for k, v in THREADS.items()}[tid % 10]
    return f"{kind} ({tid // 10 + 1})"


def _finding_time(d: Digest, finding: dict[str, Any]) -> int:
    from logcorr.digest import to_us

    for key in ("first_ts", "last_ts"):
        t = to_us(finding.get(key))
        if t is not None:
            return t
    return d.end_us


def _slices(row: int, rows: pl.DataFrame, end: int, rel: Any) -> Iterator[dict[str, Any]]:
    """Phase, NCCL init and watchdog-wait slices of one process, each on a lane where it
    does not overlap another (X events of one thread must nest)."""
    spans: list[tuple[str, int, int, dict[str, Any]]] = []  # thread, start, end, event
    open_phases: dict[str, tuple[int, str]] = {}
    open_comms: dict[str, tuple[int, str, str]] = {}
    for t, timed, file, line, text in rows.select("t", "timed", "file", "line", "text"
                                                   ).iter_rows():
        where = f"{file}:{line}"
        for name, begins, ends in PHASES:
            if any(s in text for s in ends) and name in open_phases:
                start, at = open_phases.pop(name)
                spans.append(("startup", start, t, {"name": name, "cat": "phase", "args": {
                    "begin": at, "end": where}}))
            if any(s in text for s in begins) and name not in open_phases:
                open_phases[name] = (t, where)
        match = _comm_init(text)
        if match is not None:
            comm, rank, nranks, comm_id, phase = match
            if phase == "START":
                label = f"NCCL init {comm_id or comm}" + (f" rank {rank}/{nranks}" if rank
                                                           else "")
                open_comms[comm] = (t, where, label)
            elif comm in open_comms:
                start, at, label = open_comms.pop(comm)
                spans.append(("NCCL init", start, t, {"name": label, "cat": "nccl", "args": {
                    "begin": at, "end": where, "time_printed": bool(timed)}}))
        waited = _RAN_FOR.search(text)
        if waited is not None:
            work = _WORK.search(text)
            label = (f"waiting in {work.group(2)} SeqNum {work.group(1)}" if work
                     else "collective wait")
            start = t - int(waited.group(1)) * 1000
            spans.append(("collective wait", start, t, {"name": label, "cat": "watchdog",
                                                         "args": {"timeout": where,
                                                                  "text": text}}))
    for name, (start, at) in open_phases.items():
        spans.append(("startup", start, max(start, end), {"name": f"{name} (never ended)",
                                                          "cat": "phase", "args": {
                                                              "begin": at, "unfinished": True}}))
    for start, at, label in open_comms.values():
        spans.append(("NCCL init", start, max(start, end), {
            "name": f"{label} (never completed)", "cat": "nccl",
            "args": {"begin": at, "unfinished": True}}))
    lanes: dict[str, list[list[tuple[int, int]]]] = {}
    for thread, start, stop, event in sorted(spans, key=lambda s: (s[1], -s[2])):
        tid = _lane(lanes.setdefault(thread, []), start, stop) * 10 + THREADS[thread]
        yield {**event, "ph": "X", "ts": rel(start), "dur": max(0, stop - start),
               "pid": row + 1, "tid": tid}


def _comm_init(text: str) -> tuple[str, str | None, str | None, str | None, str] | None:
    """(comm, rank, nranks, commId, START|COMPLETE) of an NCCL communicator init line.

    >>> _comm_init("NCCL INFO comm 0x5581 rank 0 nranks 4 cudaDev 0 busId 1a000 commId 0xf2 "
    ...            "- Init START")
    ('0x5581', '0', '4', None, 'START')
    """
    comm = _COMM.search(text)
    init = _INIT.search(text, comm.end()) if comm is not None else None
    if comm is None or init is None:
        return None
    return comm.group(1), comm.group(2), comm.group(3), comm.group(4), init.group(1)


def _lane(lanes: list[list[tuple[int, int]]], start: int, stop: int) -> int:
    """The first lane where [start, stop] nests inside or follows what is there."""
    for i, lane in enumerate(lanes):
        # drop finished spans; what remains open must contain the new one
        while lane and lane[-1][1] <= start:
            lane.pop()
        if not lane or (lane[-1][0] <= start and stop <= lane[-1][1]):
            lane.append((start, stop))
            return i
    lanes.append([(start, stop)])
    return len(lanes) - 1
