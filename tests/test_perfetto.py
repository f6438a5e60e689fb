"""`analyze --format perfetto`: the trace-event JSON, checked against the format's rules.

Rules (the Trace Event Format that Perfetto UI and chrome://tracing read): every event has a
known phase, integer-or-float microsecond `ts`, `pid`/`tid`; `X` slices have a non-negative
`dur` and slices of one thread nest (no partial overlap); `B`/`E` pairs match; instants have a
scope; every process and thread that has events is named and ordered by `M` metadata events.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from logcorr.cli import main

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "analyze"
PHASES = {"B", "E", "X", "i", "I", "C", "M", "b", "e", "n", "s", "t", "f"}


def trace_of(case: str, tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / f"{case}.json"
    assert main(["analyze", str(ROOT / case / "logs"), "--config", str(ROOT / case / "args.json"),
                 "--format", "perfetto", "-o", str(out)]) == 0
    document: dict[str, Any] = json.loads(out.read_text())
    return document


def check_rules(document: dict[str, Any]) -> None:
    events = document["traceEvents"]
    assert isinstance(events, list) and events
    named: dict[int, set[str]] = {}
    threads: dict[tuple[int, int], set[str]] = {}
    used_pids: set[int] = set()
    used_threads: set[tuple[int, int]] = set()
    slices: dict[tuple[int, int], list[tuple[float, float]]] = {}
    open_b: dict[tuple[int, int], int] = {}
    for event in events:
        ph = event["ph"]
        assert ph in PHASES, event
        assert isinstance(event["ts"], (int, float)) and event["ts"] >= 0, event
        assert isinstance(event["pid"], int), event
        key = (event["pid"], event.get("tid", 0))
        if ph == "M":
            assert event["name"] in ("process_name", "process_sort_index", "thread_name",
                                     "thread_sort_index"), event
            if event["name"].startswith("process"):
                named.setdefault(event["pid"], set()).add(event["name"])
            else:
                threads.setdefault(key, set()).add(event["name"])
            continue
        used_pids.add(event["pid"])
        if ph != "C":
            assert isinstance(event["tid"], int), event
            used_threads.add(key)
        assert isinstance(event["name"], str) and event["name"], event
        if ph == "X":
            assert isinstance(event["dur"], (int, float)) and event["dur"] >= 0, event
            slices.setdefault(key, []).append((event["ts"], event["ts"] + event["dur"]))
        elif ph in ("i", "I"):
            assert event.get("s", "t") in ("g", "p", "t"), event
        elif ph == "B":
            open_b[key] = open_b.get(key, 0) + 1
        elif ph == "E":
            assert open_b.get(key, 0) > 0, event
            open_b[key] -= 1
        elif ph == "C":
            assert all(isinstance(v, (int, float)) for v in event["args"].values()), event
    assert all(n == 0 for n in open_b.values())
    for pid in used_pids:
        assert named.get(pid) == {"process_name", "process_sort_index"}, pid
    for key in used_threads:
        assert threads.get(key) == {"thread_name", "thread_sort_index"}, key
    for key, spans in slices.items():  # X events of one thread nest
        stack: list[tuple[float, float]] = []
        for start, end in sorted(spans, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1][1] <= start:
                stack.pop()
            assert not stack or end <= stack[-1][1], (key, start, end, stack[-1])
            stack.append((start, end))


def _names(document: dict[str, Any]) -> list[tuple[int, str]]:
    """(sort index, process name) in sort order."""
    events = document["traceEvents"]
    names = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    order = {e["pid"]: e["args"]["sort_index"] for e in events
             if e["name"] == "process_sort_index"}
    return sorted((order[pid], names[pid]) for pid in names)


def micros(document: dict[str, Any], iso: str) -> int:
    start = datetime.fromisoformat(document["otherData"]["start"])
    return round((datetime.fromisoformat(iso) - start).total_seconds() * 1e6)


def test_hang_trace(tmp_path: Path) -> None:
    document = trace_of("tp16-dpattn8-ep-hang-per-node", tmp_path)
    check_rules(document)
    events = document["traceEvents"]
    names = [name for _, name in _names(document)]
    # tracks named by coordinates, in topology order, the culprit's state said
    assert names[0] == "n0 g0 w0 DP0 TP0 EP0 [waiting]"
    assert names[9] == "n1 g1 w9 DP4 TP9 EP9 [culprit]"
    assert names[16:] == ["main @ gpu-node-0", "main @ gpu-node-1", "unattributed"]
    # a watchdog timeout at 10:11:09 after 600071 ms: the wait is a slice ending at it
    waits = [e for e in events if e["ph"] == "X" and e.get("cat") == "watchdog"]
    assert len(waits) == 15
    end = micros(document, "2026-11-29T10:11:09")
    assert all(e["ts"] + e["dur"] == end and e["dur"] == 600_071_000 for e in waits)
    assert {e["name"] for e in waits} == {"waiting in ALLREDUCE SeqNum 9141"}
    # instants carry file:line and text; the finding sits on the culprit's track
    finding = [e for e in events if e.get("cat") == "finding"]
    assert [e["pid"] for e in finding] == [10]
    watchdog = [e for e in events if e["ph"] == "i" and e.get("cat") == "evidence"
                and e["args"]["file:line"] == "node0.log:100"]
    assert watchdog and "Watchdog caught collective operation timeout" in watchdog[0]["args"][
        "text"]
    assert watchdog[0]["ts"] == end
    # startup phases: weight loading begins and ends on each scheduler
    loads = [e for e in events if e["ph"] == "X" and e["name"] == "weight loading"]
    assert len(loads) == 16 and all(e["dur"] == 40_000_000 for e in loads)
    # batch statistics as counters on the printing ranks
    counters = [e for e in events if e["ph"] == "C"]
    assert counters and all("running requests" in e["args"] for e in counters)


def test_nccl_init_hang_trace(tmp_path: Path) -> None:
    """A communicator begun and never completed runs to the end of the logs, marked."""
    document = trace_of("tp16-dpattn8-nccl-init-hang", tmp_path)
    check_rules(document)
    inits = [e for e in document["traceEvents"] if e["ph"] == "X" and e.get("cat") == "nccl"]
    done = [e for e in inits if not e["args"].get("unfinished")]
    stuck = [e for e in inits if e["args"].get("unfinished")]
    assert len(done) == 8 and len(stuck) == 8
    last = max(e["ts"] + e.get("dur", 0) for e in document["traceEvents"] if e["ph"] != "M")
    assert all(e["ts"] + e["dur"] == last and "never completed" in e["name"] for e in stuck)


def test_overlapping_slices_get_lanes() -> None:
    """Two communicators initialised at once on one process go on two threads."""
    import polars as pl

    from logcorr.perfetto import _slices

    rows = pl.DataFrame({
        "t": [0, 10, 20, 30], "timed": [True] * 4, "file": ["f"] * 4, "line": [1, 2, 3, 4],
        "text": [("h:1:1 [0] NCCL INFO comm 0xa rank 0 nranks 2 cudaDev 0 busId 1 commId 0x1 "
                 "- Init START"),
                 ("h:1:1 [0] NCCL INFO comm 0xb rank 0 nranks 2 cudaDev 0 busId 1 commId 0x2 "
                 "- Init START"),
                 ("h:1:1 [0] NCCL INFO comm 0xa rank 0 nranks 2 cudaDev 0 busId 1 commId 0x1 "
                 "- Init COMPLETE"),
                 ("h:1:1 [0] NCCL INFO comm 0xb rank 0 nranks 2 cudaDev 0 busId 1 commId 0x2 "
                 "- Init COMPLETE")]})
    events = list(_slices(0, rows, 100, lambda t: t))
    assert [(e["ts"], e["dur"]) for e in events] == [(0, 20), (10, 20)]
    assert events[0]["tid"] != events[1]["tid"]
    check_rules({"traceEvents": [
        *({"name": n, "ph": "M", "pid": 1, "tid": 0, "ts": 0, "args": {}}
          for n in ("process_name", "process_sort_index")),
        *({"name": n, "ph": "M", "pid": 1, "tid": e["tid"], "ts": 0, "args": {}}
          for e in events for n in ("thread_name", "thread_sort_index")),
        *events]})


def test_rules_catch_a_bad_trace() -> None:
    """The checker fails on partial overlap and on an unnamed track."""
    meta = [{"name": n, "ph": "M", "pid": 1, "tid": 1, "ts": 0, "args": {}}
            for n in ("process_name", "process_sort_index", "thread_name", "thread_sort_index")]
    overlap = [{"name": "a", "ph": "X", "ts": 0, "dur": 10, "pid": 1, "tid": 1},
               {"name": "b", "ph": "X", "ts": 5, "dur": 10, "pid": 1, "tid": 1}]
    with pytest.raises(AssertionError):
        check_rules({"traceEvents": [*meta, *overlap]})
    with pytest.raises(AssertionError):
        check_rules({"traceEvents": [{"name": "a", "ph": "i", "s": "t", "ts": 0, "pid": 2,
                                      "tid": 1}]})


def test_perfetto_refuses_a_selection(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    case = ROOT / "tp8-crash-per-rank"
    code = main(["analyze", str(case / "logs"), "--format", "perfetto", "--select", "tp=3"])
    assert code == 2
    assert capsys.readouterr().err.startswith("logcorr: error: --select")
