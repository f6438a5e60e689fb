"""Bounded memory must not change answers: a log set analysed in tiny chunks (files cut
mid-record, mid-traceback, before their first timestamp) gives the same timeline, detail and
findings as one chunk."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from logcorr import api, stream
from logcorr import start as reading
from logcorr.api import Analysis, analyze

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "analyze"
SCENARIOS = sorted(p for p in ROOT.iterdir() if (p / "logs").is_dir())


def document(analysis: Analysis) -> str:
    return json.dumps(analysis.report(), sort_keys=True, default=str)


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
@pytest.mark.parametrize(("chunk_bytes", "budget", "threads", "keep_parsed"),
                         [(1, None, 1, reading.KEEP_PARSED), (700, 0, 1, reading.KEEP_PARSED),
                          (700, 0, 2, reading.KEEP_PARSED), (2000, 3000, 2, 3000)])
def test_chunk_size_changes_nothing(path: Path, chunk_bytes: int, budget: int | None,
                                    threads: int, keep_parsed: int,
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Any chunk size, and chunks and runs held in memory, spilled (budget 0) or some of
    each, on one of the core's workers or two, with pass 1's parse kept for pass 2 (all of
    it, or the chunks within 3,000 bytes), give the same answers as one chunk on one, parsed
    again in pass 2."""
    monkeypatch.setattr(reading, "KEEP_PARSED", 0)
    whole = analyze([path / "logs"], config=path / "args.json", threads=1)
    monkeypatch.setattr(reading, "KEEP_PARSED", keep_parsed)
    chunked = analyze([path / "logs"], config=path / "args.json", chunk_bytes=chunk_bytes,
                      memory_budget=budget, threads=threads)
    spilled = {p.path is not None for r in chunked.runs for p in r.pieces}
    if budget in (None, 0):
        assert spilled == {budget == 0}
    assert sum(len(r.pieces) for r in chunked.runs) > len(whole.runs)  # it was cut up
    assert chunked.timeline.equals(whole.timeline)
    assert chunked.detail.equals(whole.detail)
    assert document(chunked) == document(whole)
    assert chunked.contradictions == whole.contradictions


def test_untimed_file_start_takes_the_first_time_across_chunks(tmp_path: Path) -> None:
    """A file whose opening lines carry no time keeps them just before its first timed line,
    even when the time only comes chunks later."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a.log").write_text("\n".join(
        ["plain opening line"] * 50 + ["[2026-11-29 10:00:05 TP0] late"]) + "\n")
    (logs / "b.log").write_text("[2026-11-29 10:00:01 TP1] early\n"
                                "[2026-11-29 10:00:09 TP1] later\n")
    whole = analyze([logs]).timeline
    chunked = analyze([logs], chunk_bytes=64).timeline
    assert chunked.equals(whole)
    assert chunked["text"].to_list()[0] == "[2026-11-29 10:00:01 TP1] early"
    assert chunked.filter(pl.col("file") == "a.log")["order"].to_list() == list(range(1, 52))


def test_rows_waiting_for_a_first_time_are_stored_like_the_chunks(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The untimed opening rows of a file are stored (spilled, with a budget of 0) while they
    wait for its first time, not held in memory: an NCCL debug file has no time at all. The
    timeline is the same as in one chunk."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "nccl.node0.4000.log").write_text("".join(
        f"node0:4000:4007 [0] NCCL INFO AllReduce: opCount {i:x} sendbuff 0x7f3a0000{i:04x} "
        f"recvbuff 0x7f3b0000{i:04x} count 4096 datatype 7 op 0 root 0 comm 0x55d0c0a00000 "
        "[nranks=8] stream 0x55d0c1b20000\n" for i in range(60)))
    (logs / "a.log").write_text("\n".join(
        ["plain opening line"] * 80 + ["[2026-11-29 10:00:05 TP0] late"]) + "\n")
    (logs / "b.log").write_text("[2026-11-29 10:00:01 TP1] early\n")
    stems: list[str] = []
    write = stream.Workspace.write

    def spy(self: stream.Workspace, frame: pl.DataFrame, stem: str) -> stream.Piece:
        stems.append(stem)
        return write(self, frame, stem)

    whole = analyze([logs])
    monkeypatch.setattr(stream.Workspace, "write", spy)
    chunked = analyze([logs], chunk_bytes=300, memory_budget=0)
    assert stems.count("pending") > 10  # both files' waiting rows, a piece per chunk
    assert chunked.timeline.equals(whole.timeline)
    assert document(chunked) == document(whole)
    assert chunked.timeline.filter(pl.col("file") == "a.log")["order"].to_list() == \
        list(range(1, 82))


def test_head_and_tail_without_a_merge_match_the_merge(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The timeline's head and tail come from the rows kept as the chunks were written, as
    many as the terminal shows for the whole set, however many runs the chunks make."""
    monkeypatch.setattr(api, "KEEP_ROWS", 30)
    logs = tmp_path / "logs"
    logs.mkdir()
    for node in range(3):
        (logs / f"n{node}.log").write_text("".join(
            f"[2026-11-29 10:{m // 60:02d}:{m % 60:02d} TP{node}] step {m}\n"
            for m in range(node, 600, 3)))
    analysis = analyze([logs], chunk_bytes=2000)
    timeline = analysis.timeline
    assert len(analysis.runs) == 3  # (a run's own ends would be 3 x 60 rows)
    assert analysis.ends is not None and analysis.ends.height == 60
    assert analysis.head(25).equals(timeline.head(25))
    assert analysis.tail(25).equals(timeline.tail(25))


def test_the_ends_take_only_the_rows_that_can_be_among_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Sorted chunks offered to the timeline's ends (three files read one after the other,
    each over the whole time range): once `keep` rows from each end are held, the chunks of
    the later files give none but their first and last (nothing copied), and the ends equal
    those of one sort of every row."""
    copied: list[set[int]] = []
    real = api.compact

    def counting(frame: pl.DataFrame) -> pl.DataFrame:
        copied.append(set(frame.get_column("file_id").to_list()))
        return real(frame)

    monkeypatch.setattr(api, "compact", counting)
    keep = 5
    kept = api._Kept(keep)
    frames = []
    for file_id in range(3):
        keys = list(range(file_id, 3000, 3))
        for start in range(0, len(keys), 50):
            chunk = keys[start:start + 50]
            frame = pl.DataFrame({"_sk": chunk, "file_id": [file_id] * len(chunk),
                                  "line": [k // 3 + 1 for k in chunk], "part": [0] * len(chunk)},
                                 schema={"_sk": pl.Int64, "file_id": pl.UInt32,
                                         "line": pl.UInt32, "part": pl.UInt16})
            frames.append(frame)
            kept.offer(frame)
    whole = pl.concat(frames).sort(stream.SORT_COLUMNS)
    ends = kept.rows()
    assert ends.equals(pl.concat([whole.head(keep), whole.tail(keep)]))
    later = [files for files in copied if files and files <= {1, 2}]
    assert 0 < len(later) <= 4  # (of their 40 chunks: the first and last of each file)


def test_merge_gives_the_global_order_in_bounded_batches(monkeypatch: pytest.MonkeyPatch
                                                         ) -> None:
    """Runs that overlap in time merge into the order of one global sort, and no batch is
    larger than BATCH_ROWS even when every buffered row could be emitted at once."""
    monkeypatch.setattr(stream, "BATCH_ROWS", 50)
    workspace = stream.Workspace()
    try:
        runs: list[stream.Run] = []
        frames = []
        for file_id, (start, step) in enumerate([(0, 3), (1, 2), (5, 7), (0, 1)]):
            keys = list(range(start, start + step * 300, step))
            frame = pl.DataFrame({"_sk": keys, "file_id": [file_id] * 300,
                                  "line": list(range(300)), "part": [0] * 300},
                                 schema={"_sk": pl.Int64, "file_id": pl.UInt32,
                                         "line": pl.UInt32, "part": pl.UInt16})
            frames.append(frame)
            stream.write_run(workspace, frame, runs, rows=40)
        batches = list(stream.merge(runs))
        expected = pl.concat(frames).sort(stream.SORT_COLUMNS)
        assert len(runs) == 4
        assert max(b.height for b in batches) <= 50
        assert pl.concat(batches).equals(expected)
    finally:
        workspace.close()


def test_count_at_most_counts_rows_up_to_a_key_that_ties_on_leading_columns() -> None:
    """The merge's binary search compares whole keys: rows that tie on time (and file) are
    ordered by line and part."""
    rows = pl.DataFrame({"_sk": [1, 5, 5, 5, 5, 5, 9, stream.NO_TIME],
                         "file_id": [0, 0, 1, 1, 1, 2, 0, 0],
                         "line": [1, 2, 3, 4, 4, 1, 5, 6],
                         "part": [0, 0, 0, 0, 1, 0, 0, 0]},
                        schema={"_sk": pl.Int64, "file_id": pl.UInt32, "line": pl.UInt32,
                                "part": pl.UInt16})
    keys = [tuple(r) for r in rows.iter_rows()]
    bounds = [(0, 0, 0, 0), (5, 1, 4, 0), (5, 1, 4, 1), (5, 1, 3, 9), (5, 3, 0, 0),
              (9, 0, 5, 0), (stream.NO_TIME, 0, 6, 0), (stream.NO_TIME, 9, 9, 9)]
    for bound in bounds:
        assert stream.count_at_most(rows, bound) == sum(k <= bound for k in keys), bound


def test_wrapper_streams_carry_their_open_records_across_chunks(tmp_path: Path) -> None:
    """Two pods' tracebacks interleaved in one `kubectl logs --prefix` file: every line goes
    on with its own pod's record whatever the chunk boundaries (each stream's open record is
    carried into the next chunk)."""
    lines = []
    for n in range(3):
        lines += [
            f"[pod/sglang-1/sglang] [2025-09-09 08:45:4{n} TP10] Scheduler hit an exception: "
            "Traceback (most recent call last):",
            f"[pod/sglang-0/sglang] [2025-09-09 08:45:4{n} TP2] Scheduler hit an exception: "
            "Traceback (most recent call last):",
            '[pod/sglang-1/sglang]   File "/sgl/scheduler.py", line 2912, in run',
            "(SGLangEngine pid=7) plain",
            '[pod/sglang-0/sglang]   File "/sgl/scheduler.py", line 2912, in run',
            "[pod/sglang-1/sglang] RuntimeError: ten",
            "[pod/sglang-0/sglang] RuntimeError: two",
        ]
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "all.log").write_text("\n".join(lines) + "\n")
    config = tmp_path / "args.json"
    config.write_text(json.dumps({"tp_size": 16, "nnodes": 2}))
    whole = analyze([logs], config=config).detail
    assert whole.get_column("world_rank").to_list()[:7] == [10, 2, 10, None, 2, 10, 2]
    for chunk_bytes in (1, 150, 400):
        cut = analyze([logs], config=config, chunk_bytes=chunk_bytes).detail
        assert cut.equals(whole), chunk_bytes


def test_a_line_announced_by_the_previous_chunk_stays_in_its_record(tmp_path: Path) -> None:
    """`Pyspy dump for PID 61 (…):` ends one chunk and announces the dump of the next; a
    `Traceback` after a line ending with `:` is chained the same way. With one line a chunk,
    every announcement crosses a chunk boundary."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "s.log").write_text("\n".join([
        "[2026-01-10 10:00:40 TP4] Pyspy dump for PID 61 (py-spy dump --native --pid 61):",
        "Process 61: sglang::scheduler_TP4",
        'Thread 61 (idle): "MainThread"',
        "[2026-01-10 10:00:41 TP3] Exception in run_scheduler_process:",
        "",
        "Traceback (most recent call last):",
        "RuntimeError: boom",
    ]) + "\n")
    config = tmp_path / "args.json"
    config.write_text(json.dumps({"tp_size": 8}))
    whole = analyze([logs], config=config).detail
    assert whole.get_column("world_rank").to_list() == [4, 4, 4, 3, 3, 3, 3]
    assert analyze([logs], config=config, chunk_bytes=1).detail.equals(whole)


def _decode_lines(rank: int, count: int) -> str:
    return "".join(f"[2026-11-29 10:{i // 60 % 60:02d}:{i % 60:02d} TP{rank}] Decode batch. "
                   f"#running-req: 8, #token: {1000 + i}, token usage: 0.05, "
                   "gen throughput (token/s): 400.00, #queue-req: 0\n" for i in range(count))


def test_large_files_start_their_own_chunks_and_keep_their_remainder(tmp_path: Path) -> None:
    """A large file starts a chunk of its own (so two large files share no chunk and their
    attribution runs side by side), and its short remainder goes with its last chunk."""
    from logcorr.ingest import discover, iter_line_chunks

    logs = tmp_path / "logs"
    logs.mkdir()
    chunk = 4000
    (logs / "a.log").write_text(_decode_lines(0, 95))  # 3 chunks and a short remainder
    (logs / "b.log").write_text(_decode_lines(1, 3))  # small: gathered
    (logs / "c.log").write_text(_decode_lines(2, 95))
    sources, _ = discover([logs], [])
    names = {s.file_id: s.display for s in sources}
    batches = list(iter_line_chunks(sources, chunk))
    spans = [(names[int(b["file_id"][0])], int(b["line"][0]), names[int(b["file_id"][-1])],
              int(b["line"][-1])) for b in batches]
    # (each block holds just under 4,000 bytes of whole lines; a.log's last 1,205 bytes, under
    # half a chunk, go with its third block; b.log is alone: c.log starts a chunk of its own)
    assert spans == [("a.log", 1, "a.log", 28), ("a.log", 29, "a.log", 57),
                     ("a.log", 58, "a.log", 95), ("b.log", 1, "b.log", 3),
                     ("c.log", 1, "c.log", 28), ("c.log", 29, "c.log", 57),
                     ("c.log", 58, "c.log", 95)]


def test_large_sets_spill_everything_small_ones_stay_in_memory(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Without LOGCORR_MEMORY_BUDGET, a set whose chunks fit the budget is held in memory and
    a larger one spills every chunk and run; the variable, when set, is the budget."""
    monkeypatch.delenv("LOGCORR_MEMORY_BUDGET", raising=False)
    assert stream.memory_budget_for(1 << 20) == stream.MEMORY_BUDGET
    assert stream.memory_budget_for(1 << 30) == 0
    monkeypatch.setenv("LOGCORR_MEMORY_BUDGET", "64m")
    assert stream.memory_budget_for(1 << 30) == 64 << 20
    monkeypatch.delenv("LOGCORR_MEMORY_BUDGET")
    path = SCENARIOS[0]
    small = analyze([path / "logs"], config=path / "args.json")
    monkeypatch.setattr(stream, "MEMORY_PER_BYTE", 1 << 30)  # the same logs count as large
    large = analyze([path / "logs"], config=path / "args.json")
    assert {p.path is None for r in small.runs for p in r.pieces} == {True}
    assert {p.path is not None for r in large.runs for p in r.pieces} == {True}
    assert large.timeline.equals(small.timeline)


def test_sorted_by_key_sorts_only_what_is_out_of_order() -> None:
    """A chunk already in timeline-key order is kept as it is; any pair out of order, on any
    key column (ties on the earlier ones), is sorted."""
    rows = [(5, 1, 9, 0), (5, 2, 1, 0), (5, 2, 1, 1), (7, 1, 1, 0), (stream.NO_TIME, 1, 2, 0)]
    ordered = pl.DataFrame(rows, schema={"_sk": pl.Int64, "file_id": pl.UInt32,
                                         "line": pl.UInt32, "part": pl.UInt16}, orient="row")
    assert stream.sorted_by_key(ordered) is ordered
    for i in range(len(rows) - 1):  # swap each neighbouring pair: one key column decides it
        swapped = pl.concat([ordered[:i], ordered[i + 1:i + 2], ordered[i:i + 1],
                             ordered[i + 2:]])
        assert stream.sorted_by_key(swapped).equals(ordered)


def test_the_diagnosis_event_rows_spill_with_the_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """What the attribution pass keeps of each chunk for the diagnosis (its event rows: NCCL
    communicator lines, torch watchdog lines, stems) grows with the set: up to EVENT_BYTES it
    is held (a small set writes none), past it the rest goes to disk with the chunks, not
    into memory, and the findings stay the same."""
    written: list[tuple[str, bool]] = []
    write = stream.Workspace.write

    def spy(self: stream.Workspace, frame: pl.DataFrame, stem: str) -> stream.Piece:
        piece = write(self, frame, stem)
        written.append((stem, piece.in_memory))
        return piece

    path = ROOT / "tp16-dpattn8-ep-hang-per-node"
    monkeypatch.setattr(stream.Workspace, "write", spy)
    held = analyze([path / "logs"], config=path / "args.json", chunk_bytes=2000,
                   memory_budget=0)
    assert held.findings and not [stem for stem, _ in written if stem == "events"]
    monkeypatch.setattr(api, "EVENT_BYTES", 1000)
    spilled = analyze([path / "logs"], config=path / "args.json", chunk_bytes=2000,
                      memory_budget=0)
    events = [in_memory for stem, in_memory in written if stem == "events"]
    assert len(events) > 1 and not any(events)
    assert document(spilled) == document(held)


def test_the_lean_view_keeps_the_ends_of_files_that_wait_for_their_first_time(
        tmp_path: Path) -> None:
    """The default view keeps only the timeline's first and last rows: of a file with no time
    yet it keeps its first and last rows alone (they all take one place), and still shows the
    same head and tail as the whole timeline, whether the file's time comes late or never."""
    logs = tmp_path / "logs"
    logs.mkdir()
    # NCCL debug output (no time at all), and a file whose time comes after 400 lines
    (logs / "nccl-debug.log").write_text("".join(
        f"h0:10:11 [0] NCCL INFO AllReduce: opCount {n:x} sendbuff 0x1 count 8\n"
        for n in range(900)))
    (logs / "late.log").write_text("".join(f"  warming up {n}\n" for n in range(400))
                                   + "[2026-11-29 10:00:05 TP0] Load weight begin.\n"
                                   + "[2026-11-29 10:00:06 TP0] Load weight end.\n")
    (logs / "tp1.log").write_text("".join(
        f"[2026-11-29 10:00:{s:02d} TP1] Decode batch. #running-req: 1\n" for s in range(60)))
    full = analyze([logs], threads=1)
    for chunk in (None, 300):
        lean = analyze([logs], keep=25, chunk_bytes=chunk, threads=1)
        assert lean.kept is not None and lean.kept.height < full.tally.lines
        assert lean.head(25).equals(full.head(25))
        assert lean.tail(25).equals(full.tail(25))
        assert document(lean) == document(full)
