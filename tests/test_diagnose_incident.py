"""One incident, one verdict (issue 29): every error-class observation is the root, a
consequence folded under it, or an independent incident that says why; summaries open with
the culprit; member lists print as ranges; a fatal line's own rank tag names its process; a
culprit known only by its stream carries `stream`. Each log set is written here from the line
shapes of the fixtures (benchmarks/generate.py) and of SGLang 0.5.23 / torch 2.8."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from rich.console import Console
from test_diagnose_rules import batch, config, errors, ranks, sglang_watchdog, stamp, write

from logcorr.api import Analysis, analyze
from logcorr.render_timeline import findings_view

TP16_DPATTN = {"tp_size": 16, "dp_size": 8, "enable_dp_attention": True, "nnodes": 2,
               "ep_size": 16, "moe_a2a_backend": "deepep"}
PROGRESS_BAR = ("Loading safetensors checkpoint shards:  99% Completed | 161/163 "
                "[01:15<00:00,  2.24it/s]")


def pid(world_rank: int) -> int:
    return 3416000 + 7 * world_rank


def nccl_ready(node: int, world_rank: int, gpu: int, nranks: int) -> list[str]:
    """The rank's NCCL communicator init (its host and PID, as NCCL prints them)."""
    head = f"gpu-node-{node}:{pid(world_rank)}:{pid(world_rank)} [{gpu}] NCCL INFO"
    tail = (f"comm 0x{world_rank + 1:x}a0e0d37 rank {world_rank} nranks {nranks} cudaDev {gpu} "
            f"nvmlDev {gpu} busId {gpu + 1}a000 commId 0xf2a74de452e6b438")
    return [f"{head} ncclCommInitRank {tail} - Init START", f"{head} {tail} - Init COMPLETE"]


def timeout(rank: int, clock: str = "10:11:09") -> list[str]:
    """torch's watchdog timeout of tp-group member `rank` on SeqNum 9141."""
    head = f"[rank{rank}]:[E1129 {clock}.000000000 ProcessGroupNCCL.cpp"
    pg = f"[PG ID 2 PG GUID 3(tp:device) Rank {rank}]"
    return [f"{head}:607] {pg} Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9141,"
            " OpType=ALLREDUCE, NumelIn=19008, NumelOut=19008, Timeout(ms)=600000) ran for "
            "600071 milliseconds before timing out.",
            f"{head}:1785] {pg} Exception (either an error or timeout) detected by watchdog at "
            "work: 9141, last enqueued NCCL work: 9141, last completed NCCL work: 9140."]


def abort(rank: int) -> list[str]:
    """torch taking member `rank` down after its timeout, and Python's faulthandler."""
    what = (f"[PG ID 2 PG GUID 3(tp:device) Rank {rank}] Process group watchdog thread "
            f"terminated with exception: [Rank {rank}] Watchdog caught collective operation "
            "timeout: WorkNCCL(SeqNum=9141, OpType=ALLREDUCE, NumelIn=19008, NumelOut=19008, "
            "Timeout(ms)=600000) ran for 600071 milliseconds before timing out.")
    return [f"[rank{rank}]:[E1129 10:11:11.000000000 ProcessGroupNCCL.cpp:698] [Rank {rank}] To "
            "avoid data inconsistency, we are taking the entire process down.",
            "terminate called after throwing an instance of 'c10::DistBackendError'",
            f"  what():  {what}",
            "Exception raised from checkTimeout at /pytorch/torch/csrc/distributed/c10d/"
            "ProcessGroupNCCL.cpp:635 (most recent call first):", "",
            "Fatal Python error: Aborted", "",
            f"Thread 0x00007f5a9d{rank:06x} (most recent call first):", "  <no Python frame>"]


def exception(prefix: str, second: int) -> list[str]:
    return [f"[{stamp(second)} {prefix}] Scheduler hit an exception: Traceback (most recent call "
            "last):",
            '  File "/sgl/python/sglang/srt/managers/scheduler.py", line 2912, in '
            "run_scheduler_process",
            "RuntimeError: CUDA error: an illegal memory access was encountered"]


def main_quit(second: int) -> list[str]:
    return [f"[{stamp(second)}] Received sigquit from a child process. It usually means the "
            "child failed.",
            f"[{stamp(second)}] kill_process_tree called: parent_pid=31337, include_parent=True,"
            " pid=31337"]


def consequence(finding: Any, kind: str) -> dict[str, Any]:
    return next(c for c in finding.consequences if c["kind"] == kind)


def terminal(analysis: Analysis) -> str:
    console = Console(width=200, record=True, color_system=None, file=io.StringIO())
    console.print(findings_view(analysis))
    return console.export_text()


# --------------------------------------------------------------------------- teardown


def hang_with_teardown(folder: Path) -> Path:
    """TP16 with attention DP8 over two nodes, one file per node: world rank 9 never reaches
    ALLREDUCE SeqNum 9141; the 15 others time out and torch aborts each of them; node 0's main
    process sees scheduler_0 exit with -6 and kills the tree, node 1's reports each of its
    schedulers' exit codes."""
    logs = folder / "logs"
    for node in (0, 1):
        lines = []
        for rank in range(8 * node, 8 * node + 8):
            lines += nccl_ready(node, rank, rank % 8, 16)
            lines.append(batch(f"DP{rank // 2} TP{rank} EP{rank}", 60))
        for rank in range(8 * node, 8 * node + 8):
            lines += timeout(rank) if rank != 9 else []
        lines += [sglang_watchdog("DP4 TP9 EP9", 670)] if node == 1 else []
        for rank in range(8 * node, 8 * node + 8):
            lines += abort(rank) if rank != 9 else []
        if node == 0:
            lines += [f"[{stamp(672)}] Subprocess scheduler_0 (pid={pid(0)}) crashed with exit "
                      "code -6. Triggering SIGQUIT for cleanup...", *main_quit(672)]
        else:
            lines += [f"[{stamp(672)}] Scheduler or DataParallelController {pid(r)} terminated "
                      f"with {-9 if r == 9 else -6}" for r in range(8, 16)]
        write(logs, f"node{node}.log", lines)
    return logs


class TestTheTeardownOfAHang:
    """Aborts and exit codes after a group's timeout are the hang's teardown: consequences of
    the one collective-hang verdict, never a crash of their own."""

    def test_aborts_and_exit_codes_fold_into_the_hang(self, tmp_path: Path) -> None:
        found = analyze([hang_with_teardown(tmp_path)],
                        config=config(tmp_path, TP16_DPATTN)).findings
        [root] = errors(found)
        assert root.kind == "collective-hang" and root.role == "root"
        assert ranks(root.processes) == [9]
        assert ranks(root.waiting) == [r for r in range(16) if r != 9]
        assert [c["kind"] for c in root.consequences] == ["abort", "exit-code", "kill-cascade"]
        aborts = consequence(root, "abort")
        assert aborts["count"] == 30  # `terminate called` and `Fatal Python error` of 15
        assert aborts["nodes"] == [0, 1] and 1 <= len(aborts["samples"]) <= 3
        exits = consequence(root, "exit-code")
        assert exits["world_ranks"] == [0, *range(8, 16)]  # (named by the PID they give)
        assert "-6 (SIGABRT): 8, -9 (SIGKILL): 1" in exits["summary"]
        assert exits["first_ts"] == exits["last_ts"] == f"{DAY}T10:11:12"

    def test_aborts_in_per_rank_files_are_no_crash(self, tmp_path: Path) -> None:
        """TP8, one file per rank: rank 3 never reaches the collective; each other rank's
        file ends with torch's abort, attributed to it (and stamped by nothing)."""
        logs = tmp_path / "logs"
        for rank in range(8):
            lines = [batch(f"TP{rank}", 60)]
            lines += [*timeout(rank), *abort(rank)] if rank != 3 else []
            write(logs, f"rank{rank}.log", lines)
        found = analyze([logs], config=config(tmp_path, {"tp_size": 8})).findings
        [root] = errors(found)
        assert root.kind == "collective-hang" and ranks(root.processes) == [3]
        assert consequence(root, "abort")["world_ranks"] == [0, 1, 2, 4, 5, 6, 7]

    def test_an_exit_code_within_the_clock_window_stays_teardown(self, tmp_path: Path) -> None:
        """The main process's log is stamped one second before the first timeout (another
        file, another clock): whether it came before cannot be told, so it stays the hang's
        teardown and the summary says so."""
        logs = tmp_path / "logs"
        for rank in range(4):
            lines = [*nccl_ready(0, rank, rank, 4), batch(f"TP{rank}", 60)]
            write(logs, f"rank{rank}.log", lines + (timeout(rank) if rank != 2 else []))
        write(logs, "main.log", [f"[{stamp(668)}] Subprocess scheduler_1 (pid={pid(1)}) crashed "
                                 "with exit code -6. Triggering SIGQUIT for cleanup..."])
        found = analyze([logs], config=config(tmp_path, {"tp_size": 4})).findings
        [root] = errors(found)
        assert root.kind == "collective-hang" and ranks(root.processes) == [2]
        assert consequence(root, "exit-code")["world_ranks"] == [1]
        assert "so their order cannot be told: taken as its teardown" in root.summary

    def test_a_crash_before_any_timeout_is_a_root(self, tmp_path: Path) -> None:
        """TP4: rank 2 hits an illegal memory access; ten minutes later the others time out
        waiting for it and torch aborts them: one verdict, the crash, with the hang and the
        aborts as its consequences."""
        logs = tmp_path / "logs"
        for rank in range(4):
            lines = [batch(f"TP{rank}", 60)]
            lines += exception("TP2", 69) if rank == 2 else [*timeout(rank), *abort(rank)]
            write(logs, f"rank{rank}.log", lines)
        found = analyze([logs], config=config(tmp_path, {"tp_size": 4})).findings
        [root] = errors(found)
        assert root.kind == "crash" and ranks(root.processes) == [2]
        assert [c["kind"] for c in root.consequences] == ["collective-hang", "abort"]
        assert ranks(root.waiting) == [0, 1, 3]

    def test_a_victim_in_another_stage_follows_the_hang(self, tmp_path: Path) -> None:
        """TP4 PP2: stage 0's world rank 1 never reaches the collective, the others time
        out and are aborted; stage 1's world rank 5 then fails saying the remote process
        exited. A victim of the teardown: the hang's consequence, not a second verdict."""
        logs = tmp_path / "logs"
        lines = [batch(f"PP{r // 4} TP{r % 4}", 60) for r in range(8)]
        for rank in (0, 2, 3):
            lines += [*timeout(rank), *abort(rank)]
        lines += [f"[{stamp(675)} PP1 TP1] Scheduler hit an exception: Traceback (most recent "
                  "call last):",
                  "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:3356, "
                  "remote process exited or there was a network error, NCCL version 2.21.5"]
        write(logs, "node0.log", lines)
        found = analyze([logs], config=config(tmp_path, {"tp_size": 4, "pp_size": 2})).findings
        [root] = errors(found)
        assert root.kind == "collective-hang" and ranks(root.processes) == [1]
        assert consequence(root, "crash")["world_ranks"] == [5]
        assert 5 in ranks(root.waiting)

    def test_a_killed_line_before_the_crash_is_not_its_cascade(self, tmp_path: Path) -> None:
        """A `Killed` line of an earlier run, before the crash, follows no root."""
        logs = tmp_path / "logs"
        write(logs, "main.log", [f"[{stamp(1)}] Killed"])
        for rank in range(2):
            write(logs, f"rank{rank}.log", [batch(f"TP{rank}", 60)]
                  + (exception("TP1", 70) if rank == 1 else []))
        [root] = errors(analyze([logs], config=config(tmp_path, {"tp_size": 2})).findings)
        assert root.kind == "crash" and root.consequences == []


DAY = "2026-11-29"


# --------------------------------------------------------------------------- watchdogs


class TestWatchdogsAfterACrash:
    """SGLang's watchdog firing after a crash, on processes that wait for the crashed one,
    is a consequence of the crash: the waiters are never blamed."""

    def test_the_other_pipeline_stage_s_watchdog_follows_the_crash(self, tmp_path: Path
                                                                    ) -> None:
        """TP4 PP2 over two nodes: stage 1's world rank 5 hits an illegal memory access and
        node 1 is torn down; five minutes later stage 0's four schedulers' watchdogs fire."""
        logs = tmp_path / "logs"
        write(logs, "node0.log", [batch(f"PP0 TP{t}", 60) for t in range(4)]
              + [sglang_watchdog(f"PP0 TP{t}", 370) for t in range(4)] + main_quit(375))
        write(logs, "node1.log", [batch(f"PP1 TP{t}", 60) for t in range(4)]
              + exception("PP1 TP1", 70) + main_quit(71))
        found = analyze([logs], config=config(tmp_path, {"tp_size": 4, "pp_size": 2,
                                                         "nnodes": 2})).findings
        [root] = errors(found)
        assert root.kind == "crash" and ranks(root.processes) == [5]
        assert ranks(root.waiting) == [0, 1, 2, 3]
        watchdog = consequence(root, "watchdog-timeout")
        assert (watchdog["world_ranks"], watchdog["nodes"]) == ([0, 1, 2, 3], [0])
        assert root.summary.startswith("world rank 5 (TP1, PP1, node 1 GPU 1) failed first")

    def test_attention_dp_ranks_waiting_for_a_crashed_rank(self, tmp_path: Path) -> None:
        """TP16, attention DP8 over two nodes: rank 9 crashes, node 1 is torn down, node 0's
        eight schedulers' watchdogs fire (too many quiet members to single one out)."""
        logs = tmp_path / "logs"
        prefix = [f"DP{r // 2} TP{r} EP{r}" for r in range(16)]
        write(logs, "node0.log", [batch(prefix[r], 60) for r in range(8)]
              + [sglang_watchdog(prefix[r], 370) for r in range(8)])
        write(logs, "node1.log", [batch(prefix[r], 60) for r in range(8, 16)]
              + exception(prefix[9], 70) + main_quit(71))
        found = analyze([logs], config=config(tmp_path, TP16_DPATTN)).findings
        [root] = errors(found)
        assert root.kind == "crash" and ranks(root.processes) == [9]
        assert ranks(root.waiting) == list(range(8))
        assert consequence(root, "watchdog-timeout")["world_ranks"] == list(range(8))

    def test_order_within_the_clock_window_is_said_not_promoted(self, tmp_path: Path) -> None:
        """As the pipeline case, but node 0's clock is a second behind: its watchdogs are
        stamped before the crash. The order cannot be told; the crash stays the verdict."""
        logs = tmp_path / "logs"
        write(logs, "node0.log", [batch(f"PP0 TP{t}", 60) for t in range(4)]
              + [sglang_watchdog(f"PP0 TP{t}", 69) for t in range(4)])
        write(logs, "node1.log", [batch(f"PP1 TP{t}", 60) for t in range(4)]
              + exception("PP1 TP1", 70))
        found = analyze([logs], config=config(tmp_path, {"tp_size": 4, "pp_size": 2,
                                                         "nnodes": 2})).findings
        [root] = errors(found)
        assert root.kind == "crash" and ranks(root.processes) == [5]
        assert "came after it cannot be told from the stamps" in root.summary

    def test_a_watchdog_an_hour_later_is_a_separate_incident(self, tmp_path: Path) -> None:
        """As the pipeline case, but stage 0's watchdogs fire an hour after the crash, far
        past 300 s: not the crash's waiting, another time window."""
        logs = tmp_path / "logs"
        write(logs, "node0.log", [batch(f"PP0 TP{t}", 60) for t in range(4)] + [
            f"[{DAY} 11:01:10 PP0 TP{t}] Scheduler watchdog timeout (self.watchdog_timeout=300, "
            "self.soft=False)" for t in range(4)])
        write(logs, "node1.log", [batch(f"PP1 TP{t}", 60) for t in range(4)]
              + exception("PP1 TP1", 70))
        found = analyze([logs], config=config(tmp_path, {"tp_size": 4, "pp_size": 2,
                                                         "nnodes": 2})).findings
        crash, watchdog = errors(found)
        assert (crash.kind, watchdog.kind, watchdog.role) == ("crash", "watchdog-timeout",
                                                              "independent")
        assert watchdog.summary.endswith(
            "separate from the crash above: another time window (it began 60 min after the "
            "crash ended)")

    def test_a_watchdog_in_another_replica_is_a_separate_incident(self, tmp_path: Path
                                                                  ) -> None:
        """Native DP (two replicas of TP4): replica 0's world rank 1 crashes; replica 1's
        watchdogs fire later. Replica 1 does not wait on replica 0: two verdicts, the second
        saying why it is separate."""
        logs = tmp_path / "logs"
        write(logs, "node0.log", [batch(f"DP{d} TP{t}", 60) for d in (0, 1) for t in range(4)]
              + exception("DP0 TP1", 70)
              + [sglang_watchdog(f"DP1 TP{t}", 900) for t in range(4)])
        found = analyze([logs], config=config(tmp_path, {"tp_size": 4, "dp_size": 2})).findings
        crash, watchdog = errors(found)
        assert (crash.kind, crash.role) == ("crash", "root")
        assert (watchdog.kind, watchdog.role) == ("watchdog-timeout", "independent")
        assert watchdog.summary.endswith(
            "separate from the crash above: another group (replica 1; the crash is in "
            "replica 0)")


# --------------------------------------------------------------------------- verdict first


class TestTheVerdictFirst:
    def test_a_hang_seen_only_through_sglang_s_watchdog(self, tmp_path: Path) -> None:
        """TP8: seven schedulers' watchdogs fire, TP1's does not and its last line is the
        earliest: the summary opens with TP1, then the waiting, then how it was decided."""
        logs = tmp_path / "logs"
        for rank in range(8):
            last = 70 if rank == 1 else 130
            lines = [batch(f"TP{rank}", s) for s in range(60, last + 1, 10)]
            write(logs, f"rank{rank}.log",
                  lines + ([sglang_watchdog(f"TP{rank}", 430)] if rank != 1 else []))
        [root] = errors(analyze([logs], config=config(tmp_path, {"tp_size": 8})).findings)
        assert root.summary.startswith(
            "world rank 1 (TP1, node 0 GPU 1) stopped making progress; 7 member(s) of tp group "
            "0\u20137 waited for it (")
        assert "; decided by which members' watchdog fired" in root.summary

    def test_a_collective_hang_names_its_culprit_first(self, tmp_path: Path) -> None:
        found = analyze([hang_with_teardown(tmp_path)],
                        config=config(tmp_path, TP16_DPATTN)).findings
        assert found[0].summary.startswith(
            "world rank 9 (TP9, DP4, node 1 GPU 1) never reached ALLREDUCE SeqNum 9141; 15 "
            "member(s) of tp group 0\u201315 timed out waiting for it; decided by")


class TestRanges:
    """A 256-member group is shown as ranges in the summary, the terminal, the HTML page and
    the check output; the JSON report keeps the full lists."""

    def analysis(self, folder: Path) -> Analysis:
        logs = folder / "logs"
        for node in range(32):
            lines = [batch(f"TP{r}", 60) for r in range(8 * node, 8 * node + 8)]
            for rank in range(8 * node, 8 * node + 8):
                lines += timeout(rank) if rank != 134 else []
            write(logs, f"node{node}.log", lines)
        return analyze([logs], config=config(folder, {"tp_size": 256, "nnodes": 32}))

    def test_everywhere_but_the_json(self, tmp_path: Path) -> None:
        from logcorr.digest import digest
        from logcorr.report_html import render

        analysis = self.analysis(tmp_path)
        [root] = errors(analysis.findings)
        assert ranks(root.processes) == [134]
        assert "tp group 0\u2013255" in root.summary and "[0, 1, 2" not in root.summary
        shown = terminal(analysis)
        assert "waiting: 255 process(es): world ranks 0\u2013133, 135\u2013255" in shown
        assert "0\u2013133, 135\u2013255" in shown and "0, 1, 2, 3" not in shown
        page = render(analysis, digest(analysis))
        assert "waiting: 255 process(es): world ranks 0\u2013133, 135\u2013255" in page
        document = analysis.report()["findings"][0]
        assert document["group_members"] == list(range(256))
        assert len(document["waiting"]) == 255

    def test_check_output_prints_culprits_as_ranges(self) -> None:
        from logcorr.fixtures import Comparison
        from logcorr.render_check import render_comparison

        result = Comparison("incident")
        result.findings_changed = [{"change": "new", "kind": "init-hang", "severity": "error",
                                    "group": None, "culprits": [
                                        {"replica": 0, "world_rank": w} for w in range(8, 16)]}]
        console = Console(width=200, record=True, color_system=None, file=io.StringIO())
        console.print(render_comparison(result))
        assert "culprits: replica 0 world ranks 8\u201315" in console.export_text()


# --------------------------------------------------------------------------- identity


HEARTBEAT = ("[rank6]:[F429 10:09:00.485000000 ProcessGroupNCCL.cpp:1484] [PG ID 0 PG GUID "
             "0(default_pg) Rank 6] ProcessGroupNCCL's watchdog got stuck for 480 seconds "
             "without making progress in monitoring enqueued collectives. Terminating the "
             "process after attempting to dump debug info, due to ProcessGroupNCCL watchdog "
             "hang.")


def hard_wrapped(text: str, width: int) -> list[str]:
    return [text[i:i + width] for i in range(0, len(text), width)]


class TestIdentityInsideTheLine:
    """A fatal line that carries its own rank tag names that process, even hard-wrapped,
    glued behind a progress bar or behind a wrapper; never when the tag fits two."""

    def node_file(self, folder: Path, lines: list[str], fields: dict[str, object]) -> list[Any]:
        logs = folder / "logs"
        write(logs, "node0.log", [f"[2026-04-29 10:00:0{r} TP{r}] Decode batch, #running-req: 1"
                                  for r in range(8)] + lines)
        return [f for f in analyze([logs], config=config(folder, fields)).findings
                if f.kind == "crash"]

    def test_a_wrapped_heartbeat_abort_glued_behind_a_progress_bar(self, tmp_path: Path
                                                                   ) -> None:
        [crash] = self.node_file(tmp_path, hard_wrapped(PROGRESS_BAR + HEARTBEAT, 80),
                                 {"tp_size": 8})
        assert ranks(crash.processes) == [6]

    def test_an_sglang_prefix_cut_from_its_exception_by_a_wrap(self, tmp_path: Path) -> None:
        header = exception("DP3 TP6 EP6", 540)
        [crash] = self.node_file(tmp_path, hard_wrapped(header[0], 40) + header[1:], {
            "tp_size": 8, "dp_size": 4, "enable_dp_attention": True, "ep_size": 8})
        assert ranks(crash.processes) == [6]
        assert "illegal memory access" in crash.summary

    def test_a_tag_two_replicas_share_names_no_one(self, tmp_path: Path) -> None:
        """Native DP, both replicas on one host: `[rank6]` is world rank 6 of either."""
        [crash] = self.node_file(tmp_path, hard_wrapped(PROGRESS_BAR + HEARTBEAT, 80),
                                 {"tp_size": 8, "dp_size": 2})
        assert crash.processes == []


# --------------------------------------------------------------------------- streams


def test_a_culprit_known_only_by_its_stream_carries_it(tmp_path: Path) -> None:
    """A Ray actor's traceback that no line ties to a process: the report and the terminal
    carry the stream as a field, beside the summary."""
    logs = tmp_path / "logs"
    write(logs, "driver.log", [
        "(WorkerDict pid=859188) terminate called after throwing an instance of 'c10::Error'",
        "(WorkerDict pid=859188)   what():  CUDA error: an illegal memory access was "
        "encountered"])
    analysis = analyze([logs])
    crash = next(f for f in analysis.report()["findings"] if f["kind"] == "crash")
    assert crash["processes"] == [] and crash["stream"] == "WorkerDict pid=859188"
    assert "stream: WorkerDict pid=859188" in terminal(analysis)


def test_a_process_s_own_file_is_not_a_stream(tmp_path: Path) -> None:
    """A finding without a culprit whose lines all name processes (their per-rank files) says
    no stream."""
    logs = tmp_path / "logs"
    for rank in (0, 1, 2, 3, 4, 6, 7):
        write(logs, f"rank{rank}.log", [batch(f"TP{rank}", 60), sglang_watchdog(f"TP{rank}",
                                                                                 430)])
    found = analyze([logs], config=config(tmp_path, {"tp_size": 8})).findings
    [root] = errors(found)
    assert root.processes == [] and ranks(root.unknown) == [5]
    assert root.stream is None and not root.summary.startswith("in the stream")


def test_the_report_json_shape(tmp_path: Path) -> None:
    """Roles and consequence records as the report holds them (sorted keys, as `check`
    stores them)."""
    analysis = analyze([hang_with_teardown(tmp_path)], config=config(tmp_path, TP16_DPATTN))
    document = json.loads(json.dumps(analysis.report(), sort_keys=True))
    [root] = [f for f in document["findings"] if f["severity"] == "error"]
    assert root["role"] == "root" and root["stream"] is None
    assert {tuple(sorted(c)) for c in root["consequences"]} == {(
        "count", "first_ts", "kind", "last_ts", "nodes", "processes", "replicas", "samples",
        "summary", "unnamed", "world_ranks")}
