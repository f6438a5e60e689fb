"""Property: in a file several processes write at once (their tracebacks, faulthandler dumps,
C++ aborts and py-spy dumps interleaved line by line with each other and with SGLang, torch,
NCCL and Gloo lines), every line comes out with its true writer or with none - never with
another process.

Each example writes a batch of generated files (benchmarks/interleave.py) and analyses them at
once: the files share nothing but the topology, so a batch is as many independent trials."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logcorr.api import analyze

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))
import interleave

FILES_PER_EXAMPLE = 125  # x 16 examples: 2,000 interleaved files


def _trial(folder: Path, seed: int, files: int, chunk_bytes: int | None = None,
           holes: bool = False) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(wrong rows, all rows) of one batch: rows given a process that did not write them.
    With `holes`, each file gets NUL runs of random length where real ones appear: before its
    text (a log truncated by copytruncate while the writer went on, or preallocated) and after
    it (a node that lost power)."""
    rows = interleave.write_set(folder, files, seed)
    if holes:
        _punch_holes(folder / "logs", random.Random(seed))
    truth = pl.DataFrame(rows, schema={"file": pl.String, "line": pl.UInt32,
                                       "truth": pl.Int32}, orient="row")
    timeline = analyze([folder / "logs"], config=folder / "args.json",
                       chunk_bytes=chunk_bytes).timeline
    joined = timeline.filter(pl.col("part") == 0).join(truth, on=["file", "line"])
    assert joined.height == len(rows)  # every line came out once
    wrong = joined.filter(pl.col("world_rank").is_not_null()
                          & (pl.col("world_rank") != pl.col("truth")))
    return wrong, joined


@settings(max_examples=16, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(min_value=0, max_value=2**31 - 1))
def test_no_line_gets_another_process(tmp_path_factory: object, seed: int) -> None:
    folder = tmp_path_factory.mktemp("shared")  # type: ignore[attr-defined]
    wrong, joined = _trial(folder, seed, FILES_PER_EXAMPLE)
    assert wrong.height == 0, wrong.select("file", "line", "world_rank", "truth", "text").head(5)
    # (not vacuous: most lines keep their writer)
    assert joined.filter(pl.col("world_rank").is_not_null()).height > joined.height // 3


def _punch_holes(logs: Path, rng: random.Random) -> None:
    for path in sorted(logs.iterdir()):
        path.write_bytes(b"\0" * rng.randrange(0, 70_000) + path.read_bytes()
                         + b"\0" * rng.randrange(0, 70_000))


@settings(max_examples=4, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(min_value=0, max_value=2**31 - 1))
def test_no_line_gets_another_process_through_nul_holes(tmp_path_factory: object,
                                                        seed: int) -> None:
    """The same with NUL runs before and after each file's text: the holes are content of the
    lines they sit in, and no line around them gets another writer."""
    folder = tmp_path_factory.mktemp("holes")  # type: ignore[attr-defined]
    wrong, joined = _trial(folder, seed, 40, holes=True)
    assert wrong.height == 0, wrong.select("file", "line", "world_rank", "truth", "text").head(5)
    assert joined.filter(pl.col("world_rank").is_not_null()).height > joined.height // 3


def test_small_chunks_give_the_same_answers(tmp_path: Path) -> None:
    """The open raw records, their processes and the blocks are carried from chunk to chunk:
    cut into chunks of a few lines, interleaved files come out the same."""
    seed = random.Random(7).randrange(2**31)
    whole = _trial(tmp_path / "whole", seed, 12)[1]
    chunked = _trial(tmp_path / "chunked", seed, 12, chunk_bytes=300)[1]
    assert chunked.select("file", "line", "world_rank", "evidence").equals(
        whole.select("file", "line", "world_rank", "evidence"))


def _dump(rank: int, pid: int, second: int) -> list[str]:
    """SGLang's watchdog dump as it logs it (`logger.error(f"Pyspy dump for PID {pid}:\\n"
    f"{result.stdout}")`): py-spy's blank line after `Python v…`, and the record's own blank
    line at its end (py-spy's last newline, then the logger's)."""
    return [f"[2026-11-29 10:10:{second:02d} TP{rank}] Pyspy dump for PID {pid}:",
            f"Process {pid}: sglang::scheduler_TP{rank}",
            "Python v3.12.3 (/usr/bin/python3.12)",
            "",
            f'Thread {pid} (idle): "MainThread"',
            "    all_reduce (torch/distributed/distributed_c10d.py:2501)",
            "    event_loop_overlap (sglang/srt/managers/scheduler.py:1012)",
            ""]


def test_blank_lines_past_the_end_of_a_dump_are_nobody_s(tmp_path: Path) -> None:
    """Two schedulers dump their stacks into one console at once. TP1's record reached the
    file in two writes (a pipe takes a long record in pieces): its last blank line lands inside
    TP0's dump, right after py-spy's own blank line; once TP0's record is over, TP1 prints two
    blank lines. py-spy writes a blank line only after its `Python v…` line, and the record ends
    with one: a blank line past those is past the dump's grammar and may be anybody's, so it is
    nobody's. Every other line keeps its writer."""
    logs = tmp_path / "logs"
    logs.mkdir()
    tp1 = _dump(1, 4322, 1)
    tp0 = _dump(0, 4321, 1)
    lines = [(line, 1) for line in tp1[:-1]] + [(line, 0) for line in tp0[:4]] + [("", 1)]
    lines += [(line, 0) for line in tp0[4:]] + [("", 1), ("", 1)]
    watchdog = ("[2026-11-29 10:10:02 TP0] Scheduler watchdog timeout "
                "(self.watchdog_timeout=300, self.soft=False)")
    lines += [(watchdog, 0)]
    (logs / "console.log").write_text("".join(line + "\n" for line, _ in lines))
    (tmp_path / "args.json").write_text('{"tp_size": 2}')
    detail = analyze([logs], config=tmp_path / "args.json", threads=1).detail
    got = detail.filter(pl.col("part") == 0).sort("line")
    assert got.height == len(lines)
    past = {12, 17, 18}  # (TP1's blank lines)
    for (text, writer), tagged, why, line in zip(
            lines, got["world_rank"], got["why"], got["line"], strict=True):
        if line in past:
            assert (tagged, why) == (None, "interleaved records"), (line, text)
        else:
            assert tagged == writer, (line, text, tagged, why)
