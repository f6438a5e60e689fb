"""Plain torch-distributed jobs and other launchers without a launch config (issue 31): one
torch world unless the logs say otherwise, launchers as evidence, process death as a crash,
wrappers behind terminal control sequences.

fixtures/jobs/*/ (benchmarks/generate_jobs.py) hold logs/, truth.jsonl (the true world rank of
every physical line) and scenario.json (the expected error finding, its culprits as world ranks,
words its summary holds); a new folder is a new case. The log sets below are built from the
same line shapes for the rules' edges."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from logcorr.api import Analysis, analyze
from logcorr.cli import main as cli_main

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "jobs"
CASES = sorted(p for p in ROOT.iterdir() if (p / "scenario.json").exists())
ESC = "\x1b"


def truth(case: Path) -> pl.DataFrame:
    rows = [json.loads(line) for line in (case / "truth.jsonl").read_text().splitlines()]
    return pl.DataFrame(rows, schema={"file": pl.String, "line": pl.UInt32, "replica": pl.Int32,
                                      "world_rank": pl.Int32})


def write(folder: Path, name: str, lines: list[str]) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines))
    return folder


def errors(analysis: Analysis) -> list[Any]:
    return [f for f in analysis.findings if f.severity == "error"]


def barrier(rank: int, second: int = 1) -> str:
    return (f"[rank{rank}]:[W1129 10:00:{second:02d}.000000000 ProcessGroupNCCL.cpp:4561] [PG ID 0 "
            f"PG GUID 0(default_pg) Rank {rank}]  using GPU {rank % 8} to perform barrier as "
            "devices used by this process are currently unknown.")


def uncaught(rank: int, error: str = "RuntimeError: dead") -> list[str]:
    return [f"[rank{rank}]: Traceback (most recent call last):",
            f'[rank{rank}]:   File "/workspace/train.py", line 40, in <module>',
            f"[rank{rank}]:     main()", f"[rank{rank}]: {error}"]


@pytest.fixture(scope="module", params=CASES, ids=[c.name for c in CASES])
def case(request: pytest.FixtureRequest) -> tuple[Path, Analysis]:
    path: Path = request.param
    return path, analyze([path / "logs"])


class TestJobFixtures:
    """Each generated job: every line once and attributed to its true writer (every line a
    rank wrote, none to another), the world said to be assumed, and the expected verdict."""

    def test_every_line_attributed_to_its_writer(self, case: tuple[Path, Analysis]) -> None:
        path, analysis = case
        expected = json.loads((path / "scenario.json").read_text())
        timeline, true = analysis.timeline, truth(path)
        assert timeline.select(pl.struct("file", "line").n_unique()).item() == true.height
        merged = timeline.join(true, on=["file", "line"], suffix="_true")
        wrong = merged.filter(pl.col("world_rank").is_not_null() & (
            pl.col("world_rank") != pl.col("world_rank_true")).fill_null(True))
        assert wrong.height == 0, wrong.select("file", "line", "world_rank", "world_rank_true",
                                               "evidence", "text").head(5)
        missed = merged.filter(pl.col("world_rank_true").is_not_null()
                               & pl.col("world_rank").is_null())
        assert missed.height == 0, missed.select("file", "line", "text", "evidence").head(5)
        # (a torch job's rank is no SGLang scheduler)
        assert set(merged.filter(pl.col("world_rank").is_not_null())["role"]) <= {None}
        ranked = true["world_rank"].drop_nulls().len() > 0
        kinds = [c["kind"] for c in analysis.contradictions]
        assert ("torch-world-assumed" in kinds) == ranked
        if expected.get("stream"):  # (compose: every line through its service)
            assert timeline["stream"].null_count() == 0, timeline.filter(
                pl.col("stream").is_null()).select("line", "text").head(3)

    def test_verdict(self, case: tuple[Path, Analysis]) -> None:
        path, analysis = case
        expected = json.loads((path / "scenario.json").read_text())
        found = errors(analysis)
        if expected["finding"] is None:
            assert found == [], [f.summary for f in found]
            # (no crash because the traceback's process went on, not because it is unknown)
            handled = analysis.timeline.filter(pl.col("text").str.contains("Traceback"))
            assert handled["world_rank"].to_list() == [expected["handled"]]
            return
        assert [f.kind for f in found] == [expected["finding"]], [f.summary for f in found]
        assert sorted(p["world_rank"] for p in found[0].processes) == expected["culprits"]
        for words in expected["summary"]:
            assert words in found[0].summary, found[0].summary
        if expected.get("stream"):
            assert found[0].stream == expected["stream"]


def test_check_accepts_the_job_fixtures(capsys: pytest.CaptureFixture[str]) -> None:
    """`logcorr check fixtures/jobs/*` matches (the expected timelines and reports)."""
    assert cli_main(["check", *map(str, CASES)]) == 0


# --------------------------------------------------------------------------- one torch world


class TestOneTorchWorld:
    """Without a launch config a torch rank is a world rank, unless the logs say otherwise."""

    def test_rank_lines_take_their_world_rank(self, tmp_path: Path) -> None:
        """`180: [rank180]: Traceback …` and the default group's `Rank N` (the issue's first
        shape): world rank, evidence torch-rank, and a note in the header."""
        logs = write(tmp_path / "logs", "job.out", [
            f"180: {barrier(180)}", "180: [rank180]: Traceback (most recent call last):",
            "181: [E1129 10:00:02.000000000 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID 0("
            "default_pg) Rank 181] Exception (either an error or timeout) detected by watchdog "
            "at work: 12, last enqueued NCCL work: 12, last completed NCCL work: 11."])
        analysis = analyze([logs])
        rows = analysis.timeline.sort("line")
        assert rows["world_rank"].to_list() == [180, 180, 181]
        assert set(rows["evidence"].to_list()) == {"torch-rank"}
        note = next(c for c in analysis.contradictions if c["kind"] == "torch-world-assumed")
        assert note["note"] and "one torch world" in str(note["detail"])

    def test_two_hosts_claiming_a_rank_at_once_withdraw_it(self, tmp_path: Path) -> None:
        """Rank 0 at the same time on two hosts (two native-DP replicas the logs do not show
        as such): rank 0 is withdrawn and reported, rank 1 keeps its world rank."""
        logs = tmp_path / "logs"
        write(logs, "node0.log", ["gpu-node-0:4000:4000 [0] NCCL INFO Bootstrap: Using eth0",
                                  barrier(0, 1), barrier(0, 5), barrier(1, 1)])
        write(logs, "node1.log", ["gpu-node-1:5000:5000 [0] NCCL INFO Bootstrap: Using eth0",
                                  barrier(0, 2), barrier(0, 3)])
        analysis = analyze([logs])
        ranks = analysis.timeline.filter(pl.col("source") == "torch").sort("file", "line")
        assert ranks["world_rank"].to_list() == [None, None, 1, None, None]
        withdrawn = next(c for c in analysis.contradictions
                         if c["kind"] == "torch-rank-several-processes")
        assert "torch rank(s) 0 " in str(withdrawn["detail"]) and "gpu-node-1" in str(
            withdrawn["detail"])

    def test_a_rank_restarted_later_elsewhere_keeps_its_world_rank(self, tmp_path: Path) -> None:
        """An elastic restart: rank 0 on gpu-node-0 until 10:00:05, on gpu-node-1 from
        10:10:00 (not at the same time): still one world rank 0."""
        logs = tmp_path / "logs"
        write(logs, "node0.log", ["gpu-node-0:4000:4000 [0] NCCL INFO Bootstrap: Using eth0",
                                  barrier(0, 1), barrier(0, 5), *uncaught(0)])
        write(logs, "node1.log", ["gpu-node-1:5000:5000 [0] NCCL INFO Bootstrap: Using eth0",
                                  barrier(0, 1).replace("10:00:01", "10:10:00")])
        analysis = analyze([logs])
        ranks = analysis.timeline.filter(pl.col("text").str.starts_with("[rank0]"))
        assert ranks["world_rank"].to_list() == [0] * 7
        assert "torch-rank-several-processes" not in [c["kind"] for c in analysis.contradictions]

    @pytest.mark.parametrize(("prefixes", "assumed"), [
        (["DP0 TP1"], True),  # (one DP rank per TP rank: attention DP, or a router's label)
        (["DP0 TP1", "DP1 TP1"], False),  # (TP1 twice: native-DP replicas, as before)
        (["TP1"], True),
        (["PP1 TP1"], False),  # (a stage's world rank needs the TP size: nothing assumed)
    ])
    def test_replicas_and_stages_keep_their_rules(self, tmp_path: Path, prefixes: list[str],
                                                  assumed: bool) -> None:
        """Native-DP replicas (a TP rank with two DP ranks) or pipeline stages in the prefix:
        no world is assumed, torch's `[rank1]` names no process; otherwise it is world rank 1,
        the prefix's process."""
        logs = write(tmp_path / "logs", "node0.log", [
            *(f"[2026-11-29 10:00:00 {p}] Load weight begin. avail mem=70.00 GB"
              for p in prefixes), barrier(1)])
        analysis = analyze([logs])
        torch_line = analysis.timeline.filter(pl.col("source") == "torch").row(0, named=True)
        assert torch_line["world_rank"] == (1 if assumed else None)
        assert torch_line["tp_rank"] == (1 if assumed else None)
        kinds = [c["kind"] for c in analysis.contradictions]
        assert ("torch-world-assumed" in kinds) == assumed

    def test_an_sglang_scheduler_takes_its_torch_rank(self, tmp_path: Path) -> None:
        """A per-rank file of `TP3` lines and `[rank3]` lines (no config): one process, world
        rank 3, still the file's own process (its plain lines are its)."""
        logs = tmp_path / "logs"
        for rank in (2, 3):
            write(logs, f"rank{rank}.log", [
                f"[2026-11-29 10:00:00 TP{rank}] Load weight begin. avail mem=70.00 GB",
                barrier(rank), "Cache shape torch.Size([4096, 8, 128])"])
        rows = analyze([logs]).timeline.filter(pl.col("file") == "rank3.log").sort("line")
        assert rows["world_rank"].to_list() == [3, 3, 3]
        assert rows["tp_rank"].to_list() == [3, 3, 3]
        assert rows["evidence"].to_list()[:2] == ["prefix", "torch-rank"]
        assert rows["role"].to_list() == ["scheduler"] * 3


class TestLaunchers:
    """srun tasks, torchrun's labels and torch elastic's summary as evidence."""

    def test_srun_task_is_a_rank_only_one_task_per_rank(self, tmp_path: Path) -> None:
        """Task N prints rank N only: its plain lines are rank N's (evidence srun-task). srun
        running torchrun (task 0 prints ranks 0 and 1): a task is no rank."""
        one = write(tmp_path / "one", "job.out", [f"{r}: {barrier(r)}" for r in range(2)]
                    + [f"{r}: step 10 loss 2.0" for r in range(2)])
        rows = analyze([one]).timeline.sort("line")
        assert rows["world_rank"].to_list() == [0, 1, 0, 1]
        assert rows["evidence"].to_list()[2:] == ["srun-task", "srun-task"]
        nested = write(tmp_path / "nested", "job.out", [f"0: {barrier(r)}" for r in range(2)]
                       + ["0: step 10 loss 2.0"])
        rows = analyze([nested]).timeline.sort("line")
        assert rows["world_rank"].to_list() == [0, 1, None]

    def test_torchrun_tee_label_is_the_stream(self, tmp_path: Path) -> None:
        logs = write(tmp_path / "logs", "node1.log", [f"[default3]:{barrier(11)}"])
        row = analyze([logs]).timeline.row(0, named=True)
        assert (row["stream"], row["world_rank"]) == ("default3", 11)

    def test_the_elastic_summary_alone_names_the_first_failure(self, tmp_path: Path) -> None:
        """The workers' output is elsewhere (`--log-dir`): the agent's ChildFailedError summary
        names the root cause's rank, PID and host; the other failure is listed."""
        logs = write(tmp_path / "logs", "agent.log", [
            "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: ",
            "=" * 60, "train.py FAILED", "-" * 60, "Failures:", "[1]:",
            "  time      : 2026-11-29_10:05:04", "  host      : gpu-node-1",
            "  rank      : 12 (local_rank: 4)", "  exitcode  : -15 (pid: 5015)",
            "  error_file: <N/A>", "  traceback : Signal 15 (SIGTERM) received by PID 5015",
            "-" * 60, "Root Cause (first observed failure):", "[0]:",
            "  time      : 2026-11-29_10:05:03", "  host      : gpu-node-1",
            "  rank      : 11 (local_rank: 3)", "  exitcode  : -9 (pid: 5014)",
            "  error_file: <N/A>", "  traceback : Signal 9 (SIGKILL) received by PID 5014",
            "=" * 60])
        found = errors(analyze([logs]))
        assert [f.kind for f in found] == ["crash"]
        person = found[0].processes[0]
        assert (person["world_rank"], person["pid"], person["host"]) == (11, 5014, "gpu-node-1")
        assert "exit code -9 (SIGKILL)" in found[0].summary
        assert "world rank(s) 12" in found[0].summary


class TestProcessDeath:
    """An uncaught exception is a crash of its process; a handled one is not."""

    def test_a_bare_traceback_at_the_end_of_a_process_output(self, tmp_path: Path) -> None:
        """`Traceback … RuntimeError: dead` ending a file that names no process: a crash
        with no culprit, rather than nothing."""
        logs = write(tmp_path / "logs", "worker.log", [
            "step 1 loss 2.0", "Traceback (most recent call last):",
            '  File "/w/train.py", line 3, in <module>', "    main()", "RuntimeError: dead"])
        found = errors(analyze([logs]))
        assert [f.kind for f in found] == ["crash"]
        assert "died of an uncaught exception: RuntimeError: dead" in found[0].summary

    @pytest.mark.parametrize("goes_on", [True, False])
    def test_a_traceback_followed_by_work_is_no_crash(self, tmp_path: Path, goes_on: bool
                                                      ) -> None:
        """Rank 0 prints a traceback and goes on (a step line of its own): no crash; without
        the step line, its death."""
        logs = write(tmp_path / "logs", "job.out", [
            f"0: {barrier(0)}", f"1: {barrier(1)}",
            *(f"0: {line}" for line in uncaught(0, "OSError: retry")),
            *(["0: [rank0]:[I1129 10:00:09.000000000 train.py:1] step 11 loss 1.9"] if goes_on
              else []), "1: [rank1]:[I1129 10:00:10.000000000 train.py:1] step 11 loss 1.9"])
        found = errors(analyze([logs]))
        assert [[p["world_rank"] for p in f.processes] for f in found] == ([] if goes_on
                                                                           else [[0]])

    def test_exit_noise_after_the_traceback_is_not_work(self, tmp_path: Path) -> None:
        """torch's `process group has NOT been destroyed` warning at exit, then srun's exit
        line and the step's cancel: rank 1 died of its exception; the launcher lines are
        cited."""
        logs = write(tmp_path / "logs", "job.out", [
            f"0: {barrier(0)}", f"1: {barrier(1)}", *(f"1: {line}" for line in uncaught(1)),
            "1: [rank1]:[W1129 10:00:03.000000000 ProcessGroupNCCL.cpp:1250] Warning: WARNING: "
            "process group has NOT been destroyed before we destruct ProcessGroupNCCL.",
            "srun: error: gpu-node-0: task 1: Exited with exit code 1",
            "slurmstepd: error: *** STEP 1745223.0 ON gpu-node-0 CANCELLED AT "
            "2026-11-29T10:00:05 ***"])
        found = errors(analyze([logs]))
        assert [p["world_rank"] for p in found[0].processes] == [1]
        cited = {e["line"] for e in found[0].evidence}
        assert {3, 8, 9} <= cited

    def test_the_earliest_death_is_the_root(self, tmp_path: Path) -> None:
        """Two ranks die of different exceptions seconds apart: the first is the root, the
        second failed after it."""
        logs = write(tmp_path / "logs", "job.out", [
            f"0: {barrier(0, 1)}", f"1: {barrier(1, 1)}",
            *(f"1: {line}" for line in uncaught(1, "ValueError: bad batch")),
            f"0: {barrier(0, 9)}", *(f"0: {line}" for line in uncaught(0, "RuntimeError: peer"))])
        found = errors(analyze([logs]))
        assert [p["world_rank"] for p in found[0].processes] == [1]
        assert [p["world_rank"] for p in found[0].waiting] == [0]
        assert "ValueError: bad batch" in found[0].summary

    @pytest.mark.parametrize(("error", "crash"), [("KeyboardInterrupt", False),
                                                   ("RuntimeError: dead", True)])
    def test_ctrl_c_is_no_death(self, tmp_path: Path, error: str, crash: bool) -> None:
        logs = write(tmp_path / "logs", "job.out", [
            f"0: {barrier(0)}", *(f"0: {line}" for line in uncaught(0, error))])
        assert [f.kind for f in errors(analyze([logs]))] == (["crash"] if crash else [])


def test_docstring_examples() -> None:
    """The worked examples in the rules' docstrings (rank claims, a world's processes, srun
    task lists, a summary's failure)."""
    import doctest

    from logcorr import torch_world
    from logcorr.diagnose import death
    for module in (torch_world, death):
        assert doctest.testmod(module).failed == 0


def test_compose_behind_control_sequences_names_the_service(tmp_path: Path) -> None:
    """`docker compose up` on a terminal: `ESC[2K` and the service's colour before `name  | `
    (issue 31): the service is the stream of every line, and the text is kept."""
    line = f"{ESC}[2K{ESC}[36msglang-1  | {ESC}[0m[2026-11-29 10:00:00 TP1] Load weight begin."
    logs = write(tmp_path / "logs", "compose.log", [line])
    row = analyze([logs]).timeline.row(0, named=True)
    assert (row["stream"], row["tp_rank"], row["text"]) == ("sglang-1", 1, line)
