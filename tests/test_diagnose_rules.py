"""Diagnosis that reasons across evidence: the odd one out of a group, replicas from combined
evidence, NCCL init phases, absent logs, wrapped messages, victims from NCCL's words, py-spy
stacks, one verdict per incident. Each log set is generated here from real line shapes."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from logcorr.api import analyze
from logcorr.diagnose import Finding

DAY = "2026-11-29"


def write(folder: Path, name: str, lines: list[str]) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(line + "\n" for line in lines))
    return path


def config(folder: Path, fields: dict[str, object]) -> Path:
    path = folder / "args.json"
    path.write_text(json.dumps(fields))
    return path


def stamp(second: int) -> str:
    return f"{DAY} 10:{second // 60:02d}:{second % 60:02d}"


def batch(prefix: str, second: int) -> str:
    return (f"[{stamp(second)} {prefix}] Decode batch, #running-req: 12, #token: 3456, "
            "token usage: 0.05, gen throughput (token/s): 512.30, #queue-req: 0")


def sglang_watchdog(prefix: str, second: int) -> str:
    return (f"[{stamp(second)} {prefix}] Scheduler watchdog timeout "
            "(self.watchdog_timeout=300, self.soft=False)")


def pyspy(prefix: str, second: int, pid: int, title: str, frames: list[str]) -> list[str]:
    return [f"[{stamp(second)} {prefix}] Pyspy dump for PID {pid}:",
            f"Process {pid}: sglang::scheduler_{title}", "Python v3.12.3 (/usr/bin/python3.12)",
            "", f'Thread {pid} (idle): "MainThread"', *(f"    {f}" for f in frames)]


def torch_timeout(rank: int, seq: int = 9141) -> list[str]:
    return [f"[rank{rank}]:[E1129 10:11:09.000000000 ProcessGroupNCCL.cpp:607] [PG ID 2 PG GUID "
            f"3(tp:device) Rank {rank}] Watchdog caught collective operation timeout: "
            f"WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=19008, NumelOut=19008, "
            "Timeout(ms)=600000) ran for 600071 milliseconds before timing out.",
            f"[rank{rank}]:[E1129 10:11:09.000000000 ProcessGroupNCCL.cpp:1785] [PG ID 2 PG GUID "
            f"3(tp:device) Rank {rank}] Exception (either an error or timeout) detected by "
            f"watchdog at work: {seq}, last enqueued NCCL work: {seq}, last completed NCCL "
            f"work: {seq - 1}."]


def ranks(people: list[dict[str, object]]) -> list[int]:
    return sorted(int(p["world_rank"]) for p in people)  # type: ignore[call-overload]


def errors(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.severity == "error"]


# --------------------------------------------------------------------------- odd one out


class TestSGLangWatchdogOddOneOut:
    """TP8, only SGLang's own watchdog fired: seven schedulers printed `Scheduler watchdog
    timeout`, TP5 did not, and its last batch line is the earliest."""

    def logs(self, folder: Path, skip: int | None = None, quiet: int = 5) -> Path:
        logs = folder / "logs"
        for rank in range(8):
            if rank == skip:
                continue
            last = 70 if rank == quiet else 130
            lines = [batch(f"TP{rank}", s) for s in range(60, last + 1, 10)]
            if rank != quiet:
                lines.append(sglang_watchdog(f"TP{rank}", 430 + rank))
            write(logs, f"rank{rank}.log", lines)
        return logs

    def test_the_member_whose_watchdog_did_not_fire_is_the_suspect(self, tmp_path: Path
                                                                     ) -> None:
        found = analyze([self.logs(tmp_path)], config=config(tmp_path, {"tp_size": 8})).findings
        [root] = errors(found)
        assert root.kind == "watchdog-timeout"
        assert ranks(root.processes) == [5]
        assert ranks(root.waiting) == [0, 1, 2, 3, 4, 6, 7]
        assert "fired on 7 of the 8 members" in root.summary
        assert "not on world rank 5" in root.summary
        assert "its last line is the earliest" in root.summary

    def test_a_member_without_logs_is_unknown_not_the_suspect(self, tmp_path: Path) -> None:
        """TP5's file is missing: nothing says it did not fire; no culprit, TP5 unknown."""
        found = analyze([self.logs(tmp_path, skip=5)],
                        config=config(tmp_path, {"tp_size": 8})).findings
        root = next(f for f in found if f.kind == "watchdog-timeout")
        assert root.processes == []
        assert ranks(root.unknown) == [5]
        assert "look here next" in root.summary

    def test_half_and_half_names_no_one(self, tmp_path: Path) -> None:
        logs = tmp_path / "logs"
        for rank in range(4):
            lines = [batch(f"TP{rank}", 60)]
            if rank < 2:
                lines.append(sglang_watchdog(f"TP{rank}", 430))
            write(logs, f"rank{rank}.log", lines)
        found = analyze([logs], config=config(tmp_path, {"tp_size": 4})).findings
        root = next(f for f in found if f.kind == "watchdog-timeout")
        assert root.processes == []
        assert ranks(root.waiting) == [0, 1]


class TestPySpyStacks:
    """py-spy dumps of a hung TP4 group: three in all_reduce, one in cudaStreamSynchronize."""

    def test_groups_by_top_frame_and_the_odd_group_is_the_suspect(self, tmp_path: Path
                                                                  ) -> None:
        logs = tmp_path / "logs"
        for rank in range(4):
            top = "synchronize (torch/cuda/streams.py:225)" if rank == 2 else \
                "all_reduce (torch/distributed/distributed_c10d.py:2501)"
            write(logs, f"rank{rank}.log", [
                batch(f"TP{rank}", 60),
                *pyspy(f"TP{rank}", 430, 4000 + rank, f"TP{rank}",
                       [top, "event_loop_overlap (sglang/srt/managers/scheduler.py:1012)"]),
                sglang_watchdog(f"TP{rank}", 430)])
        found = analyze([logs], config=config(tmp_path, {"tp_size": 4})).findings
        [root] = errors(found)
        assert "3 in all_reduce, 1 in synchronize" in root.summary
        assert ranks(root.processes) == [2]
        assert ranks(root.waiting) == [0, 1, 3]


    def test_a_hang_where_every_member_timed_out_is_decided_by_the_stacks(
            self, tmp_path: Path) -> None:
        """Every member of the TP4 group timed out on the same SeqNum; TP2's dump shows it in
        cudaStreamSynchronize, the others in all_reduce."""
        logs = tmp_path / "logs"
        for rank in range(4):
            top = "synchronize (torch/cuda/streams.py:225)" if rank == 2 else \
                "all_reduce (torch/distributed/distributed_c10d.py:2501)"
            write(logs, f"rank{rank}.log", [
                batch(f"TP{rank}", 60), *torch_timeout(rank),
                *pyspy(f"TP{rank}", 672, 4000 + rank, f"TP{rank}", [top])])
        found = analyze([logs], config=config(tmp_path, {"tp_size": 4})).findings
        hang = next(f for f in found if f.kind == "collective-hang")
        assert ranks(hang.processes) == [2]
        assert "decided by the py-spy stacks" in hang.summary
        assert "py-spy stacks: 3 in all_reduce, 1 in synchronize" in hang.summary


# --------------------------------------------------------------------------- replicas


class TestReplicaFromCombinedEvidence:
    """Native DP (2 replicas x TP4), one file per node: torch's `[rankN]` lines cannot say the
    replica; SGLang's watchdog lines of the same minute name replica 1's TP0/TP2/TP3."""

    def test_the_watchdogs_place_the_hang_in_replica_1(self, tmp_path: Path) -> None:
        lines = [batch(f"DP{dp} TP{tp}", 60) for dp in range(2) for tp in range(4)]
        lines += [batch(f"DP0 TP{tp}", 660) for tp in range(4)]  # replica 0 stays healthy
        for rank in (0, 2, 3):
            lines += torch_timeout(rank)
        lines += [sglang_watchdog(f"DP1 TP{tp}", 670) for tp in (0, 2, 3)]
        logs = tmp_path / "logs"
        write(logs, "node0.log", lines)
        found = analyze([logs], config=config(tmp_path, {"tp_size": 4, "dp_size": 2})).findings
        [root] = errors(found)
        assert root.kind == "collective-hang"
        assert [(p["replica"], p["world_rank"]) for p in root.processes] == [(1, 1)]
        assert sorted((p["replica"], p["world_rank"]) for p in root.waiting) == [
            (1, 0), (1, 2), (1, 3)]
        assert "replica 1" in root.summary
        assert any(c["kind"] == "watchdog-timeout" for c in root.consequences)

    def test_watchdogs_in_both_replicas_name_no_replica(self, tmp_path: Path) -> None:
        lines = [batch(f"DP{dp} TP{tp}", 60) for dp in range(2) for tp in range(4)]
        for rank in (0, 2, 3):
            lines += torch_timeout(rank)
        lines += [sglang_watchdog(f"DP{dp} TP0", 670) for dp in range(2)]
        logs = tmp_path / "logs"
        write(logs, "node0.log", lines)
        found = analyze([logs], config=config(tmp_path, {"tp_size": 4, "dp_size": 2})).findings
        hang = next(f for f in found if f.kind == "collective-hang")
        assert hang.processes == []
        assert "cannot" in hang.summary


# --------------------------------------------------------------------------- NCCL init


def nccl_init(node: int, rank: int, reached: int, comm: str = "0xf2a74de452e6b438"
              ) -> list[str]:
    """Rank `rank` of a 16-rank communicator on gpu-node-`node`, through init step `reached`
    (0 START, 1 bootstrap, 2 connection setup, 3 rings, 4 trees, 5 COMPLETE)."""
    dev = rank % 8
    head = f"gpu-node-{node}:{3416000 + rank * 7}:{3416000 + rank * 7} [{dev}] NCCL INFO"
    ptr = f"0x{rank + 1:x}a0e0d37"
    steps = [
        f"{head} ncclCommInitRank comm {ptr} rank {rank} nranks 16 cudaDev {dev} nvmlDev {dev} "
        f"busId {dev + 1}a000 commId {comm} - Init START",
        f"{head} comm {ptr} rank {rank} nRanks 16 nNodes 2 localRanks 8 localRank {dev} "
        "MNNVL 0",
        f"{head} Channel 00/0 : {rank}[{dev}] -> {(rank + 1) % 16}[{(dev + 1) % 8}] via "
        "P2P/CUMEM/read",
        f"{head} Connected all rings",
        f"{head} Connected all trees",
        f"{head} comm {ptr} rank {rank} nranks 16 cudaDev {dev} nvmlDev {dev} busId "
        f"{dev + 1}a000 commId {comm} - Init COMPLETE",
    ]
    return [f"[{stamp(5)} TP{rank}] Init torch distributed begin.", *steps[:reached + 1]]


class TestNcclInitPhases:
    def test_the_ranks_that_got_least_far_are_the_suspects(self, tmp_path: Path) -> None:
        """TP16 on 2 nodes: every rank logged Init START, none COMPLETE; node 1's ranks stopped
        in connection setup while node 0's reached `Connected all trees`."""
        logs = tmp_path / "logs"
        write(logs, "node0.log", [line for r in range(8) for line in nccl_init(0, r, 4)])
        write(logs, "node1.log", [line for r in range(8, 16) for line in nccl_init(1, r, 2)])
        found = analyze([logs], config=config(tmp_path, {"tp_size": 16, "nnodes": 2})).findings
        [root] = errors(found)
        assert root.kind == "init-hang"
        assert ranks(root.processes) == list(range(8, 16))
        assert ranks(root.waiting) == list(range(8))
        assert "connection setup" in root.summary and "trees connected" in root.summary

    def test_absent_node_logs_are_unknown_not_never_started(self, tmp_path: Path) -> None:
        """Only node 0's log: ranks 8-15 are unknown (no log), never "never logged Init
        START"; node 0's ranks, which the evidence shows hung, are in the finding."""
        logs = tmp_path / "logs"
        write(logs, "node0.log", [line for r in range(8) for line in nccl_init(0, r, 4)])
        found = analyze([logs], config=config(tmp_path, {"tp_size": 16, "nnodes": 2})).findings
        init = next(f for f in found if f.kind == "init-hang")
        assert init.processes == []
        assert ranks(init.waiting) == list(range(8))
        assert ranks(init.unknown) == list(range(8, 16))
        assert "never logged" not in init.summary
        assert "look here next" in init.summary

    def test_a_rank_past_the_communicator_s_size_places_no_absent_member(
            self, tmp_path: Path) -> None:
        """A damaged line gives rank 7 of node 0 as comm rank 99 of 16: no group instance has
        such a member, so the absent ranks are not placed (was an IndexError)."""
        logs = tmp_path / "logs"
        lines = [line for r in range(8) for line in nccl_init(0, r, 4)]
        lines = [line.replace(" rank 7 nranks 16", " rank 99 nranks 16") for line in lines]
        write(logs, "node0.log", lines)
        found = analyze([logs], config=config(tmp_path, {"tp_size": 16, "nnodes": 2})).findings
        init = next(f for f in found if f.kind == "init-hang")
        assert 7 not in ranks(init.processes)


# --------------------------------------------------------------------------- wrapped


HEARTBEAT = ("[rank3]:[E1129 10:09:00.485000000 ProcessGroupNCCL.cpp:1484] [PG ID 0 PG GUID "
             "0(default_pg) Rank 3] ProcessGroupNCCL's watchdog got stuck for 480 seconds "
             "without making progress in monitoring enqueued collectives. Terminating the "
             "process after attempting to dump debug info, due to ProcessGroupNCCL watchdog "
             "hang.")


class TestWrappedMessages:
    def wrapped(self, width: int) -> list[str]:
        return [HEARTBEAT[i:i + width] for i in range(0, len(HEARTBEAT), width)]

    def test_a_stem_cut_by_a_hard_wrap_is_found(self, tmp_path: Path) -> None:
        width = HEARTBEAT.index(" watchdog hang") + len(" watchdog")
        lines = self.wrapped(width)
        assert not any("watchdog hang" in line for line in lines)
        logs = tmp_path / "logs"
        write(logs, "s.log", [batch(f"TP{r}", 60) for r in range(4)] + lines)
        crash = next(f for f in analyze([logs], config=config(tmp_path, {"tp_size": 4})).findings
                     if f.kind == "crash")
        assert ranks(crash.processes) == [3]

    def test_a_backslash_continuation_is_joined(self, tmp_path: Path) -> None:
        cut = HEARTBEAT.index("watchdog hang") + len("watchdog ")
        logs = tmp_path / "logs"
        write(logs, "s.log", [batch(f"TP{r}", 60) for r in range(4)]
              + [HEARTBEAT[:cut] + "\\", HEARTBEAT[cut:]])
        crash = next(f for f in analyze([logs], config=config(tmp_path, {"tp_size": 4})).findings
                     if f.kind == "crash")
        assert ranks(crash.processes) == [3]

    def test_glog_fatal_severity_is_a_crash(self, tmp_path: Path) -> None:
        logs = tmp_path / "logs"
        write(logs, "s.log", [batch(f"TP{r}", 60) for r in range(4)] + [
            "[rank2]:[F1129 10:09:00.485000000 CUDAGraph.cpp:150] Check failed: "
            "capture_stream_ == nullptr"])
        crash = next(f for f in analyze([logs], config=config(tmp_path, {"tp_size": 4})).findings
                     if f.kind == "crash")
        assert ranks(crash.processes) == [2]
        assert "Check failed" in crash.summary


# --------------------------------------------------------------------------- victims


class TestVictimsFromNcclWords:
    def test_a_refused_connection_then_remote_exit_blames_the_peer(self, tmp_path: Path
                                                                    ) -> None:
        """TP1's own NCCL lines say its connection to 10.0.0.2 was refused, then `NCCL error:
        remote process exited`: a victim, not the root."""
        logs = tmp_path / "logs"
        write(logs, "rank1.log", [
            batch("TP1", 60),
            "gpu-node-0:4007:4107 [1] NCCL INFO Channel 00/0 : 1[1] -> 9[1] [send] via NET/IB/0",
            "",
            "gpu-node-0:4007:4107 [1] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to "
            "10.0.0.2<43821> failed : Connection refused",
            f"[{stamp(75)} TP1] Scheduler hit an exception: Traceback (most recent call last):",
            '  File "/sgl/srt/managers/scheduler.py", line 2912, in run_scheduler_process',
            "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:3356, "
            "remote process exited or there was a network error, NCCL version 2.21.5"])
        write(logs, "rank0.log", [batch("TP0", 60), batch("TP0", 70)])
        found = analyze([logs], config=config(tmp_path, {"tp_size": 2})).findings
        crash = next(f for f in found if f.kind == "crash")
        assert crash.processes == []
        assert ranks(crash.waiting) == [1]
        assert "10.0.0.2" in crash.summary


    def test_a_rank_whose_only_words_are_nccl_s_is_a_victim(self, tmp_path: Path) -> None:
        """TP1's NCCL WARN says its connection to a peer was refused and it fails first with
        an NCCL system error; TP0 fails 20 s later with its own CUDA error: TP0 is the root."""
        logs = tmp_path / "logs"
        write(logs, "rank1.log", [
            batch("TP1", 60),
            "gpu-node-0:4007:4107 [1] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to "
            "10.0.0.1<43821> failed : Connection refused",
            f"[{stamp(75)} TP1] Scheduler hit an exception: Traceback (most recent call last):",
            '  File "/sgl/srt/managers/scheduler.py", line 2912, in run_scheduler_process',
            "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:3356, "
            "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5"])
        write(logs, "rank0.log", [
            batch("TP0", 60),
            f"[{stamp(95)} TP0] Scheduler hit an exception: Traceback (most recent call last):",
            '  File "/sgl/srt/managers/scheduler.py", line 2912, in run_scheduler_process',
            "RuntimeError: CUDA error: an illegal memory access was encountered"])
        found = analyze([logs], config=config(tmp_path, {"tp_size": 2})).findings
        crash = next(f for f in found if f.kind == "crash")
        assert ranks(crash.processes) == [0]
        assert ranks(crash.waiting) == [1]


# --------------------------------------------------------------------------- one verdict


class TestOneIncidentOneVerdict:
    def test_aborts_after_a_collective_timeout_are_its_consequences(self, tmp_path: Path
                                                                    ) -> None:
        """TP4: TP2 never reached SeqNum 9141; the others timed out, their SGLang watchdogs
        fired and torch aborted them (`Fatal Python error: Aborted`): one error finding."""
        logs = tmp_path / "logs"
        for rank in range(4):
            lines = [batch(f"TP{rank}", 60)]
            if rank != 2:
                lines += torch_timeout(rank)
                lines += [sglang_watchdog(f"TP{rank}", 671),
                          f"[{stamp(672)} TP{rank}] Fatal Python error: Aborted"]
            write(logs, f"rank{rank}.log", lines)
        found = analyze([logs], config=config(tmp_path, {"tp_size": 4})).findings
        [root] = errors(found)
        assert root.kind == "collective-hang"
        assert ranks(root.processes) == [2]
        assert ranks(root.waiting) == [0, 1, 3]
        assert sorted(c["kind"] for c in root.consequences) == ["abort", "watchdog-timeout"]
        assert found[0] is root

    def test_attention_dp_hang_with_aborts_is_one_verdict(self, tmp_path: Path) -> None:
        """TP16 with 8 attention-DP ranks, one file per rank: rank 9 never reached the
        all-reduce; the 15 others timed out, their SGLang watchdogs fired and each was
        aborted (`Fatal Python error: Aborted`, rank 4's first): one verdict, naming rank 9."""
        logs = tmp_path / "logs"
        for rank in range(16):
            prefix = f"DP{rank // 2} TP{rank} EP{rank}"
            lines = [batch(prefix, 60)]
            if rank != 9:
                lines += torch_timeout(rank)
                lines += [sglang_watchdog(prefix, 671),
                          f"[{stamp(672 if rank == 4 else 673)} {prefix}] Fatal Python error: "
                          "Aborted"]
            write(logs, f"rank{rank}.log", lines)
        found = analyze([logs], config=config(tmp_path, {
            "tp_size": 16, "dp_size": 8, "enable_dp_attention": True, "nnodes": 2,
            "ep_size": 16, "moe_a2a_backend": "deepep"})).findings
        [root] = errors(found)
        assert root.kind == "collective-hang" and ranks(root.processes) == [9]
        assert len(root.waiting) == 15
        assert {c["kind"] for c in root.consequences} == {"abort", "watchdog-timeout"}

    def test_watchdogs_after_the_suspect_crashed_follow_the_crash(self, tmp_path: Path
                                                                  ) -> None:
        """TP2 hit an illegal memory access; five minutes later the other three schedulers'
        watchdogs fired, waiting for it: one verdict, the crash."""
        logs = tmp_path / "logs"
        for rank in range(4):
            lines = [batch(f"TP{rank}", 60)]
            if rank == 2:
                lines += [f"[{stamp(70)} TP2] Scheduler hit an exception: Traceback (most recent "
                          "call last):",
                          "RuntimeError: CUDA error: an illegal memory access was encountered"]
            else:
                lines.append(sglang_watchdog(f"TP{rank}", 370))
            write(logs, f"rank{rank}.log", lines)
        found = analyze([logs], config=config(tmp_path, {"tp_size": 4})).findings
        [root] = errors(found)
        assert root.kind == "crash" and ranks(root.processes) == [2]
        assert [c["kind"] for c in root.consequences] == ["watchdog-timeout"]

    def test_report_json_separates_culprits_waiting_and_unknown(self, tmp_path: Path) -> None:
        logs = tmp_path / "logs"
        write(logs, "node0.log", [line for r in range(8) for line in nccl_init(0, r, 4)])
        analysis = analyze([logs], config=config(tmp_path, {"tp_size": 16, "nnodes": 2}))
        init = next(f for f in analysis.report()["findings"] if f["kind"] == "init-hang")
        assert init["processes"] == []
        assert len(init["waiting"]) == 8 and len(init["unknown_processes"]) == 8


# --------------------------------------------------------------------------- streams


def test_a_finding_without_a_process_names_its_stream(tmp_path: Path) -> None:
    """A fatal line that came through a wrapper stream (Ray's `(WorkerDict pid=859188)`) and
    that no line ties to a process names the stream; the same line without the wrapper names
    none."""
    text = "terminate called after throwing an instance of 'c10::Error'"
    for wrapped in (True, False):
        logs = tmp_path / ("ray" if wrapped else "plain")
        write(logs, "driver.log", [f"(WorkerDict pid=859188) {text}" if wrapped else text])
        crash = next(f for f in analyze([logs]).findings if f.kind == "crash")
        assert ("in the stream WorkerDict pid=859188" in crash.summary) is wrapped, crash.summary
