"""Event lines that repeat one message (a failure line per request) are kept as their first and
last rows with a count of the rest: the diagnosis answers as it does with every row, in memory
that does not grow with the repeats. The log sets are generated here from real line shapes."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from logcorr import api
from logcorr.diagnose import context, lines_in, thin_events

DAY = "2026-11-29"


def stamp(second: int) -> str:
    return f"{DAY} 10:{second // 60:02d}:{second % 60:02d}"


def transfer_failed(tp: int, second: int, rng: random.Random) -> str:
    # (SGLang 0.5: `Decode transfer failed for request rank=… {decode_req.req.rid=}
    # {decode_req.req.bootstrap_room=} with exception …`; rids are uuid4 hex, rooms 63-bit)
    return (f"[{stamp(second)} TP{tp}] Decode transfer failed for request rank={tp} "
            f"decode_req.req.rid='{rng.getrandbits(128):032x}' "
            f"decode_req.req.bootstrap_room={rng.getrandbits(63)} with exception "
            "KVTransferError(Failed to get kvcache from prefill instance, it might be dead)")


def nccl_warn(host: str, pid: int, port: int) -> str:
    return (f"{host}:{pid}:{pid + 80} [0] NCCL INFO NET/IB : Got completion from peer "
            f"10.0.0.2<{port}> with status=12 opcode=0 len=0 vendor err 129 (Recv)\n"
            f"{host}:{pid}:{pid + 80} [0] transport/net_ib.cc:1731 NCCL WARN NET/IB : Got "
            f"completion from peer 10.0.0.2<{port}> with error 12, opcode 0, len 0, vendor "
            "err 129 (Recv) localGid ::ffff:10.0.0.1 remoteGid ::ffff:10.0.0.2")


def storm(folder: Path) -> Path:
    """Two decode schedulers logging a KV transfer failure for each of 300 requests (TP0's
    clock jumps back half-way, so its latest time is not its last line), and NCCL WARN lines
    that differ only in a short number (the peer's port): those are not repeats."""
    rng = random.Random(7)
    logs = folder / "logs"
    logs.mkdir()
    tp0 = [transfer_failed(0, s, rng) for s in range(200, 350)]
    tp0 += [transfer_failed(0, s, rng) for s in range(150)]
    (logs / "decode_tp0.log").write_text("\n".join(tp0) + "\n")
    tp1 = [transfer_failed(1, s, rng) for s in range(300)]
    tp1 += [nccl_warn("node-1", 5102, 40000 + i) for i in range(30)]
    (logs / "decode_tp1.log").write_text("\n".join(tp1) + "\n")
    args = folder / "args.json"
    args.write_text(json.dumps({"tp_size": 2, "disaggregation_mode": "decode"}))
    return logs


def diagnosed(logs: Path, monkeypatch: pytest.MonkeyPatch, **options: Any
              ) -> tuple[dict[str, object], pl.DataFrame]:
    """The report of `logs` and the event rows the diagnosis read."""
    seen: list[pl.DataFrame] = []
    real = api.diagnose

    def spy(ctx: context.Context, contradictions: list[dict[str, object]]) -> Any:
        seen.append(ctx.events)
        return real(ctx, contradictions)

    with monkeypatch.context() as patch:
        patch.setattr(api, "diagnose", spy)
        analysis = api.analyze([logs], config=logs.parent / "args.json", **options)
    try:
        return analysis.report(), seen[0]
    finally:
        if analysis.workspace is not None:
            analysis.workspace.close()


@pytest.mark.parametrize("options", [{}, {"chunk_bytes": 6000, "memory_budget": 0}])
def test_repeated_event_lines_are_kept_first_and_last_with_a_count(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, options: dict[str, Any]) -> None:
    logs = storm(tmp_path)
    monkeypatch.setattr(api, "EVENT_ROWS", 40)  # (cut again while the pieces are read)
    monkeypatch.setattr(api, "THIN_CHUNK_ROWS", 10)  # (and each chunk's before it is stored)
    report, events = diagnosed(logs, monkeypatch, **options)
    with monkeypatch.context() as patch:
        patch.setattr(context, "THIN_FIRST", 10**9)
        every, all_rows = diagnosed(logs, monkeypatch, **options)
    assert all_rows.height == 300 + 300 + 30  # (the NCCL INFO lines are not events)
    assert report == every  # the same findings, counts, evidence and times
    transfer = next(f for f in report["findings"] if f["kind"] == "disagg-transfer")
    assert "600 KV transfer(s) failed" in transfer["summary"]
    assert transfer["last_ts"] == f"{DAY}T10:05:49"  # TP0's latest, before its clock jumped
    assert [e["line"] for e in transfer["evidence"]] == [1, 2, 3, 4, 5, 6, 7, 8]
    failed = events.filter(pl.col("text").str.contains("transfer failed", literal=True))
    assert lines_in(failed) == 600
    # per scheduler: the first and last ones, the earliest and the latest time (TP0: 2 more)
    assert failed.height <= 2 * (context.THIN_FIRST + context.THIN_LAST + 2)
    warns = events.filter(pl.col("text").str.contains("NCCL WARN", literal=True))
    assert warns.height == 30  # each names another port: none repeats another


def rows(texts: list[str], start: int = 0) -> pl.DataFrame:
    count = len(texts)
    return pl.DataFrame({"_sk": range(start, start + count), "file_id": [0] * count,
                         "line": range(start + 1, start + count + 1), "part": [0] * count,
                         "text": texts, "proc": [3] * count, "record": range(start, start + count),
                         "ts_full": [None] * count},
                        schema_overrides={"file_id": pl.UInt32, "line": pl.UInt32,
                                          "part": pl.UInt16, "proc": pl.UInt32,
                                          "record": pl.UInt32, "ts_full": pl.Datetime("us")})


def test_thinning_in_pieces_keeps_the_same_rows_as_at_once() -> None:
    rng = random.Random(3)
    texts = [transfer_failed(2, s // 4, rng) for s in range(500)]
    whole = thin_events(rows(texts))
    pieces = [thin_events(rows(texts[i:i + 70], i)) for i in range(0, 500, 70)]
    again = thin_events(pl.concat(pieces))
    assert whole.height == context.THIN_FIRST + context.THIN_LAST
    assert int(whole["_n"].sum()) == int(again["_n"].sum()) == 500
    assert whole.drop("_n").equals(again.sort("_sk").drop("_n"))
    assert whole["line"].to_list() == [*range(1, context.THIN_FIRST + 1),
                                       *range(501 - context.THIN_LAST, 501)]


def test_lines_that_differ_in_a_short_number_are_not_repeats() -> None:
    # exit codes, ports, ranks, counts: short numbers the rules read; only times and ids of
    # eight hex digits or more are set aside
    texts = [f"[{stamp(9)} TP0] Scheduler hit an exception: exit code {code}"
             for code in range(200)]
    assert thin_events(rows(texts)).height == 200
    same = [f"[{stamp(s)} TP0] Scheduler hit an exception: request 0x7f3a{s:08x} failed"
            for s in range(200)]
    assert thin_events(rows(same)).height == context.THIN_FIRST + context.THIN_LAST


def test_a_traceback_per_request_keeps_one_exception_row_per_second(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the HTTP server logs a traceback for every request that fails: the whole-set table of
    # exception headers (for tracebacks of several processes in one second) holds a row per
    # second and process, not one per traceback
    logs = tmp_path / "logs"
    logs.mkdir()
    lines = []
    for request in range(200):
        # (a logger line that prints the traceback after its message, then Python's own)
        lines += [(f"[{stamp(request // 50)}] Error in request {request:032x}: Traceback "
                   "(most recent call last):"),
                  ('  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/entrypoints/'
                   'http_server.py", line 512, in generate_request'),
                  ("    ret = await _global_state.tokenizer_manager.generate_request(obj, "
                   "request).__anext__()"),
                  (f"ValueError: The input ({9000 + request} tokens) is longer than the "
                   "model's context length (8192 tokens).")]
    (logs / "server.log").write_text("\n".join(lines) + "\n")
    seen: list[int] = []
    real = api.crowded_headers

    def spy(seconds: pl.DataFrame, attribution: Any) -> pl.DataFrame:
        seen.append(seconds.height)
        return real(seconds, attribution)

    monkeypatch.setattr(api, "crowded_headers", spy)
    analysis = api.analyze([logs], chunk_bytes=5000, memory_budget=0)
    try:
        assert analysis.tally.lines == 800
        assert sum(analysis.tally.evidence.values()) == 0  # (no process named)
    finally:
        if analysis.workspace is not None:
            analysis.workspace.close()
    assert 4 <= seen[0] <= 8  # 4 seconds (a second cut between two chunks: twice)


def heartbeat(rank: int, second: int, work: int) -> str:
    # (a torch line with a rank tag and counters but no stem: an event row for its tag only)
    return (f"[rank{rank}]:[I1129 10:{second // 60:02d}:{second % 60:02d}.123456789 "
            f"ProcessGroupNCCL.cpp:1785] [PG ID 2 PG GUID 3(tp:device) Rank {rank}] NCCL "
            f"watchdog heartbeat: last enqueued NCCL work: {work}, last completed NCCL work: "
            f"{work}.")


def timeout(rank: int, second: int, seq: int) -> str:
    return (f"[rank{rank}]:[E1129 10:{second // 60:02d}:{second % 60:02d}.500000000 "
            f"ProcessGroupNCCL.cpp:632] [PG ID 2 PG GUID 3(tp:device) Rank {rank}] Watchdog "
            f"caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, "
            "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600010 milliseconds before "
            "timing out.")


def test_rows_only_a_rank_tag_made_events_are_cut_whatever_their_counters(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A heartbeat a second per rank for 10 minutes (counters rising): the rules read such
    rows only for who wrote them and when, so each rank's are cut like repeats; the timeout
    lines that differ only in their SeqNum are kept, all of them (the rules read it)."""
    logs = tmp_path / "logs"
    logs.mkdir()
    for rank in range(4):
        lines = [f"[2026-11-29 10:00:00 TP{rank}] Init torch distributed begin."]
        lines += [heartbeat(rank, s, s // 3) for s in range(600)]
        if rank != 3:  # (rank 3 hangs: the others time out on each of 100 collectives)
            lines += [timeout(rank, 600 + s // 20, 200 + s) for s in range(100)]
        (logs / f"tp{rank}.log").write_text("\n".join(lines) + "\n")
    (tmp_path / "args.json").write_text(json.dumps({"tp_size": 4}))
    report, events = diagnosed(logs, monkeypatch)
    with monkeypatch.context() as patch:
        patch.setattr(context, "THIN_FIRST", 10**9)
        every, all_rows = diagnosed(logs, monkeypatch)
    assert report == every  # the same findings, counts, evidence and times
    assert all_rows.height == 4 * 600 + 3 * 100 + 4
    beats = events.filter(pl.col("text").str.contains("heartbeat", literal=True))
    assert not beats["_said"].any()
    assert lines_in(beats) == 4 * 600
    assert beats.group_by("proc").len()["len"].max() <= context.THIN_FIRST + context.THIN_LAST + 2
    timeouts = events.filter(pl.col("text").str.contains("Watchdog caught", literal=True))
    assert timeouts["_said"].all() and timeouts.height == 300
    hang = next(f for f in report["findings"] if f["kind"] == "collective-hang")
    assert [p["world_rank"] for p in hang["processes"]] == [3]
