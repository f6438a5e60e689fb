"""`analyze` on small hand-made log sets built from real line shapes (log-formats.md)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from logcorr.api import STAGES, analyze, select_rows
from logcorr.cli import main
from logcorr.selector import parse_selector

TP16_DPATTN = {"tp_size": 16, "dp_size": 8, "enable_dp_attention": True, "nnodes": 2,
               "moe_a2a_backend": "deepep"}


def write(folder: Path, name: str, lines: list[str], ending: str = "\n") -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes("".join(line + ending for line in lines).encode())
    return path


def config(folder: Path, fields: dict[str, object]) -> Path:
    path = folder / "args.json"
    path.write_text(json.dumps(fields))
    return path


def row(frame: pl.DataFrame, file: str, line: int, part: int = 0) -> dict[str, object]:
    found = frame.filter((pl.col("file") == file) & (pl.col("line") == line)
                         & (pl.col("part") == part))
    assert found.height == 1, (file, line, part)
    return found.row(0, named=True)


class TestPrefix:
    """SGLang prefixes in any version's order identify the process."""

    def test_prefix_orders_and_missing_bracket(self, tmp_path: Path) -> None:
        logs = tmp_path / "logs"
        write(logs, "node1.log", [
            "[2026-11-29 10:00:00 DP5 TP10 EP10] Load weight begin. avail mem=78.38 GB",
            "[2026-11-29 10:00:01 TP11 EP11 DP5] Load weight begin. avail mem=78.38 GB",
            "2026-11-29 10:00:02 DP6 TP12 EP12] Scheduler hit an exception: Traceback (most "
            "recent call last):",
            '  File "/sgl/scheduler.py", line 2912, in run_scheduler_process',
            "RuntimeError: boom",
        ])
        timeline = analyze([logs], config=config(tmp_path, TP16_DPATTN)).timeline
        first = row(timeline, "node1.log", 1)
        assert (first["world_rank"], first["attn_dp_rank"], first["attn_tp_rank"],
                first["node_rank"], first["gpu_id"]) == (10, 5, 0, 1, 2)
        assert first["evidence"] == "prefix" and first["role"] == "scheduler"
        assert row(timeline, "node1.log", 2)["world_rank"] == 11
        assert row(timeline, "node1.log", 3)["world_rank"] == 12
        tail = row(timeline, "node1.log", 5)
        assert (tail["world_rank"], tail["evidence"]) == (12, "continuation")

    def test_prefix_outside_topology_is_a_contradiction(self, tmp_path: Path) -> None:
        logs = tmp_path / "logs"
        write(logs, "a.log", ["[2026-11-29 10:00:00 TP20] Load weight begin.",
                              "[2026-11-29 10:00:00 TP3] Load weight begin."])
        analysis = analyze([logs], config=config(tmp_path, {"tp_size": 16}))
        assert row(analysis.timeline, "a.log", 1)["world_rank"] is None
        assert row(analysis.timeline, "a.log", 2)["world_rank"] == 3
        assert any(c["kind"] == "prefix-outside-topology" for c in analysis.contradictions)
        assert any(f.kind == "inconsistent" for f in analysis.findings)

    def test_without_topology_lines_say_what_they_print(self, tmp_path: Path) -> None:
        logs = tmp_path / "logs"
        write(logs, "a.log", ["[2026-11-29 10:00:00 DP1 TP3 EP3] Decode batch, #running-req: 3",
                              "[2026-11-29 10:00:01] The server is fired up and ready to roll!"])
        analysis = analyze([logs])
        assert analysis.topology is None
        first = row(analysis.timeline, "a.log", 1)
        assert (first["dp_rank"], first["tp_rank"], first["moe_ep_rank"]) == (1, 3, 3)
        assert first["world_rank"] is None and first["gpu_id"] is None
        assert row(analysis.timeline, "a.log", 2)["role"] == "main"

    def test_router_dp_label_without_dp_in_the_config(self, tmp_path: Path) -> None:
        """SGLang prints `DP<n>` under dp_size 1 only from SGLANG_DP_RANK (a server launched
        for a router): one such value in the whole set is a label; several are several
        servers, which one topology cannot describe."""
        logs = tmp_path / "logs"
        write(logs, "a.log", ["[2026-11-29 10:00:00 DP3 TP1] Load weight begin.",
                              "[2026-11-29 10:00:00 DP3 TP0] Load weight begin."])
        one = analyze([logs], config=config(tmp_path, {"tp_size": 2}))
        assert [row(one.timeline, "a.log", n)["world_rank"] for n in (1, 2)] == [1, 0]
        assert one.contradictions == []
        write(logs, "b.log", ["[2026-11-29 10:00:01 DP2 TP0] Load weight begin."])
        mixed = analyze([logs], config=config(tmp_path, {"tp_size": 2}))
        assert mixed.timeline["world_rank"].to_list() == [None] * 3
        assert "SGLANG_DP_RANK" in str(mixed.contradictions[0]["detail"])


class TestGluedAndWrapped:
    """Damaged lines: glued records become parts; every byte stays."""

    def test_glued_extension_modules(self, tmp_path: Path) -> None:
        logs = tmp_path / "logs"
        glued = ("Extension modules: numpy.core._multiarray_umath, sentencepiece._sentencepiece"
                 "[2026-11-29 10:00:05 DP5 TP11 EP11] TpModelWorkerClient hit an exception: "
                 "Traceback (most recent call last):")
        write(logs, "node1.log", ["[2026-11-29 10:00:04 DP5 TP10 EP10] Fatal Python error: "
                                  "Aborted", glued], ending="\r\n")
        timeline = analyze([logs], config=config(tmp_path, TP16_DPATTN)).timeline
        parts = timeline.filter(pl.col("line") == 2).sort("part")
        assert "".join(parts["text"].to_list()) == glued
        assert parts.height == 2
        assert parts["world_rank"].to_list()[1] == 11
        assert parts["evidence"].to_list()[1] == "prefix"


class TestGluedTorch:
    """Two ranks' c10 lines glued into one physical line are two parts."""

    def test_glued_c10_lines_split_with_their_own_ranks(self, tmp_path: Path) -> None:
        def timeout(rank: int, end: str) -> str:
            return (f"[rank{rank}]:[E1129 10:11:09.12345678{rank} ProcessGroupNCCL.cpp:632] [PG "
                    f"ID 2 PG GUID 3(tp:device) Rank {rank}] Watchdog caught collective operation"
                    " timeout: WorkNCCL(SeqNum=41, OpType=ALLREDUCE, NumelIn=7168, NumelOut=7168,"
                    f" Timeout(ms)=600000) ran for 600081 milliseconds before timing{end}")
        logs = tmp_path / "logs"
        write(logs, "node0.log", [
            *(timeout(r, " out.") for r in (0, 1, 2, 4, 6, 7)),
            timeout(3, "") + timeout(5, " out."),
            "[rank2]:[rank2]:[E1129 10:11:10.0 ProcessGroupNCCL.cpp:1] [PG ID 2 PG GUID "
            "3(tp:device) Rank 2] x",
        ])
        analysis = analyze([logs], config=config(tmp_path, {"tp_size": 8}))
        glued = [row(analysis.timeline, "node0.log", 7, part) for part in (0, 1)]
        assert [(p["source"], p["world_rank"]) for p in glued] == [("torch", 3), ("torch", 5)]
        assert "".join(str(p["text"]) for p in glued) == timeout(3, "") + timeout(5, " out.")
        chained = analysis.timeline.filter(pl.col("line") == 8)
        assert chained.height == 1 and chained["world_rank"][0] == 2
        hang = next(f for f in analysis.findings if f.kind == "collective-hang")
        assert hang.processes == [] and len(hang.waiting) == 8


class TestNcclAndTorch:
    """NCCL and torch lines: host + device, PIDs learned from py-spy, torch ranks."""

    def test_nccl_pid_and_pyspy(self, tmp_path: Path) -> None:
        logs = tmp_path / "logs"
        write(logs, "node0.log", [
            "[2026-11-29 10:00:00] server_args=ServerArgs(model_path='/m', tp_size=8, "
            "nnodes=1, node_rank=0, device='cuda')",
            "host-a:4242:4242 [3] NCCL INFO comm 0x55d rank 3 nranks 8 cudaDev 3 nvmlDev 3 "
            "busId 4a000 commId 0x9ad9b5e4ab2566da - Init COMPLETE",
            "host-a:4242:4399 [0] NCCL INFO [Proxy Service] Device 3 CPU core 105",
            "[2026-11-29 10:05:00 TP5] Pyspy dump for PID 5151:",
            "Process 5151: sglang::scheduler_TP5",
            "host-a:5151:5160 [0] NCCL INFO [Service thread] Connection closed by localRank 0",
        ])
        timeline = analyze([logs]).timeline
        assert row(timeline, "node0.log", 2)["world_rank"] == 3
        assert row(timeline, "node0.log", 2)["evidence"] == "nccl-device"
        proxy = row(timeline, "node0.log", 3)
        assert (proxy["world_rank"], proxy["evidence"], proxy["device_id"]) == (3, "pid", 0)
        service = row(timeline, "node0.log", 6)
        assert (service["world_rank"], service["evidence"]) == (5, "pid")

    def test_torch_rank_and_year_rollover(self, tmp_path: Path) -> None:
        logs = tmp_path / "logs"
        write(logs, "rank2.log", [
            "[2026-12-31 23:59:58 TP2] Decode batch, #running-req: 3",
            "[rank2]:[E101 00:09:58.928019586 ProcessGroupNCCL.cpp:607] [PG ID 2 PG GUID "
            "3(tp:device) Rank 2] Watchdog caught collective operation timeout: WorkNCCL("
            "SeqNum=9141, OpType=ALLREDUCE, NumelIn=19008, NumelOut=19008, Timeout(ms)=600000) "
            "ran for 600071 milliseconds before timing out.",
        ])
        timeline = analyze([logs], config=config(tmp_path, {"tp_size": 4})).timeline
        torch = row(timeline, "rank2.log", 2)
        assert torch["world_rank"] == 2 and torch["source"] == "torch"
        assert str(torch["ts"]).startswith("2027-01-01T00:09:58.928")


    def test_file_does_not_lend_its_process_to_a_record_of_another_group_rank(
            self, tmp_path: Path) -> None:
        """sglang#1693 shape: a console whose only identified line is `[rank3]` also holds a
        `what(): [PG 3 Rank 1]` record. World rank 3 is local rank 0 or 3 in every TP8 group,
        never 1, so that record is another process's: left unattributed, with the reason. In a
        file of rank 1 the same record is rank 1's."""
        record = [
            "terminate called after throwing an instance of 'c10::DistBackendError'",
            "  what():  [PG 3 Rank 1] Process group watchdog thread terminated with exception: "
            "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9141, "
            "OpType=_ALLGATHER_BASE, NumelIn=19008, NumelOut=152064, Timeout(ms)=600000)",
            "frame #6: clone + 0x43 (0x7f3c750b0353 in /usr/lib/x86_64-linux-gnu/libc.so.6)",
        ]
        logs = tmp_path / "logs"
        write(logs, "console.log", [
            "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/"
            "ProcessGroupNCCL.cpp:609 (most recent call first):",
            *record,
            "[rank3]:[E1016 03:31:38.919469923 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught "
            "collective operation timeout: WorkNCCL(SeqNum=9141, OpType=_ALLGATHER_BASE)",
        ])
        write(logs, "rank1.log", ["[rank1]:[E1016 03:31:38.919469923 ProcessGroupNCCL.cpp:607] "
                                  "[Rank 1] Watchdog caught collective operation timeout", *record])
        analysis = analyze([logs], config=config(tmp_path, {"tp_size": 8}))
        timeline = analysis.detail
        console = [row(timeline, "console.log", n) for n in range(1, 6)]
        assert [(r["world_rank"], r["evidence"]) for r in console] == [
            (3, "file"), (None, None), (None, None), (None, None), (3, "torch-rank")]
        assert {r["why"] for r in console[1:4]} == {"group rank not the file's process"}
        assert [row(timeline, "rank1.log", n)["world_rank"] for n in range(1, 5)] == [1] * 4
        # torch taking the processes down after the timeout is the hang's symptom, not a crash
        assert [f.kind for f in analysis.findings if f.severity == "error"] == ["collective-hang"]


    def test_plain_print_in_a_shared_file_is_nobody_s_continuation(self, tmp_path: Path
                                                                    ) -> None:
        """sglang#3784 shape: 8 schedulers of a node write one file; each prints `Cache shape
        …` after its own `Load weight begin`, so the 8 prints after TP31's line are not all
        TP31's. A traceback after an exception header, and a py-spy dump after `Pyspy dump for
        PID n:`, still continue their records. A file that names TP1 alone, in a set that is
        not laid out one process per file, is a console too: its print is nobody's."""
        logs = tmp_path / "logs"
        write(logs, "node3.log", [
            *(f"[2025-02-22 08:19:45 TP{r}] Load weight begin. avail mem=78.38 GB"
              for r in range(24, 32)),
            *(["Cache shape torch.Size([163840, 64])"] * 8),
            "[2025-02-22 08:21:43 TP26] Scheduler hit an exception: Traceback (most recent call "
            "last):",
            "RuntimeError: boom",
            "[2025-02-22 08:21:44 TP27] Pyspy dump for PID 77:",
            "Thread 77 (idle): \"MainThread\"",
        ])
        write(logs, "tp1.log", ["[2025-02-22 08:19:45 TP1] Load weight begin. avail mem=78.38 GB",
                                "Cache shape torch.Size([163840, 64])"])
        timeline = analyze([logs], config=config(tmp_path, {"tp_size": 32, "nnodes": 4})).detail
        prints = [row(timeline, "node3.log", n) for n in range(9, 17)]
        assert {(r["world_rank"], r["why"]) for r in prints} == {
            (None, "plain line in a shared file")}
        assert [row(timeline, "node3.log", n)["world_rank"] for n in (18, 20)] == [26, 27]
        assert row(timeline, "tp1.log", 2)["world_rank"] is None


    def test_process_title_with_moe_dp_has_no_dp_rank(self, tmp_path: Path) -> None:
        """SGLang titles a scheduler `sglang::scheduler_ATTN_CP1_MOE_DP1_TP4_EP0`: the `_DP1`
        inside `MOE_DP1` is no DP token (it made the title match no process)."""
        logs = tmp_path / "logs"
        write(logs, "pyspy.txt", ["Process 4321: sglang::scheduler_ATTN_CP1_MOE_DP1_TP4_EP0",
                                  "Python v3.12.3 (/usr/bin/python3.12)"])
        timeline = analyze([logs], config=config(tmp_path, {
            "tp_size": 8, "attn_cp_size": 2, "moe_dp_size": 2, "ep_size": 4})).timeline
        assert [(r["tp_rank"], r["attn_cp_rank"], r["moe_dp_rank"], r["moe_ep_rank"])
                for r in timeline.iter_rows(named=True)] == [(4, 1, 1, 0)] * 2

    def test_torch_stamps_get_no_invented_year(self, tmp_path: Path) -> None:
        """`[E909 08:45:30…]` has no year; with no fully dated line in the set there is none to
        give it, so `ts` stays empty - but the lines are still ordered by month, day and time."""
        logs = tmp_path / "logs"
        write(logs, "a.log", ["[rank0]:[E909 08:45:32.000000001 ProcessGroupNCCL.cpp:1589] x"])
        write(logs, "b.log", ["[rank1]:[E909 08:45:30.000000001 ProcessGroupNCCL.cpp:1589] y"])
        timeline = analyze([logs], config=config(tmp_path, {"tp_size": 2})).timeline
        assert timeline.select("file", "ts", "world_rank").rows() == [
            ("b.log", None, 1), ("a.log", None, 0)]
        # one dated line gives the year
        write(logs, "c.log", ["[2025-09-09 08:45:31 TP1] Decode batch. #running-req: 1"])
        timeline = analyze([logs], config=config(tmp_path, {"tp_size": 2})).timeline
        assert timeline.get_column("ts").to_list() == [
            "2025-09-09T08:45:30", "2025-09-09T08:45:31", "2025-09-09T08:45:32"]


class TestWrappers:
    """Collector and orchestrator wrappers are peeled; their fields are used."""

    def test_cri_and_ray(self, tmp_path: Path) -> None:
        logs = tmp_path / "logs"
        write(logs, "pod.log", [
            "2025-07-25T07:53:08.21748708+08:00 stdout F [2025-07-25 07:53:08 TP2] Scheduler "
            "hit an exception: Traceback (most recent call last):",
            "(RayWorkerWrapper pid=270291, ip=10.175.94.190) [rank3]:[E219 08:58:32.606667496 "
            "ProcessGroupNCCL.cpp:1785] [PG ID 2 PG GUID 3(tp:device) Rank 3] Watchdog caught "
            "collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1572864,"
            " NumelOut=1572864, Timeout(ms)=600000)",
        ])
        timeline = analyze([logs], config=config(tmp_path, {"tp_size": 4})).timeline
        assert row(timeline, "pod.log", 1)["world_rank"] == 2
        ray = row(timeline, "pod.log", 2)
        assert (ray["world_rank"], ray["pid"]) == (3, None)  # the actor's pid is not the writer's

    def test_wrapper_time_in_the_file_clock(self, tmp_path: Path) -> None:
        """A container runtime's zoned time gives a time to lines that print none (tracebacks,
        NCCL), in the clock the file's own stamps use: here the CRI time is UTC and SGLang
        prints UTC+8, learned from the first line that has both. A pod log with no stamp of
        its own anywhere in the set keeps the runtime's UTC."""
        logs = tmp_path / "logs"
        write(logs, "pod0.log", [
            "2025-07-24T23:53:08.217487080Z stderr F [2025-07-25 07:53:08 TP0] Scheduler hit "
            "an exception: Traceback (most recent call last):",
            '2025-07-24T23:53:08.300000000Z stderr F   File "/sgl/scheduler.py", line 2912',
            "2025-07-24T23:53:09.5Z stderr F RuntimeError: boom",
            "2025-07-24T23:53:10.000001Z stdout F node0:11:12 [0] NCCL INFO comm 0x1 rank 0 "
            "nranks 2 cudaDev 0 busId 1000 - Abort COMPLETE",
        ])
        write(logs, "plain.log", ["[2025-07-25 07:53:09 TP1] Decode batch. #running-req: 1"])
        timeline = analyze([logs], config=config(tmp_path, {"tp_size": 2})).timeline
        assert [row(timeline, "pod0.log", n)["ts"] for n in range(1, 5)] == [
            "2025-07-25T07:53:08", "2025-07-25T07:53:08.300", "2025-07-25T07:53:09.500",
            "2025-07-25T07:53:10.000001"]
        assert timeline.get_column("file").to_list() == [
            "pod0.log", "pod0.log", "plain.log", "pod0.log", "pod0.log"]
        other = tmp_path / "other"
        write(other, "pod1.log", ["2025-07-24T23:53:09.5Z stderr F RuntimeError: boom"])
        assert row(analyze([other]).timeline, "pod1.log", 1)["ts"] == "2025-07-24T23:53:09.500"

    def test_docker_json_file(self, tmp_path: Path) -> None:
        """Docker json-file logs: the decoded lines are tagged; a traceback line takes the
        envelope's time in the file's clock (SGLang printed UTC+8 here)."""
        def entry(text: str, at: str) -> str:
            body = text.replace("\\", "\\\\").replace('"', '\\"')
            return f'{{"log":"{body}\\n","stream":"stderr","time":"2026-11-29T{at}Z"}}'
        logs = tmp_path / "logs"
        write(logs, "c-json.log", [
            entry("[2026-11-29 10:00:00 TP1] Scheduler hit an exception: Traceback (most "
                  "recent call last):", "02:00:00.100"),
            entry('  File "/sgl/scheduler.py", line 2912, in event_loop', "02:00:00.200"),
            entry("RuntimeError: CUDA error: an illegal memory access was encountered",
                  "02:00:01.500"),
        ])
        analysis = analyze([logs], config=config(tmp_path, {"tp_size": 2}))
        assert [(r["world_rank"], r["ts"]) for r in analysis.timeline.iter_rows(named=True)] == [
            (1, "2026-11-29T10:00:00"), (1, "2026-11-29T10:00:00.200"),
            (1, "2026-11-29T10:00:01.500")]
        crash = next(f for f in analysis.findings if f.kind == "crash")
        assert [p["world_rank"] for p in crash.processes] == [1]

    def test_collector_date_completes_a_torch_stamp_and_relay_prefix(self, tmp_path: Path
                                                                      ) -> None:
        """sglang#3932: a collector's `[…Z]` gives the year a c10 stamp lacks; olmocr#105: a
        Python logger relaying the server's output (`… - __main__ - INFO - `) is peeled, its
        time used for the traceback lines under it."""
        logs = tmp_path / "logs"
        write(logs, "pod.log", [
            "[2025-02-27T16:30:43.48675097Z] [rank3]:[E227 16:30:43.526290891 ProcessGroupNCCL"
            ".cpp:1785] [PG ID 2 PG GUID 3(tp:device) Rank 3] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE)",
        ])
        write(logs, "relay.log", [
            "2025-03-08 02:04:48,693 - __main__ - INFO - [2025-03-08 02:04:48 TP0] Scheduler hit"
            " an exception: Traceback (most recent call last):",
            '2025-03-08 02:04:48,694 - __main__ - INFO -   File "/sgl/scheduler.py", line 1, in r',
            "2025-03-08 02:04:48,695 - __main__ - INFO - RuntimeError: boom",
        ])
        alone = analyze([logs / "pod.log"], config=config(tmp_path, {"tp_size": 4})).timeline
        assert alone.get_column("ts").to_list() == ["2025-02-27T16:30:43.526290"]
        timeline = analyze([logs], config=config(tmp_path, {"tp_size": 4})).timeline
        relay = [row(timeline, "relay.log", n) for n in (1, 2, 3)]
        assert [(r["source"], r["world_rank"], r["part"]) for r in relay] == [
            ("sglang", 0, 0), ("traceback", 0, 0), ("traceback", 0, 0)]
        assert relay[2]["ts"] == "2025-03-08T02:04:48.695"

    def test_logger_prefixes_alone_date_their_lines(self, tmp_path: Path) -> None:
        """A relaying Python logger's full date stands on its own; SGLang 0.4.2's vLLM-style
        `ERROR 02-09 16:43:26 file.py:112] ` (no year) takes the year of the set, and its
        traceback lines continue the logged record (sglang#3423)."""
        logs = tmp_path / "logs"
        write(logs, "relay.log", ["2025-03-08 02:04:48,695 - __main__ - INFO - RuntimeError: x"])
        assert analyze([logs]).timeline.get_column("ts").to_list() == ["2025-03-08T02:04:48.695"]
        write(logs, "vllm.log", [
            "ERROR 02-09 16:43:26 tp_worker_overlap_thread.py:112] TpModelWorkerClient hit an "
            "exception: Traceback (most recent call last):",
            'ERROR 02-09 16:43:26 tp_worker_overlap_thread.py:112]   File "/sgl/tp_worker.py", '
            "line 109, in forward_thread_func",
        ])
        timeline = analyze([logs]).timeline
        rows = [row(timeline, "vllm.log", n) for n in (1, 2)]
        assert [(r["ts"], r["role"]) for r in rows] == [
            ("2025-02-09T16:43:26", "scheduler"), ("2025-02-09T16:43:26", "scheduler")]
        assert rows[1]["source"] == "traceback"

    def test_ray_actor_pid_is_not_a_scheduler_pid(self, tmp_path: Path) -> None:
        """slime#369 shape: an SGLang engine actor's schedulers all print under the actor's
        `(SGLangEngine pid=6680)`. One prefixed TP3 line under it does not make 6680 TP3's
        pid: a faulthandler dump under the same prefix (another scheduler's crash) stays
        unattributed."""
        logs = tmp_path / "logs"
        write(logs, "driver.log", [
            "(SGLangEngine pid=6680) [2025-09-22 14:35:35 DP1 TP3] Scheduler hit an exception: "
            "Traceback (most recent call last):",
            "(SGLangEngine pid=6680) RuntimeError: boom",
            "(SGLangEngine pid=6680) Fatal Python error: Aborted",
            "(SGLangEngine pid=6680) ",
            "(SGLangEngine pid=6680) Thread 0x00007f1 (most recent call first):",
        ])
        timeline = analyze([logs], config=config(tmp_path, {
            "tp_size": 4, "dp_size": 2, "enable_dp_attention": True})).detail
        assert [row(timeline, "driver.log", n)["world_rank"] for n in range(1, 6)] == [
            3, 3, None, None, None]
        assert row(timeline, "driver.log", 3)["evidence"] is None

    def test_continuation_stays_in_its_wrapper_stream(self, tmp_path: Path) -> None:
        """`kubectl logs --prefix` of several pods interleaves their lines: a traceback line of
        pod sglang-0 inside a record pod sglang-1 opened is not that record's; the same for
        two Ray workers."""
        logs = tmp_path / "logs"
        write(logs, "all.log", [
            "[pod/sglang-1/sglang] [2025-09-09 08:45:30 TP9] Scheduler hit an exception: "
            "Traceback (most recent call last):",
            '[pod/sglang-0/sglang]   File "/sgl/other.py", line 1, in x',
            '[pod/sglang-1/sglang]   File "/sgl/scheduler.py", line 2912, in run',
            "[pod/sglang-1/sglang] RuntimeError: boom",
            "(SGLangEngine pid=11) [2025-09-09 08:45:31 TP3] Scheduler hit an exception: "
            "Traceback (most recent call last):",
            "(SGLangEngine pid=12)   File \"/sgl/other.py\", line 1, in x",
            "(SGLangEngine pid=11) RuntimeError: boom",
            # two pods' records open at once: each line goes on with its own pod's record
            "[pod/sglang-1/sglang] [2025-09-09 08:45:40 TP10] Scheduler hit an exception: "
            "Traceback (most recent call last):",
            "[pod/sglang-0/sglang] [2025-09-09 08:45:40 TP2] Scheduler hit an exception: "
            "Traceback (most recent call last):",
            '[pod/sglang-1/sglang]   File "/sgl/scheduler.py", line 2912, in run',
            '[pod/sglang-0/sglang]   File "/sgl/scheduler.py", line 2912, in run',
            "[pod/sglang-1/sglang] RuntimeError: ten",
            "[pod/sglang-0/sglang] RuntimeError: two",
        ])
        analysis = analyze([logs], config=config(tmp_path, {"tp_size": 16, "nnodes": 2}))
        timeline = analysis.detail
        assert [row(timeline, "all.log", n)["world_rank"] for n in range(1, 14)] == [
            9, None, 9, 9, 3, None, 3, 10, 2, 10, 2, 10, 2]
        records = [row(timeline, "all.log", n)["record"] for n in range(8, 14)]
        assert records[0::2] == [records[0]] * 3 and records[1::2] == [records[1]] * 3
        assert records[0] != records[1]


class TestOptions:
    """--select, --since/--until and --clock-offset."""

    @pytest.fixture()
    def logs(self, tmp_path: Path) -> tuple[Path, Path]:
        logs = tmp_path / "logs"
        write(logs, "a.log", [f"[2026-11-29 10:00:0{t} DP{t // 2} TP{t} EP{t}] step"
                              for t in range(8)])
        return logs, config(tmp_path, {"tp_size": 8, "dp_size": 4, "enable_dp_attention": True,
                                       "ep_size": 8})

    def test_select(self, logs: tuple[Path, Path]) -> None:
        analysis = analyze([logs[0]], config=logs[1])

        def selected(text: str) -> pl.DataFrame:
            return pl.concat(select_rows(analysis, parse_selector(text)))
        assert selected("attn_dp=2")["tp_rank"].to_list() == [4, 5]
        assert selected("DP3 TP7")["tp_rank"].to_list() == [7]
        assert selected("group=attention_tp:2")["world_rank"].to_list() == [2, 3]

    def test_cli_select_since_until(self, logs: tuple[Path, Path],
                                    capsys: pytest.CaptureFixture[str]) -> None:
        code = main(["analyze", str(logs[0]), "--config", str(logs[1]), "--format", "jsonl",
                     "--since", "2026-11-29T10:00:02", "--until", "2026-11-29 10:00:05",
                     "--select", "moe_ep=3"])
        out = capsys.readouterr().out
        assert code == 0
        assert [json.loads(line)["tp_rank"] for line in out.splitlines()] == [3]

    def test_text_view_of_a_selection_shows_head_and_tail(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        """A filtered view is read as a stream: its first and last rows, and a marker
        counting the selected lines between them."""
        logs = tmp_path / "logs"
        write(logs, "node0.log", [f"[2026-11-29 10:00:{s:02d} TP{s % 2}] Decode batch. step {s}"
                                  for s in range(20)])
        code = main(["analyze", str(logs), "--config", str(config(tmp_path, {"tp_size": 2})),
                     "--format", "text", "--select", "tp=1", "--limit", "4"])
        out = capsys.readouterr().out
        assert code == 0
        steps = [int(line.rsplit(" ", 1)[1]) for line in out.splitlines() if "| [2026" in line]
        assert steps == [1, 3, 17, 19]
        assert "... 6 lines not shown (use --limit 0 to show all) ..." in out
        assert "shown: the selected lines, at most 4" in out

    def test_clock_offset_reorders(self, tmp_path: Path) -> None:
        logs = tmp_path / "logs"
        write(logs, "a.log", ["gpu-a:11:11 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
                              "[2026-11-29 10:00:10] on a"])
        write(logs, "b.log", ["gpu-b:12:12 [0] NCCL INFO NCCL version 2.21.5+cuda12.4",
                              "[2026-11-29 10:00:05] on b"])
        plain = analyze([logs]).timeline.filter(pl.col("source") == "sglang")["file"].to_list()
        shifted = analyze([logs], clock_offsets={"gpu-b": 10.0}).timeline.filter(
            pl.col("source") == "sglang")["file"].to_list()
        assert plain == ["b.log", "a.log"] and shifted == ["a.log", "b.log"]


class TestOutputs:
    """Machine formats carry the contract's columns."""

    def test_formats(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        logs = tmp_path / "logs"
        write(logs, "a.log", ["[2026-11-29 10:00:00 TP1] hello [bold]x[/bold]"])
        cfg = config(tmp_path, {"tp_size": 2})
        for fmt in ("jsonl", "csv", "parquet"):
            out = tmp_path / f"out.{fmt}"
            assert main(["analyze", str(logs), "--config", str(cfg), "--format", fmt,
                         "-o", str(out)]) == 0
            frame = {"jsonl": pl.read_ndjson, "csv": pl.read_csv,
                     "parquet": pl.read_parquet}[fmt](out)
            assert frame.columns[:4] == ["file", "line", "part", "order"]
            assert frame["text"][0] == "[2026-11-29 10:00:00 TP1] hello [bold]x[/bold]"
        assert main(["analyze", str(logs), "--config", str(cfg), "--format", "rich"]) == 0
        assert "hello [bold]x[/bold]" in capsys.readouterr().out

    def test_files_hold_what_stdout_shows(self, tmp_path: Path,
                                          capsysbinary: pytest.CaptureFixture[bytes]) -> None:
        """Files are written by polars' streaming sinks, stdout batch by batch: the same bytes,
        in timeline order, over many batches and files."""
        logs = tmp_path / "logs"
        for rank in range(4):
            write(logs, f"rank{rank}.log", [
                f"[2026-11-29 {n // 3600:02d}:{n % 3600 // 60:02d}:{n % 60:02d} TP{rank}] Decode "
                f'batch "{n}"' for n in range(0, 30000, 3)])  # 40,000 rows: several batches
        cfg = config(tmp_path, {"tp_size": 4})
        for fmt in ("jsonl", "csv"):
            out = tmp_path / f"out.{fmt}"
            assert main(["analyze", str(logs), "--config", str(cfg), "--format", fmt,
                         "-o", str(out)]) == 0
            capsysbinary.readouterr()
            assert main(["analyze", str(logs), "--config", str(cfg), "--format", fmt]) == 0
            assert out.read_bytes() == capsysbinary.readouterr().out


def test_node_rank_contradiction(tmp_path: Path) -> None:
    """node1's log says node_rank=0: the process is kept, its node and GPU are not."""
    logs = tmp_path / "logs"
    write(logs, "node1.log", [
        "[2026-11-29 10:00:00] server_args=ServerArgs(model_path='/m', tp_size=16, nnodes=2, "
        "node_rank=0, device='cuda')",
        "[2026-11-29 10:00:03 TP10] Load weight begin. avail mem=78.38 GB",
    ])
    analysis = analyze([logs], config=config(tmp_path, {"tp_size": 16, "nnodes": 2}))
    line = row(analysis.timeline, "node1.log", 2)
    assert (line["world_rank"], line["node_rank"], line["gpu_id"]) == (10, None, None)
    assert any(c["kind"] == "node-rank-mismatch" for c in analysis.contradictions)


class TestCommunicators:
    """NCCL communicator lines place processes whose host is not mapped to a node."""

    def test_comm_rank_through_known_members(self, tmp_path: Path) -> None:
        logs = tmp_path / "logs"
        write(logs, "node0.log", [
            "[2026-11-29 10:00:00] server_args=ServerArgs(model_path='/m', tp_size=4, nnodes=2,"
            " node_rank=0, device='cuda')",
            "[2026-11-29 10:00:01 TP0] Init torch distributed begin.",
            *(f"h0:10{r}:10{r} [{r}] NCCL INFO comm 0x55{r} rank {r} nranks 4 cudaDev {r} "
              f"nvmlDev {r} busId {r}a000 commId 0xabc - Init COMPLETE" for r in (0, 1)),
        ])
        for r in (2, 3):
            write(logs, f"nccl.h1.20{r}.txt", [
                f"h1:20{r}:20{r} [{r - 2}] NCCL INFO comm 0x66{r} rank {r} nranks 4 cudaDev "
                f"{r - 2} nvmlDev {r - 2} busId {r}a000 commId 0xabc - Init COMPLETE",
                f"h1:20{r}:29{r} [0] NCCL INFO [Proxy Service] Device {r - 2} CPU core 105",
            ])
        timeline = analyze([logs], config=config(tmp_path, {"tp_size": 4, "nnodes": 2})).timeline
        for r in (2, 3):
            comm = row(timeline, f"nccl.h1.20{r}.txt", 1)
            assert (comm["world_rank"], comm["node_rank"], comm["evidence"]) == (
                r, 1, "group-rank")
            assert row(timeline, f"nccl.h1.20{r}.txt", 2)["world_rank"] == r

    def test_ambiguous_communicator_concludes_nothing(self, tmp_path: Path) -> None:
        """attention_tp has four 2-wide instances: with no known member, rank 1 is unplaced."""
        logs = tmp_path / "logs"
        write(logs, "nccl.txt", ["h1:300:300 [1] NCCL INFO comm 0x1 rank 1 nranks 2 cudaDev 1 "
                                 "nvmlDev 1 busId 1a000 commId 0xdef - Init COMPLETE"])
        cfg = config(tmp_path, {"tp_size": 8, "dp_size": 4, "enable_dp_attention": True,
                                "nnodes": 2})
        assert row(analyze([logs], config=cfg).timeline, "nccl.txt", 1)["world_rank"] is None


class TestRolesAndRecords:
    """Non-scheduler roles, and records whose lines may interleave."""

    def test_roles(self, tmp_path: Path) -> None:
        logs = tmp_path / "logs"
        write(logs, "main.log", [
            "[2026-11-29 10:00:00] DetokenizerManager hit an exception: Traceback (most recent "
            "call last):",
            '  File "/sgl/detokenizer_manager.py", line 262, in run_detokenizer_process',
            "Process 10366: sglang::data_parallel_controller",
            "W0922 18:51:16.217000 10366 torch/distributed/run.py:774] *****",
        ])
        timeline = analyze([logs], config=config(tmp_path, {"tp_size": 2})).timeline
        assert row(timeline, "main.log", 1)["role"] == "detokenizer"
        assert row(timeline, "main.log", 2)["role"] == "detokenizer"
        assert row(timeline, "main.log", 4)["role"] == "dp_controller"
        assert row(timeline, "main.log", 4)["world_rank"] is None

    def test_simultaneous_tracebacks_are_not_guessed(self, tmp_path: Path) -> None:
        logs = tmp_path / "logs"
        write(logs, "node0.log", [
            "[2026-11-29 10:00:05 TP1] Scheduler hit an exception: Traceback (most recent call "
            "last):",
            "[2026-11-29 10:00:05 TP2] Scheduler hit an exception: Traceback (most recent call "
            "last):",
            '  File "/sgl/scheduler.py", line 2912, in run_scheduler_process',
            '  File "/sgl/scheduler.py", line 2912, in run_scheduler_process',
            "[2026-11-29 10:00:09 TP3] Scheduler hit an exception: Traceback (most recent call "
            "last):",
            "RuntimeError: alone",
        ])
        analysis = analyze([logs], config=config(tmp_path, {"tp_size": 4}))
        assert [row(analysis.timeline, "node0.log", n)["world_rank"] for n in range(1, 7)] == [
            1, 2, None, None, 3, 3]
        assert analysis.unattributed_reasons().get("interleaved records") == 2

    def test_cpp_terminate_in_a_shared_file_is_not_pinned_on_the_line_before(
            self, tmp_path: Path) -> None:
        """`terminate called …` opens a record of whichever process aborted (sglang#1693
        shape): in a file many processes write to it does not continue the torch line before
        it, so it is left unattributed, and the crash is reported without a culprit."""
        logs = tmp_path / "logs"
        write(logs, "server.log", [
            "[2024-10-18 10:12:00 TP0] Decode batch. #running-req: 12, #token: 4000",
            "[rank3]:[E1018 10:22:01.223456789 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog "
            "caught collective operation timeout: WorkNCCL(SeqNum=9141, OpType=_ALLGATHER_BASE, "
            "NumelIn=19008, NumelOut=152064, Timeout(ms)=600000) ran for 600021 milliseconds "
            "before timing out.",
            "terminate called after throwing an instance of 'c10::DistBackendError'",
            "  what():  [PG 3 Rank 5] Process group watchdog thread terminated with exception: "
            "[Rank 5] Watchdog caught collective operation timeout",
            "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/"
            "ProcessGroupNCCL.cpp:609 (most recent call first):",
            "[2024-10-18 10:22:02] Received sigquit from a child process. It usually means the "
            "child failed.",
        ])
        analysis = analyze([logs], config=config(tmp_path, {"tp_size": 8}))
        assert row(analysis.timeline, "server.log", 2)["world_rank"] == 3
        assert [row(analysis.timeline, "server.log", n)["world_rank"] for n in (3, 4, 5)] == [
            None, None, None]
        # the abort is torch taking a process down after its collective timed out: the hang's
        # symptom (c10d's watchdog), not a crash of its own
        assert [f.kind for f in analysis.findings if f.kind == "crash"] == []
        hang = next(f for f in analysis.findings if f.kind == "collective-hang")
        assert [p["world_rank"] for p in hang.waiting] == [3]

    def test_cpp_terminate_on_a_cuda_fault_is_a_crash(self, tmp_path: Path) -> None:
        """The same abort whose `what()` is a CUDA fault the watchdog found is a crash."""
        logs = tmp_path / "logs"
        write(logs, "server.log", [
            "terminate called after throwing an instance of 'c10::DistBackendError'",
            "  what():  [PG ID 2 PG GUID 3(tp:device) Rank 5] Process group watchdog thread "
            "terminated with exception: CUDA error: an illegal memory access was encountered",
        ])
        analysis = analyze([logs], config=config(tmp_path, {"tp_size": 8}))
        crash = [f for f in analysis.findings if f.kind == "crash"]
        assert len(crash) == 1 and [p["world_rank"] for p in crash[0].processes] == [5]
        assert "illegal memory access" in crash[0].summary

    def test_unnamed_crash_of_the_main_process_names_its_exception(
            self, tmp_path: Path) -> None:
        """A crash of a process that is no scheduler is reported by its role, with the
        exception closing its traceback."""
        logs = tmp_path / "logs"
        write(logs, "s.log", [
            "[2026-11-29 10:00:00 TP0] Load weight begin.",
            "[2026-11-29 10:00:01] TokenizerManager hit an exception: Traceback (most recent "
            "call last):",
            "RuntimeError: boom",
        ])
        analysis = analyze([logs], config=config(tmp_path, {"tp_size": 2}))
        crash = [f for f in analysis.findings if f.kind == "crash"]
        assert [(f.summary, f.processes) for f in crash] == [
            ("the main process crashed: RuntimeError: boom", [])]

    def test_a_member_that_only_dumped_debug_info_is_no_culprit(self, tmp_path: Path) -> None:
        """sglang#10216 shape: rank 1 times out in the TP group; ranks 2 and 6 print only the
        default group's flight-recorder dump lines. They saw a timeout too: their progress in
        the TP group is unknown, so they are not named as never having reached it."""
        logs = tmp_path / "logs"
        write(logs, "node0.log", [
            "[rank1]:[E909 08:45:30.126335825 ProcessGroupNCCL.cpp:2252] [PG ID 2 PG GUID 3 "
            "Rank 1]  failure detected by watchdog at work sequence id: 40231 PG status: last "
            "enqueued work: 40267, last completed work: 40230",
            "[rank2]:[E909 08:45:31.916910323 ProcessGroupNCCL.cpp:1589] [PG ID 0 PG GUID 0 Rank "
            "2] ProcessGroupNCCL preparing to dump debug info. Include stack trace: 1",
            "[rank6]:[E909 08:45:31.970959174 ProcessGroupNCCL.cpp:1870] [PG ID 0 PG GUID 0 Rank "
            "6] Received a dump signal due to a collective timeout from this local rank and we "
            "will try our best to dump the debug info. Last enqueued NCCL work: -1, last "
            "completed NCCL work: -1.",
            "[rank3]:[E909 08:45:32.000000000 ProcessGroupNCCL.cpp:1589] [PG ID 2 PG GUID 3 Rank "
            "3] ProcessGroupNCCL preparing to dump debug info. Include stack trace: 1",
            "[2025-09-09 08:45:20 TP5] Decode batch. #running-req: 1",
        ])
        analysis = analyze([logs], config=config(tmp_path, {"tp_size": 8}))
        hang = next(f for f in analysis.findings if f.kind == "collective-hang")
        assert [p["world_rank"] for p in hang.processes] == [5]  # seen, and never timed out
        assert "world ranks 2, 3, 6 only reported a timeout without its SeqNum" in hang.summary

    def test_a_member_whose_work_failed_is_no_culprit(self, tmp_path: Path) -> None:
        """sglang#3424 shape: torch prints `To avoid data inconsistency…` and `Some NCCL
        operations have failed or timed out…` only from WorkNCCL::handleException, after the
        member's own work failed: ranks 2 and 4 were waiting too, not stuck before the
        collective. Rank 5, seen but silent, is the one that never reached it."""
        logs = tmp_path / "logs"
        write(logs, "node0.log", [
            "[rank2]:[E210 02:06:33.393455189 ProcessGroupNCCL.cpp:636] [Rank 2] To avoid data "
            "inconsistency, we are taking the entire process down.",
            "[rank0]:[E210 02:06:33.393862144 ProcessGroupNCCL.cpp:1595] [PG ID 2 PG GUID 3 "
            "Rank 0] Process group watchdog thread terminated with exception: [Rank 0] Watchdog "
            "caught collective operation timeout: WorkNCCL(SeqNum=1522789, OpType=_ALLGATHER_BASE,"
            " NumelIn=298960, NumelOut=4783360, Timeout(ms)=600000) ran for 600093 milliseconds "
            "before timing out.",
            "[rank4]:[E210 02:06:33.400000000 ProcessGroupNCCL.cpp:630] [Rank 4] Some NCCL "
            "operations have failed or timed out. Due to the asynchronous nature of CUDA kernels,"
            " subsequent GPU operations might run on corrupted/incomplete data.",
            "[2025-02-10 02:06:00 TP5] Decode batch. #running-req: 1",
            "[2025-02-10 02:06:00 TP1] Decode batch. #running-req: 1",
            "[2025-02-10 02:06:00 TP3] Decode batch. #running-req: 1",
        ])
        analysis = analyze([logs], config=config(tmp_path, {"tp_size": 6}))
        hang = next(f for f in analysis.findings if f.kind == "collective-hang")
        assert [p["world_rank"] for p in hang.processes] == [1, 3, 5]
        assert "world ranks 2, 4 only reported a timeout without its SeqNum" in hang.summary

    def test_missing_processes_of_native_dp_name_their_replica(self, tmp_path: Path) -> None:
        """With native-DP replicas world ranks repeat: the missing list says whose."""
        logs = tmp_path / "logs"
        write(logs, "node0.log", ["[2026-11-29 10:00:00 DP0 TP0] Load weight begin."])
        analysis = analyze([logs], config=config(tmp_path, {"tp_size": 2, "dp_size": 2}))
        missing = next(f for f in analysis.findings if f.kind == "missing-process")
        assert missing.summary.endswith(
            "left no line: replica 0 world rank 1; replica 1 world ranks 0, 1")

    def test_sglang_scheduler_watchdog_is_an_error_finding(self, tmp_path: Path) -> None:
        """sglang#17941 shape: SGLang's own watchdog fires on PP1's schedulers and the server
        is killed. That is an error naming those processes, with the kill attached."""
        logs = tmp_path / "logs"
        write(logs, "server.log", [
            "[2026-01-29 13:07:30 PP0 TP0] Decode batch. #running-req: 1",
            "[2026-01-29 13:12:37 PP1 TP0] Scheduler watchdog timeout (self.watchdog_timeout=300,"
            " self.soft=False)",
            "[2026-01-29 13:12:37 PP1 TP1] Scheduler watchdog timeout (self.watchdog_timeout=300,"
            " self.soft=False)",
            "[2026-01-29 13:12:42] SIGQUIT received. signum=None, frame=None. It usually means one"
            " child failed.",
            "Killed",
        ])
        analysis = analyze([logs], config=config(tmp_path, {"tp_size": 2, "pp_size": 2}))
        found = [f for f in analysis.findings if f.severity == "error"]
        assert [f.kind for f in found] == ["watchdog-timeout"]
        assert [(p["world_rank"], p["pp_rank"]) for p in found[0].processes] == [(2, 1), (3, 1)]
        assert "watchdog_timeout=300 s" in found[0].summary
        assert found[0].summary.startswith("world ranks 2, 3 hung: SGLang's watchdog fired")
        assert [c["kind"] for c in found[0].consequences] == ["kill-cascade"]
        assert [e["line"] for e in found[0].evidence] == [2, 3, 4, 5]
        # the same watchdog in the detokenizer (utils/watchdog.py's debug_name)
        write(tmp_path / "detok", "server.log", [
            "[2026-01-29 13:12:37] DetokenizerManager watchdog timeout (self.watchdog_timeout=300"
            ", self.soft=False)"])
        detok = analyze([tmp_path / "detok"], config=config(tmp_path, {"tp_size": 2}))
        assert [f.summary.split(":")[0] for f in detok.findings if f.severity == "error"] == [
            "the detokenizer process hung"]

    def test_npu_and_native_faults_are_crashes(self, tmp_path: Path) -> None:
        """Ascend's `Kernel task happen error` (sglang#12464) on TP3, and a UCX `Caught signal
        11` of a process no line names, are crashes."""
        logs = tmp_path / "logs"
        write(logs, "npu.log", [
            "[2025-10-31 21:35:00 TP3] Decode batch. #running-req: 1",
            "[rank3]:[E1031 21:35:04.838006795 compiler_depend.ts:57] Kernel task happen error, "
            "retCode=0x31, [vector core exception].",
        ])
        analysis = analyze([logs], config=config(tmp_path, {"tp_size": 8, "device": "npu"}))
        crash = next(f for f in analysis.findings if f.kind == "crash")
        assert [p["world_rank"] for p in crash.processes] == [3]
        write(tmp_path / "ucx", "prefill.log", [
            "[2025-05-30 10:00:00 TP0] Prefill batch. #new-seq: 1",
            "[2025-05-30 10:00:00 TP1] Prefill batch. #new-seq: 1",
            "[gpu-node-1:12796:1:13303] Caught signal 11 (Segmentation fault: invalid "
            "permissions for mapped object at address 0x7fbd60001400)",
        ])
        analysis = analyze([tmp_path / "ucx"], config=config(tmp_path, {"tp_size": 2}))
        crash = next(f for f in analysis.findings if f.kind == "crash")
        assert crash.processes == []
        assert "Caught signal 11 (Segmentation fault" in crash.summary

    def test_the_only_scheduler_is_named_by_its_own_messages(self, tmp_path: Path) -> None:
        """sglang#12827 shape: with TP1 and no DP/PP there is one scheduler and it prints no
        rank tokens. Its own messages (`Load weight begin`, `Scheduler hit an exception`) name
        it; a main-process line stays the main process's; with two schedulers nothing is
        concluded."""
        logs = tmp_path / "logs"
        write(logs, "server.log", [
            "[2025-11-06 02:08:27] server_args=ServerArgs(model_path='/m', tp_size=1)",
            "[2025-11-06 02:08:27] Load weight begin. avail mem=15.12 GB",
            "[2025-11-06 02:08:28] Scheduler hit an exception: Traceback (most recent call last):",
            "RuntimeError: boom",
            "[2025-11-06 02:10:00] Received sigquit from a child process. It usually means the "
            "child failed.",
        ])
        analysis = analyze([logs], config=config(tmp_path, {"tp_size": 1}))
        timeline = analysis.detail
        assert [(row(timeline, "server.log", n)["world_rank"], row(timeline, "server.log", n)[
            "evidence"]) for n in range(2, 5)] == [
            (0, "only-scheduler"), (0, "only-scheduler"), (0, "continuation")]
        assert row(timeline, "server.log", 5)["role"] == "main"
        crash = next(f for f in analysis.findings if f.kind == "crash")
        assert [p["world_rank"] for p in crash.processes] == [0]
        two = analyze([logs], config=config(tmp_path, {"tp_size": 2})).detail
        assert row(two, "server.log", 2)["world_rank"] is None
        assert row(two, "server.log", 2)["role"] == "scheduler"
        assert row(two, "server.log", 2)["why"] == "no rank prefix"  # not "not a scheduler"

    def test_unnamed_scheduler_crash_behind_a_collector_wrapper(self, tmp_path: Path) -> None:
        """A scheduler's crash that no line ties to one of two schedulers is "a scheduler that
        no line identifies", and its message is quoted after the SGLang stamp, not after the
        collector's `[…Z]`."""
        logs = tmp_path / "logs"
        write(logs, "server.log", [
            "[2025-11-06 02:08:20 TP0] Load weight begin. avail mem=15.12 GB",
            "[2025-11-06 02:08:20 TP1] Load weight begin. avail mem=15.12 GB",
            "[2025-11-06T02:08:28.503Z] [2025-11-06 02:08:28] Scheduler hit an exception: "
            "Traceback (most recent call last):",
        ])
        analysis = analyze([logs], config=config(tmp_path, {"tp_size": 2}))
        crash = next(f for f in analysis.findings if f.kind == "crash")
        assert crash.summary == ("a scheduler that no line identifies crashed: Scheduler hit an"
                                 " exception: Traceback (most recent call last):")

    def test_multiprocessing_child_death_is_a_crash_of_its_own(self, tmp_path: Path) -> None:
        """sglang#5762 shape: `Process Process-6:` and the traceback after it are a child
        process dying. In a file two schedulers write to, it is not the continuation of the
        line before it, and the crash is reported without a culprit."""
        logs = tmp_path / "logs"
        write(logs, "s.log", [
            "[2026-11-29 10:00:00 TP0] Load weight begin.",
            "[2026-11-29 10:00:00 TP1] Load weight begin.",
            "Process Process-6:",
            "Traceback (most recent call last):",
            '  File "/usr/lib/python3.10/multiprocessing/process.py", line 314, in _bootstrap',
            "OSError: [Errno 12] Cannot allocate memory",
        ])
        analysis = analyze([logs], config=config(tmp_path, {"tp_size": 2}))
        timeline = analysis.detail
        assert [row(timeline, "s.log", n)["world_rank"] for n in range(1, 7)] == [
            0, 1, None, None, None, None]
        assert len({row(timeline, "s.log", n)["record"] for n in range(3, 7)}) == 1
        crash = [f for f in analysis.findings if f.kind == "crash"]
        assert [(f.summary, f.processes) for f in crash] == [
            ("a process that no line identifies crashed: OSError: [Errno 12] Cannot allocate "
             "memory", [])]

    def test_named_crash_says_an_unnamed_fatal_line_came_first(self, tmp_path: Path) -> None:
        """The root is the first crash of a scheduler; a fatal line before it that names no
        process is pointed out rather than hidden."""
        logs = tmp_path / "logs"
        write(logs, "s.log", [
            "[2026-11-29 10:00:00 TP0] Load weight begin.",
            "Fatal Python error: Aborted",
            "[2026-11-29 10:00:05 TP1] Scheduler hit an exception: Traceback (most recent call "
            "last):",
            "RuntimeError: CUDA error: an illegal memory access was encountered",
        ])
        analysis = analyze([logs], config=config(tmp_path, {"tp_size": 2}))
        crash = [f for f in analysis.findings if f.kind == "crash"]
        assert [p["world_rank"] for p in crash[0].processes] == [1]
        assert crash[0].summary.endswith("(but 1 fatal line(s) before it name no process, the "
                                         "first at s.log:2)")

    def test_sglang_02_gpu_prefix_and_an_uncaught_traceback(self, tmp_path: Path) -> None:
        """SGLang 0.2.x lines `[gpu=N] …` name the GPU, so the process on it (one node);
        `Exception in ModelTpServer:` and its traceback have no prefix at all, so in a file
        all workers write to they belong to no one the logs name (not to the line before)."""
        logs = tmp_path / "logs"
        write(logs, "server.log", [
            "server_args=ServerArgs(model_path='meta-llama/Meta-Llama-3-70B', tp_size=4)",
            "[gpu=0] Init nccl begin.",
            "[gpu=3] Load weight begin. avail mem=78.60 GB",
            "[gpu=0] Decode batch. #running-req: 3, #token: 1200, token usage: 0.01",
            "Exception in ModelTpServer:",
            "Traceback (most recent call last):",
            '  File "/sglang/srt/managers/tp_worker.py", line 209, in exposed_step',
            "RuntimeError: CUDA error: an illegal memory access was encountered",
        ])
        analysis = analyze([logs], config=config(tmp_path, {"tp_size": 4}))
        timeline = analysis.timeline
        assert [(row(timeline, "server.log", n)["world_rank"],
                 row(timeline, "server.log", n)["evidence"]) for n in (2, 3, 4)] == [
            (0, "gpu-prefix"), (3, "gpu-prefix"), (0, "gpu-prefix")]
        assert [row(timeline, "server.log", n)["world_rank"] for n in range(5, 9)] == [
            None] * 4
        crash = [f for f in analysis.findings if f.kind == "crash"]
        assert len(crash) == 1 and crash[0].processes == []
        # (the worker's own header opens the crash: 0.2.x logs it and re-raises)
        assert [e["line"] for e in crash[0].evidence] == [5]
        assert crash[0].summary == ("a scheduler that no line identifies crashed: RuntimeError: "
                                    "CUDA error: an illegal memory access was encountered")

    def test_uncaught_traceback_in_a_per_process_file_keeps_its_process(
            self, tmp_path: Path) -> None:
        """The same traceback in a file of one process is that process's (evidence `file`),
        when the set is laid out one process per file."""
        logs = tmp_path / "logs"
        write(logs, "tp0.log", ["[2026-11-29 10:00:00 TP0] Load weight begin. avail mem=78.60 GB"])
        write(logs, "tp1.log", [
            "[2026-11-29 10:00:00 TP1] Load weight begin. avail mem=78.60 GB",
            "Traceback (most recent call last):",
            "RuntimeError: CUDA error: an illegal memory access was encountered",
        ])
        analysis = analyze([logs], config=config(tmp_path, {"tp_size": 2}))
        assert [(row(analysis.timeline, "tp1.log", n)["world_rank"],
                 row(analysis.timeline, "tp1.log", n)["evidence"]) for n in (2, 3)] == [
            (1, "file"), (1, "file")]
        crash = [f for f in analysis.findings if f.kind == "crash"]
        assert [p["world_rank"] for p in crash[0].processes] == [1]


def test_progress_reports_every_stage_in_order(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    write(logs, "a.log", ["[2026-11-29 10:00:00 TP1] hello"])
    seen: list[tuple[str, int, int]] = []
    analyze([logs], progress=lambda stage, done, total: seen.append((stage, done, total)))
    stages = [s for s, _, _ in seen]
    assert sorted(set(stages), key=stages.index) == ["reading", "parsing", "attributing",
                                                    "diagnosing", "done"]
    assert stages == sorted(stages, key=STAGES.index)  # never back to an earlier stage
    assert all(0 <= done <= total for _, done, total in seen)


def test_progress_bar_is_not_a_continuation(tmp_path: Path) -> None:
    """A tqdm bar after another process's line names no process by itself; nor does a stray
    traceback frame after a one-line message in a file two processes write to."""
    logs = tmp_path / "logs"
    write(logs, "node0.log", [
        "[2026-11-29 10:00:00 TP0] Load weight begin. avail mem=78.38 GB",
        "[2026-11-29 10:00:00 TP1] Load weight begin. avail mem=78.38 GB",
        "Loading safetensors checkpoint shards:  50% Completed | 81/163 [00:30<00:30,  2.24it/s]",
        '  File "/sgl/scheduler.py", line 2912, in run_scheduler_process',
    ])
    timeline = analyze([logs], config=config(tmp_path, {"tp_size": 2})).detail
    assert row(timeline, "node0.log", 3)["source"] == "tqdm"
    assert row(timeline, "node0.log", 3)["world_rank"] is None
    assert row(timeline, "node0.log", 4)["world_rank"] is None
    assert row(timeline, "node0.log", 4)["why"] == "plain line in a shared file"


def _decode(ranks: range, second: int, prefix: str = "") -> list[str]:
    return [f"[2026-01-10 10:00:{second:02d} {prefix}TP{r}] Decode batch, #running-req: 12, "
            "#token: 3456, token usage: 0.05, gen throughput (token/s): 512.30, #queue-req: 0"
            for r in ranks]


class TestDiagnosisOfSGLangMessages:
    """SGLang's own crash, watchdog and shutdown messages (0.5.9-0.5.23 code) and torch's."""

    def test_a_warning_about_cuda_errors_is_no_crash(self, tmp_path: Path) -> None:
        """model_config.py warns that a context length "may lead to … CUDA errors" on every
        rank; the crash is TP2's."""
        logs = tmp_path / "logs"
        write(logs, "s.log", [
            *(f"[2026-01-09 09:59:10 TP{r}] Warning: User-specified context_length (262144) is "
              "greater than the derived context_length (131072). This may lead to incorrect "
              "model outputs or CUDA errors." for r in range(4)),
            *_decode(range(4), 0),
            "[2026-01-10 10:00:20 TP2] Scheduler hit an exception: Traceback (most recent call "
            "last):",
            "RuntimeError: Decode out of memory. Try to lower your batch size.",
        ])
        crash = [f for f in analyze([logs], config=config(tmp_path, {"tp_size": 4})).findings
                 if f.kind == "crash"]
        assert [[p["world_rank"] for p in f.processes] for f in crash] == [[2]]

    def test_a_crash_of_the_detokenizer_before_the_schedulers_is_the_root(
            self, tmp_path: Path) -> None:
        logs = tmp_path / "logs"
        write(logs, "node0.log", [
            "[2026-01-10 10:00:20] DetokenizerManager hit an exception: Traceback (most recent "
            "call last):",
            "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xe4 in position 0",
        ])
        write(logs, "node1.log", [
            "[2026-01-10 10:00:26 DP2 TP4 EP4] Scheduler hit an exception: Traceback (most "
            "recent call last):",
            "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
            "NCCLUtils.hpp:317, remote process exited or there was a network error",
        ])
        analysis = analyze([logs], config=config(tmp_path, {
            "tp_size": 8, "dp_size": 4, "enable_dp_attention": True, "ep_size": 8,
            "moe_a2a_backend": "deepep", "nnodes": 2}))
        crash = next(f for f in analysis.findings if f.kind == "crash")
        assert crash.processes == [] and [p["world_rank"] for p in crash.waiting] == [4]
        assert crash.summary.startswith("the detokenizer process crashed: UnicodeDecodeError")

    def test_in_one_second_the_victim_is_not_the_root(self, tmp_path: Path) -> None:
        """SGLang stamps whole seconds: TP0's `remote process exited` and TP2's illegal memory
        access share 10:00:20, and TP0's file sorts first; the root is TP2's fault."""
        logs = tmp_path / "logs"
        write(logs, "rank0.log", [
            "[2026-01-10 10:00:20 TP0] Scheduler hit an exception: Traceback (most recent call "
            "last):",
            "torch.distributed.DistBackendError: NCCL error in: NCCLUtils.hpp:317, remote process"
            " exited or there was a network error",
        ])
        write(logs, "rank2.log", [
            "[2026-01-10 10:00:20 TP2] Scheduler hit an exception: Traceback (most recent call "
            "last):",
            "RuntimeError: CUDA error: an illegal memory access was encountered",
        ])
        crash = next(f for f in analyze([logs], config=config(tmp_path, {"tp_size": 4})).findings
                     if f.kind == "crash")
        assert [p["world_rank"] for p in crash.processes] == [2]
        assert [p["world_rank"] for p in crash.waiting] == [0]

    def test_ranks_that_print_no_batch_lines_are_not_stalled(self, tmp_path: Path) -> None:
        """Only the statistics rank prints `Decode batch`: TP1-3 fall quiet after startup in a
        healthy run. A rank whose watchdog fired is not a reason to call its peers stalled."""
        logs = tmp_path / "logs"
        write(logs, "s.log", [
            *(f"[2026-01-10 10:00:30 TP{r}] Capture cuda graph end. Time elapsed: 10.00 s"
              for r in range(4)),
            *(line for minute in range(1, 10) for line in [
                f"[2026-01-10 10:0{minute}:00 TP0] Decode batch, #running-req: 1"]),
        ])
        analysis = analyze([logs], config=config(tmp_path, {"tp_size": 4}))
        assert [f.kind for f in analysis.findings] == []
        write(logs, "s.log", [
            *_decode(range(4), 0),
            "[2026-01-10 10:05:10 TP3] Scheduler watchdog timeout (self.watchdog_timeout=300, "
            "self.soft=False)",
        ])
        analysis = analyze([logs], config=config(tmp_path, {"tp_size": 4}))
        assert [f.kind for f in analysis.findings] == ["watchdog-timeout"]

    def test_a_soft_watchdog_is_a_warning(self, tmp_path: Path) -> None:
        logs = tmp_path / "logs"
        write(logs, "s.log", [
            *_decode(range(4), 0),
            "[2026-01-10 10:00:12 TP1] Scheduler watchdog timeout (self.watchdog_timeout=10.0, "
            "self.soft=True)",
            *_decode(range(4), 30),
        ])
        found = analyze([logs], config=config(tmp_path, {"tp_size": 4})).findings
        assert [(f.kind, f.severity) for f in found] == [("watchdog-timeout", "warning")]
        assert "soft watchdog" in found[0].summary

    def test_a_child_killed_by_a_signal_is_a_crash(self, tmp_path: Path) -> None:
        """`Subprocess scheduler_2 (pid=…) crashed with exit code -9` with no traceback of its
        own (the OOM killer): a crash, named through the PID when a line gave it."""
        logs = tmp_path / "logs"
        write(logs, "s.log", [
            *_decode(range(4), 0),
            "[2026-01-10 10:00:21] Subprocess scheduler_2 (pid=41233) crashed with exit code -9."
            " Triggering SIGQUIT for cleanup...",
            "[2026-01-10 10:00:21] SIGQUIT received. signum=3, frame=<frame at 0x7f>. It usually "
            "means one child failed.",
            "[2026-01-10 10:00:22] Scheduler or DataParallelController 41230 terminated with 0",
        ])
        analysis = analyze([logs], config=config(tmp_path, {"tp_size": 4}))
        crash = next(f for f in analysis.findings if f.kind == "crash")
        assert crash.processes == [] and "crashed with exit code -9" in crash.summary
        assert row(analysis.timeline, "s.log", 6)["role"] == "main"
        write(logs, "pyspy.log", [
            "[2026-01-10 09:59:00 TP2] Pyspy dump for PID 41233 (py-spy dump --native --pid "
            "41233):"])
        crash = next(f for f in analyze([logs], config=config(tmp_path, {"tp_size": 4})).findings
                     if f.kind == "crash")
        assert [p["world_rank"] for p in crash.processes] == [2]

    def test_py_spy_dump_is_not_a_scheduler_line_by_itself(self, tmp_path: Path) -> None:
        """0.5.23's detokenizer watchdog dumps its own PID: the title names the process."""
        logs = tmp_path / "logs"
        write(logs, "s.log", [
            "[2026-01-10 10:00:40] Pyspy dump for PID 6100 (py-spy dump --native --pid 6100):",
            "Process 6100: sglang::detokenizer",
            'Thread 6100 (idle): "MainThread"',
            # a scheduler's own watchdog dumps its own PID (0.5.23's failure messages)
            "[2026-01-10 10:00:41 TP0] Pyspy failed (py-spy dump --native --pid 6101). Error: x",
            "[2026-01-10 10:00:42 TP0] All pyspy dump attempts failed for PID 6101.",
        ])
        timeline = analyze([logs], config=config(tmp_path, {"tp_size": 1})).timeline
        assert [row(timeline, "s.log", n)["world_rank"] for n in range(1, 4)] == [None] * 3
        assert [row(timeline, "s.log", n)["role"] for n in (2, 3)] == ["detokenizer"] * 2
        assert [row(timeline, "s.log", n)["pid"] for n in (4, 5)] == [6101, 6101]
        # the main process's dump of a scheduler before a crash: the stack is that scheduler's
        write(logs, "s.log", [
            "[2026-01-10 10:00:00 TP1] Decode batch, #running-req: 1",
            "[2026-01-10 10:05:26] Pyspy dump for PID 5001 (py-spy dump --native --pid 5001):",
            "Process 5001: sglang::scheduler_TP1",
            'Thread 5001 (idle): "MainThread"',
            "    all_reduce (torch/distributed/distributed_c10d.py:2501)",
        ])
        timeline = analyze([logs], config=config(tmp_path, {"tp_size": 2})).timeline
        assert [row(timeline, "s.log", n)["world_rank"] for n in range(2, 6)] == [None, 1, 1, 1]

    def test_a_member_whose_dump_shows_it_behind_is_the_culprit(self, tmp_path: Path) -> None:
        """Rank 5 printed only the flight-recorder dump line of the TP group, whose counters say
        it never enqueued SeqNum 41, on which the others time out."""
        logs = tmp_path / "logs"
        lines = [
            f"[rank{r}]:[E1129 10:11:09.123450000 ProcessGroupNCCL.cpp:632] [PG ID 2 PG GUID "
            f"3(tp:device) Rank {r}] Watchdog caught collective operation timeout: WorkNCCL("
            "SeqNum=41, OpType=ALLREDUCE, NumelIn=7168, NumelOut=7168, Timeout(ms)=600000) ran "
            "for 600081 milliseconds before timing out." for r in (0, 1, 2, 3)]
        lines.append("[rank5]:[E1129 10:11:10.603241927 ProcessGroupNCCL.cpp:1987] [PG ID 2 PG "
                     "GUID 3(tp:device) Rank 5] Received a dump signal due to a collective "
                     "timeout from  rank 0 and we will try our best to dump the debug info. Last "
                     "enqueued NCCL work: 40, last completed NCCL work: 40.")
        write(logs, "node0.log", lines)
        analysis = analyze([logs], config=config(tmp_path, {"tp_size": 6}))
        hang = next(f for f in analysis.findings if f.kind == "collective-hang")
        assert [p["world_rank"] for p in hang.processes] == [5]

    def test_a_pg_line_without_a_group_name_is_not_guessed(self, tmp_path: Path) -> None:
        """SGLang 0.5.9 names no group: `[PG ID 6 PG GUID 11 Rank 0]` of world 0 under tp 4 ·
        pp 2 is rank 0 of tp, pp and world alike, so no tp member is blamed."""
        logs = tmp_path / "logs"
        write(logs, "s.log", [
            "[rank0]:[E1129 10:11:09.123456789 ProcessGroupNCCL.cpp:632] [PG ID 6 PG GUID 11 Rank "
            "0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=12, OpType=SEND, "
            "NumelIn=917504, NumelOut=917504, Timeout(ms)=600000) ran for 600081 milliseconds "
            "before timing out.",
            *(f"[2026-11-29 10:00:00 PP{r // 4} TP{r % 4}] Decode batch" for r in range(8)),
        ])
        analysis = analyze([logs], config=config(tmp_path, {
            "tp_size": 4, "pp_size": 2, "sglang_version": "0.5.9"}))
        hang = next(f for f in analysis.findings if f.kind == "collective-hang")
        assert hang.processes == [] and hang.group is None
        assert [p["world_rank"] for p in hang.waiting] == [0]

    def test_heartbeat_monitor_abort_names_its_process(self, tmp_path: Path) -> None:
        logs = tmp_path / "logs"
        write(logs, "s.log", [
            *_decode(range(8), 0),
            "[rank3]:[E1129 10:09:00.485000000 ProcessGroupNCCL.cpp:1484] [PG ID 0 PG GUID "
            "0(default_pg) Rank 3] Heartbeat monitor timed out! Process will be terminated after "
            "dumping debug info. workMetaList_.size()=1",
        ])
        crash = next(f for f in analyze([logs], config=config(tmp_path, {"tp_size": 8})).findings
                     if f.kind == "crash")
        assert [p["world_rank"] for p in crash.processes] == [3]

    def test_main_process_messages_have_the_main_role(self, tmp_path: Path) -> None:
        logs = tmp_path / "logs"
        messages = [
            "SIGTERM received. signum=15 frame=None. Draining requests and shutting down...",
            "Dumping requests before crash. self.crash_dump_folder='/tmp'",
            "Request is disconnected from the client side (type 1). Abort request obj.rid='1'",
            "Health check failed. Server couldn't get a response from detokenizer for last 20 "
            "seconds. tic start time: 10:05:00. last_heartbeat time: 10:00:10",
            "Gracefully exiting... Remaining number of requests 0. Remaining requests [].",
        ]
        write(logs, "s.log", [f"[2026-01-10 10:05:20] {m}" for m in messages])
        timeline = analyze([logs], config=config(tmp_path, {"tp_size": 2})).timeline
        assert timeline.get_column("role").to_list() == ["main"] * len(messages)


class TestFileLayout:
    """A file lends its one process to its other lines only when the set is laid out one
    process per file."""

    CRASH = [
        "CUDA Error: an illegal memory access was encountered (CUDA Error: 700an illegal memory "
        "access was encountered)  (/opt/conda/lib/python3.10/site-packages/flashinfer/data/"
        "include/flashinfer/attention/prefill.cuh700: line ) 2349",
        " at function cudaLaunchKernel((void*)kernel, nblks, nthrs, args, smem_size, stream)",
        "[2025-04-22 15:12:46 TP0] Scheduler hit an exception: Traceback (most recent call "
        "last):",
        "RuntimeError: CUDA error: an illegal memory access was encountered",
    ]

    def test_a_lone_console_with_one_talkative_rank_lends_nothing(self, tmp_path: Path) -> None:
        """sglang#5491 shape: TP0 and TP1 print into one console; only TP0's lines carry a
        prefix, and the interleaved CUDA error (`700an illegal`) is half TP1's."""
        logs = tmp_path / "logs"
        write(logs, "console.log", self.CRASH)
        analysis = analyze([logs], config=config(tmp_path, {"tp_size": 2}))
        assert [row(analysis.timeline, "console.log", n)["world_rank"] for n in (1, 2, 3, 4)] == [
            None, None, 0, 0]
        crash = next(f for f in analysis.findings if f.kind == "crash")
        assert "fatal line(s) before it name no process" in crash.summary
        # with the main process's access line on top: the CUDA error is not the main process's
        write(logs, "console.log", ['[2025-04-22 15:12:45] INFO:     127.0.0.1:41234 - "POST '
                                    '/v1/chat/completions HTTP/1.1" 200 OK', *self.CRASH])
        timeline = analyze([logs], config=config(tmp_path, {"tp_size": 2})).timeline
        assert [row(timeline, "console.log", n)["role"] for n in (1, 2, 3)] == [
            "main", None, None]

    def test_files_of_one_process_each_lend_it(self, tmp_path: Path) -> None:
        logs = tmp_path / "logs"
        write(logs, "rank0.log", self.CRASH)
        write(logs, "rank1.log", ["[2025-04-22 15:12:40 TP1] Decode batch. #running-req: 1",
                                  "some print of rank 1"])
        timeline = analyze([logs], config=config(tmp_path, {"tp_size": 2})).timeline
        assert [row(timeline, "rank0.log", n)["evidence"] for n in (1, 2)] == ["file"] * 2
        assert row(timeline, "rank1.log", 2)["world_rank"] == 1


class TestNcclInit:
    """NCCL's bootstrap waits for every rank of a communicator."""

    @staticmethod
    def start(rank: int, nranks: int = 8) -> str:
        return (f"gpu-node-0:34160{rank:02d}:34160{rank:02d} [{rank}] NCCL INFO ncclCommInitRank "
                f"comm 0x55d84d0db8{rank:02d} rank {rank} nranks {nranks} cudaDev {rank} nvmlDev "
                f"{rank} busId {rank}a000 commId 0x9ad9b5e4ab2566da - Init START")

    def test_the_rank_that_never_started_is_the_culprit(self, tmp_path: Path) -> None:
        logs = tmp_path / "logs"
        for rank in (0, 1, 2, 3, 4, 6, 7):
            write(logs, f"rank{rank}.log", [self.start(rank)])
        write(logs, "rank5.log", ["[2026-11-29 10:00:00 TP5] Load weight begin."])
        analysis = analyze([logs], config=config(tmp_path, {"tp_size": 8}))
        init = next(f for f in analysis.findings if f.kind == "init-hang")
        assert [p["world_rank"] for p in init.processes] == [5]
        assert "never logged Init START" in init.summary and "(comm rank(s) 5;" in init.summary
        (logs / "rank5.log").unlink()  # its log is missing: absent, not silent
        init = next(f for f in analyze([logs], config=config(tmp_path, {"tp_size": 8})).findings
                    if f.kind == "init-hang")
        assert init.processes == [] and [p["world_rank"] for p in init.unknown] == [5]
        assert [p["world_rank"] for p in init.waiting] == [0, 1, 2, 3, 4, 6, 7]
        assert "never logged" not in init.summary and "look here next" in init.summary

    def test_when_every_rank_started_no_member_is_blamed(self, tmp_path: Path) -> None:
        logs = tmp_path / "logs"
        for rank in range(8):
            write(logs, f"rank{rank}.log", [self.start(rank)])
        init = next(f for f in analyze([logs], config=config(tmp_path, {"tp_size": 8})).findings
                    if f.kind == "init-hang")
        assert init.processes == [] and len(init.waiting) == 8

    @staticmethod
    def split(rank: int, phase: str, split_count: int = 3) -> str:
        """NCCL 2.23+: the START of a split has no commId, the COMPLETE has one."""
        head = (f"gpu-node-0:5{rank:03d}:5{rank:03d} [{rank}] NCCL INFO ncclCommSplit comm "
                f"0x55d1c0a3e0{rank:02d} rank {rank % 4} nranks 4 cudaDev {rank} nvmlDev {rank} "
                f"busId {rank}b000")
        if phase == "start":
            color = 1197013201 + rank // 4
            return (f"{head} parent 0x55d1bf2c4a{rank:02d} splitCount {split_count} color "
                    f"{color} key {rank % 4}- Init START")
        return f"{head} commId 0x44d8628a4258640{rank // 4} - Init COMPLETE"

    def test_split_start_without_comm_id(self, tmp_path: Path) -> None:
        """TP 8 split in two groups of 4; group 1's rank 6 never started, the rest of group
        1 hang; group 0 completed and is not reported."""
        logs = tmp_path / "logs"
        for rank in range(8):
            lines = [self.split(rank, "start")] if rank != 6 else []
            if rank < 4:
                lines.append(self.split(rank, "complete"))
            write(logs, f"rank{rank}.log", lines or ["[2026-11-29 10:00:00 PP1 TP2] Load weight begin."])
        args = config(tmp_path, {"tp_size": 4, "pp_size": 2})
        inits = [f for f in analyze([logs], config=args).findings if f.kind == "init-hang"]
        assert len(inits) == 1
        assert "split (color 1197013202, split count 3) (nranks 4)" in inits[0].summary
        assert "never logged Init START" in inits[0].summary
        assert "(comm rank(s) 2;" in inits[0].summary
        assert sorted(p["world_rank"] for p in inits[0].waiting) == [4, 5, 7]
        assert [p["world_rank"] for p in inits[0].processes] == [6]


class TestWholeServerStalls:
    """Stalls that no member's own line explains."""

    def test_health_check_failures_are_reported(self, tmp_path: Path) -> None:
        logs = tmp_path / "logs"
        write(logs, "s.log", [
            *_decode(range(4), 10),
            "[2026-01-10 10:05:20] Health check failed. Server couldn't get a response from "
            "detokenizer for last 20 seconds. tic start time: 10:05:00. last_heartbeat time: "
            "10:00:10",
        ])
        found = analyze([logs], config=config(tmp_path, {"tp_size": 4})).findings
        assert [(f.kind, f.severity, f.processes) for f in found] == [
            ("unresponsive", "error", [])]
        assert "the last response (heartbeat) at 10:00:10" in found[0].summary

    def test_every_process_stuck_in_one_startup_phase(self, tmp_path: Path) -> None:
        """sglang#7478 shape: the log ends after every rank's `Init torch distributed begin`."""
        logs = tmp_path / "logs"
        write(logs, "s.log", [f"[2025-06-23 10:00:00 TP{r}] Init torch distributed begin."
                              for r in range(4)])
        found = analyze([logs], config=config(tmp_path, {"tp_size": 4})).findings
        stall = [f for f in found if f.kind == "init-hang"]
        assert [(f.severity, f.processes, len(f.waiting)) for f in stall] == [("warning", [], 4)]

    def test_a_lost_disaggregation_peer_is_a_warning(self, tmp_path: Path) -> None:
        logs = tmp_path / "logs"
        write(logs, "decode.log", [
            *_decode(range(4), 10),
            "[2026-01-10 10:00:20 TP0] Losing connection with prefill instance (bootstrap_addr: "
            "10.0.0.5:8998), 12 requests affected",
            "[2026-01-10 10:00:21 TP1] Decode transfer failed for request rank=1 req.rid='a' "
            "with exception KVTransferError(bootstrap_room=7): Failed to get kvcache from prefill",
        ])
        found = analyze([logs], config=config(tmp_path, {
            "tp_size": 4, "disaggregation_mode": "decode"})).findings
        assert [(f.kind, f.severity, f.processes) for f in found] == [
            ("disagg-transfer", "warning", [])]
        assert found[0].summary == ("PD disaggregation: lost the prefill instance at "
                                    "10.0.0.5:8998 (12 requests affected); 1 KV transfer(s) "
                                    "failed")
        assert [p["world_rank"] for p in found[0].waiting] == [0, 1]

    def test_no_startup_stall_when_the_run_went_on(self, tmp_path: Path) -> None:
        """No `Init torch distributed ends` in the logs, but batches later: init finished."""
        logs = tmp_path / "logs"
        write(logs, "s.log", [
            *(f"[2026-11-29 10:00:04 TP{r}] Init torch distributed begin." for r in range(2)),
            *(f"[2026-11-29 10:01:00 TP{r}] Decode batch, #running-req: 3" for r in range(2)),
        ])
        assert analyze([logs], config=config(tmp_path, {"tp_size": 2})).findings == []


class TestReapedChildren:
    """The main process / launcher reports a child's death."""

    def test_a_child_reaped_after_a_hang_is_the_hang_s_cascade(self, tmp_path: Path) -> None:
        logs = tmp_path / "logs"
        write(logs, "s.log", [
            *_decode(range(4), 0),
            "[2026-01-10 10:05:10 TP2] Scheduler watchdog timeout (self.watchdog_timeout=300, "
            "self.soft=False)",
            "[2026-01-10 10:05:11] Subprocess scheduler_2 (pid=3417555) crashed with exit code "
            "-6. Triggering SIGQUIT for cleanup...",
        ])
        found = analyze([logs], config=config(tmp_path, {"tp_size": 4})).findings
        assert [f.kind for f in found] == ["watchdog-timeout"]

    def test_a_clean_exit_is_no_crash(self, tmp_path: Path) -> None:
        """engine.py logs every child's exit at error level, a clean one too."""
        logs = tmp_path / "logs"
        write(logs, "s.log", [*_decode(range(2), 0),
                              "[2026-01-10 10:00:21] Scheduler or DataParallelController 7002 "
                              "terminated with 0"])
        assert analyze([logs], config=config(tmp_path, {"tp_size": 2})).findings == []

    def test_an_unnamed_dead_child_is_a_scheduler_not_the_main_process(
            self, tmp_path: Path) -> None:
        logs = tmp_path / "logs"
        write(logs, "s.log", [*_decode(range(4), 0),
                              "[2026-01-10 10:00:21] Rank 0 scheduler is dead. Please check if "
                              "there are relevant logs."])
        crash = next(f for f in analyze([logs], config=config(tmp_path, {"tp_size": 4})).findings
                     if f.kind == "crash")
        assert crash.summary.startswith("a scheduler that no line identifies crashed: Rank 0 "
                                        "scheduler is dead")


def test_a_tail_after_a_glued_record_is_nobody_s(tmp_path: Path) -> None:
    """`[rank3]:…before timing[rank5]:…timing out.` then ` out.`: the wrapped tail may be rank
    3's as well as rank 5's; a glued record that announces what follows (`…:`) keeps it."""
    logs = tmp_path / "logs"
    write(logs, "node0.log", [
        "[rank3]:[E1129 10:11:09.1 ProcessGroupNCCL.cpp:632] [PG ID 2 PG GUID 3(tp:device) Rank "
        "3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=41, OpType=ALLREDUCE) "
        "ran for 600081 milliseconds before timing[rank5]:[E1129 10:11:09.2 ProcessGroupNCCL.cpp"
        ":632] [PG ID 2 PG GUID 3(tp:device) Rank 5] Watchdog caught collective operation "
        "timeout: WorkNCCL(SeqNum=41, OpType=ALLREDUCE) ran for 600081 milliseconds before timing"
        " out.",
        " out.",
        "Extension modules: numpy.core._multiarray_umath[2026-11-29 10:11:10 TP3] Scheduler hit "
        "an exception: Traceback (most recent call last):",
        '  File "/sgl/scheduler.py", line 2912, in run_scheduler_process',
    ])
    detail = analyze([logs], config=config(tmp_path, {"tp_size": 8})).detail
    tail = row(detail, "node0.log", 2)
    assert (tail["world_rank"], tail["why"]) == (None, "after a glued line")
    assert row(detail, "node0.log", 4)["world_rank"] == 3


def test_nccl_warnings_of_other_ranks_before_a_crash_are_cited(tmp_path: Path) -> None:
    """sglang#5594 shape: TP7's failed connection is NCCL's first word, TP0 raises after."""
    logs = tmp_path / "logs"
    write(logs, "node0.log", [
        "h100-15:139:1092 [7] socket.c:485 NCCL WARN socketStartConnect: Connect to "
        "10.0.0.82<38455> failed : Software caused connection abort",
        "h100-15:132:132 [0] NCCL INFO init.cc:1263 -> 2",
        "h100-15:139:139 [7] NCCL INFO init.cc:1263 -> 2",
        "[2025-04-21 07:28:41 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, "
        "unhandled system error",
    ])
    crash = next(f for f in analyze([logs], config=config(tmp_path, {"tp_size": 8})).findings
                 if f.kind == "crash")
    assert [p["world_rank"] for p in crash.processes] == [0]
    assert "NCCL warned before it on world rank 7" in crash.summary
    assert {"file": "node0.log", "line": 1} in crash.evidence


def test_the_blank_line_before_an_nccl_warn_is_not_the_line_before_s(tmp_path: Path) -> None:
    """NCCL starts every WARN with a newline: the blank line is the WARN's writer's. With one
    line per chunk the WARN is the next chunk's first line."""
    logs = tmp_path / "logs"
    write(logs, "node0.log", [
        "[2026-11-29 10:05:02 TP3] Scheduler hit an exception: Traceback (most recent call last):",
        "",
        "[2026-11-29 10:05:03] gpu-node-0:3416028:3416999 [4] transport/net_ib.cc:1696 NCCL WARN"
        " NET/IB : Got completion from peer 10.0.0.2<52340> with status=12 opcode=0",
        "",
        'Traceback (most recent call last):',
        "",
    ])
    args = config(tmp_path, {"tp_size": 8})
    for chunk_bytes in (None, 1):
        detail = analyze([logs], config=args, chunk_bytes=chunk_bytes).detail
        assert [row(detail, "node0.log", n)["world_rank"] for n in (2, 4)] == [None, None], (
            chunk_bytes)


def test_a_process_title_names_its_ranks_without_a_config(tmp_path: Path) -> None:
    """verl#490 shape: C++ frames in the main executable name `sglang::scheduler_TP0`; with no
    launch config the title still gives the TP rank, as a prefix would."""
    logs = tmp_path / "logs"
    write(logs, "driver.log", [
        "(WorkerDict pid=559716) frame #23: _PyObject_FastCallDictTstate + 0xd0 (0x5578c75d3f50 "
        "in sglang::scheduler_TP0)",
        "[2026-11-29 10:00:00 TP1] Decode batch. #running-req: 1",
    ])
    timeline = analyze([logs]).timeline
    assert [row(timeline, "driver.log", n)["tp_rank"] for n in (1, 2)] == [0, 1]


class TestVictimsAndUnplacedHangs:
    """Second audit of public incidents: victims named as roots, timeouts with no finding."""

    TRACE = ["  File \"/sgl/srt/managers/scheduler.py\", line 2056, in run_scheduler_process",
             "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, dp_rank)"]

    def test_gloo_barrier_blames_a_peer(self, tmp_path: Path) -> None:
        """sglang#5602: TP3 and TP6 say torch's monitored barrier got no answer from rank 0;
        rank 0 left no line. Neither victim is the culprit."""
        logs = tmp_path / "logs"
        lines = ["[2025-04-21 04:08:43 TP5] Load weight end. type=DeepseekV3ForCausalLM",
                 "[2025-04-21 04:13:43] Received sigquit from a child process. It usually "
                 "means the child failed."]
        for rank in (3, 6):
            lines += [f"[rank{rank}]:[E421 04:13:43.426633564 ProcessGroupGloo.cpp:143] Rank "
                      f"{rank} successfully reached monitoredBarrier, but received errors while "
                      "waiting for send/recv from rank 0. Please check rank 0 logs for faulty "
                      "rank.",
                      f"[2025-04-21 04:13:43 TP{rank}] Scheduler hit an exception: Traceback "
                      "(most recent call last):", *self.TRACE]
        write(logs, "console.log", lines)
        found = analyze([logs], config=config(tmp_path, {"tp_size": 8})).findings
        crash = next(f for f in found if f.kind == "crash")
        assert crash.processes == []
        assert [p["world_rank"] for p in crash.waiting] == [3, 6]
        assert "names rank(s) 0 of its process group" in crash.summary

    def test_a_rank_that_loaded_is_not_the_root(self, tmp_path: Path) -> None:
        """sglang#4503: `TP rank 1 could finish the model loading, but there are other ranks
        that didn't` is raised on the ranks that did load."""
        logs = tmp_path / "logs"
        write(logs, "node0.log", [
            "[2025-03-17 17:15:55 TP1] Scheduler hit an exception: Traceback (most recent call "
            "last):", *self.TRACE,
            "ValueError: TP rank 1 could finish the model loading, but there are other ranks "
            "that didn't finish loading. It is likely due to unexpected failures (e.g., OOM) or "
            "a slow node."])
        write(logs, "node0b.log", ["[2025-03-17 17:15:40 TP0] Load weight begin."])
        crash = next(f for f in analyze([logs], config=config(tmp_path, {"tp_size": 2})).findings
                     if f.kind == "crash")
        assert crash.processes == [] and [p["world_rank"] for p in crash.waiting] == [1]
        assert "other TP ranks did not finish loading the model" in crash.summary

    def test_a_real_failure_after_a_victim_line_is_the_root(self, tmp_path: Path) -> None:
        """A victim's line printed first (a peer's death is seen at once) does not hide the
        process whose own error follows within the minute."""
        logs = tmp_path / "logs"
        write(logs, "console.log", [
            "[2026-11-29 10:00:20 TP0] Scheduler hit an exception: Traceback (most recent call "
            "last):", *self.TRACE, "RuntimeError: NCCL error: remote process exited or there "
            "was a network error, NCCL version 2.21.5",
            "[2026-11-29 10:00:31 TP2] Scheduler hit an exception: Traceback (most recent call "
            "last):", *self.TRACE, "RuntimeError: CUDA error: an illegal memory access was "
            "encountered"])
        crash = next(f for f in analyze([logs], config=config(tmp_path, {"tp_size": 4})).findings
                     if f.kind == "crash")
        assert [p["world_rank"] for p in crash.processes] == [2]
        assert [p["world_rank"] for p in crash.waiting] == [0]

    def test_timeouts_without_a_config_are_reported(self, tmp_path: Path) -> None:
        """sglang#10124 without --config: the torch rank (one torch world assumed: world rank
        3, waiting) and SeqNum, no culprit."""
        logs = tmp_path / "logs"
        write(logs, "console.log", [
            "[rank3]:[E908 08:39:25.432755661 ProcessGroupNCCL.cpp:2068] [PG ID 2 PG GUID 3 Rank"
            " 3] Process group watchdog thread terminated with exception: [Rank 3] Watchdog "
            "caught collective operation timeout: WorkNCCL(SeqNum=432927, OpType="
            "_REDUCE_SCATTER_BASE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600045 "
            "milliseconds before timing out."])
        hang = next(f for f in analyze([logs]).findings if f.kind == "collective-hang")
        assert hang.processes == [] and hang.seq == 432927
        assert hang.summary.startswith("no culprit: world rank 3 timed out in a collective")
        assert [p["world_rank"] for p in hang.waiting] == [3]
        assert "without the launch config" in hang.summary

    def test_a_timeout_line_takes_the_group_its_process_named_that_second(
            self, tmp_path: Path) -> None:
        """sglang#3368 under tp 8 · pp 2: `[Rank 6] Watchdog caught …` names no group; the
        same process's `[PG ID 0 PG GUID 0(default_pg) Rank 6] Exception …` of that second
        (hard-wrapped, so no timeout stem of its own) says it is the world group (rank 6 of tp
        is rank 6 of the world too)."""
        logs = tmp_path / "logs"
        write(logs, "console.log", [
            "[2025-02-07 01:19:30 PP0 TP6] Init torch distributed begin.",
            "[rank6]:[E207 01:29:36.730311765 ProcessGroupNCCL.cpp:616] [Rank 6] Watchdog caught"
            " collective operation timeout: WorkNCCL(SeqNum=2, OpType=ALLREDUCE, NumelIn=1, "
            "NumelOut=1, Timeout(ms)=600000) ran for 600014 milliseconds before timing out.",
            "[rank6]:[E207 01:29:36.730815661 ProcessGroupNCCL.cpp:1785] [PG ID 0 PG GUID "
            "0(default_pg) Rank 6] Exception (either an error or timeout) detected by watchd",
            "og at work: 2, last enqueued NCCL work: 2, last completed NCCL work: 1."])
        args = config(tmp_path, {"tp_size": 8, "pp_size": 2})
        hang = next(f for f in analyze([logs], config=args).findings
                    if f.kind == "collective-hang")
        assert hang.summary.startswith("no culprit: every member of world group 0\u201315")

    def test_bootstrap_server_unreachable(self, tmp_path: Path) -> None:
        """sglang#9266: a decode instance cannot fetch the prefill instance's parallel info."""
        logs = tmp_path / "logs"
        write(logs, "decode.log", [
            f"[2025-08-29 11:56:51 TP{r} EP{r}] Error fetching prefill parallel info from "
            "bootstrap: HTTPConnectionPool(host='sglang-deploy-glm-4-5-prefill', port=30089): "
            "Max retries exceeded with url: /route?engine_rank=-1&target_dp_group=-1 (Caused by "
            "ConnectTimeoutError(...))" for r in (0, 4)])
        found = analyze([logs], config=config(tmp_path, {"tp_size": 8, "ep_size": 8})).findings
        transfer = next(f for f in found if f.kind == "disagg-transfer")
        assert "bootstrap server (sglang-deploy-glm-4-5-prefill:30089)" in transfer.summary
        assert [p["world_rank"] for p in transfer.waiting] == [0, 4]


def test_tags_show_context_and_moe_data_parallel_ranks(tmp_path: Path) -> None:
    """PR#29600 shape: `ATTN_CP3` and `MOE_DP1` are in the view's tag, in the prefix's order."""
    logs = tmp_path / "logs"
    write(logs, "all.log", ["[2026-11-29 10:00:03 ATTN_CP1 MOE_DP1 TP6 EP2] Init torch "
                            "distributed begin."])
    args = config(tmp_path, {"tp_size": 8, "attn_cp_size": 2, "moe_dp_size": 2, "ep_size": 4})
    out = tmp_path / "view.txt"
    assert main(["analyze", str(logs), "--config", str(args), "--format", "text",
                 "-o", str(out)]) == 0
    assert "[n0 g6 w6 ATTN_CP1 MOE_DP1 TP6 EP2]" in out.read_text()


def test_nccl_init_failure_with_no_fatal_line(tmp_path: Path) -> None:
    """sglang#6017: GPU 0 cannot reach the bootstrap root; NCCL's return trace runs through
    init.cc and the log ends. GPU 6 (no trace) is not blamed."""
    logs = tmp_path / "logs"
    host = "hd03-gpu2-0031"
    write(logs, "node.log", [
        f"{host}:14139:14139 [6] NCCL INFO Using network IBext_v8",
        "",
        f"{host}:14133:14133 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: Connect to "
        "169.254.20.10<43369> failed : Software caused connection abort",
        f"{host}:14133:14133 [0] NCCL INFO misc/socket.cc:567 -> 2",
        f"{host}:14133:14133 [0] NCCL INFO bootstrap.cc:285 -> 2",
        f"{host}:14133:14133 [0] NCCL INFO init.cc:1534 -> 2",
        f"{host}:14133:14133 [0] NCCL INFO init.cc:1799 -> 2"])
    crash = next(f for f in analyze([logs], config=config(tmp_path, {"tp_size": 8})).findings
                 if f.kind == "crash")
    assert [p["world_rank"] for p in crash.processes] == [0]
    assert crash.summary == ("NCCL communicator init failed on world rank 0: socketStartConnect: "
                             "Connect to 169.254.20.10<43369> failed : Software caused "
                             "connection abort")
    bare = next(f for f in analyze([logs]).findings if f.kind == "crash")
    assert bare.processes == [] and "on PID 14133 on hd03-gpu2-0031:" in bare.summary


def test_a_blank_line_after_a_one_line_message_in_a_shared_file_is_nobody_s(
        tmp_path: Path) -> None:
    """sglang#3368: blank lines after `[… TP1] Load weight end.` in a console all ranks write
    to may be any writer's (a print, a progress bar's end)."""
    logs = tmp_path / "logs"
    write(logs, "console.log", [
        "[2025-02-07 01:19:30 TP1] Load weight end. type=DeepseekV3ForCausalLM",
        "",
        "",
        "[2025-02-07 01:19:31 TP0] Load weight end. type=DeepseekV3ForCausalLM"])
    detail = analyze([logs], config=config(tmp_path, {"tp_size": 2})).detail
    assert [(row(detail, "console.log", n)["world_rank"], row(detail, "console.log", n)["why"])
            for n in (2, 3)] == [(None, "plain line in a shared file")] * 2


class TestCrashesWithoutAHeader:
    """Third audit of public incidents: failures no `hit an exception` line announces."""

    def test_a_child_failed_and_its_log_is_elsewhere(self, tmp_path: Path) -> None:
        """sglang#12420: the main process's SIGQUIT notice and the launcher's exit code -9."""
        logs = tmp_path / "logs"
        write(logs, "bench.log", [
            "[2025-10-31 02:16:22] Received sigquit from a child process. It usually means the "
            "child failed.",
            "Traceback (most recent call last):",
            '  File "/sgl/python/sglang/test/test_utils.py", line 625, in popen_launch_server',
            "    raise Exception(",
            "Exception: Server process exited with code -9. Check server logs for errors."])
        crash = next(f for f in analyze([logs]).findings if f.kind == "crash")
        assert crash.processes == []
        assert "received a child's SIGQUIT; the server exited with code -9" in crash.summary

    def test_a_sigquit_after_a_timeout_is_the_hang_s(self, tmp_path: Path) -> None:
        logs = tmp_path / "logs"
        write(logs, "console.log", [
            "[2026-11-29 10:10:00 TP1] Scheduler watchdog timeout (self.watchdog_timeout=300, "
            "self.soft=False)",
            "[2026-11-29 10:10:01] Received sigquit from a child process. It usually means the "
            "child failed."])
        found = analyze([logs], config=config(tmp_path, {"tp_size": 2})).findings
        assert "crash" not in [f.kind for f in found]

    def test_out_of_memory_and_rocm_faults_are_crashes(self, tmp_path: Path) -> None:
        """verl#1208 (an OOM whose traceback header is not in the excerpt) and a ROCm
        runtime fault (iree-org/wave#466), each the root of its own set."""
        for text in ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.84 GiB. "
                     "GPU 1 has a total capacity of 94.50 GiB of which 4.33 GiB is free.",
                     "Memory access fault by GPU node-2 (Agent handle: 0x5a0d7202eab0) on "
                     "address 0x7d35a0c00000. Reason: Unknown."):
            logs = tmp_path / str(len(text))
            write(logs, "rank1.log", [text])
            write(logs, "rank0.log", ["[2026-11-29 10:00:00 TP0] Load weight end."])
            write(logs, "rank1b.log", ["[2026-11-29 10:00:00 TP1] Load weight end."])
            crash = next(f for f in analyze([logs], config=config(tmp_path, {"tp_size": 2})
                                            ).findings if f.kind == "crash")
            assert text[:40] in crash.summary

    def test_pd_handshake_failures_and_mooncake_nic_errors(self, tmp_path: Path) -> None:
        """sglang#12293 (`Prefill bootstrap failed for request`) and sglang#10560 (Mooncake
        marking an RDMA NIC inactive on the prefill side)."""
        logs = tmp_path / "logs"
        write(logs, "prefill.log", [
            "E0917 16:23:13.204995 4058290 worker_pool.cpp:294] Worker: Process failed for "
            "slice (opcode: 0, source_addr: 0x7f, length: 4096): local protection error",
            "W0917 16:23:13.427592 4058290 worker_pool.cpp:308] Too many errors found in local "
            "RNIC 115.182.224.11:16643@mlx5_7, mark it inactive",
            "[2025-09-17 16:23:14 DP2 TP2 EP2] Prefill bootstrap failed for request rank=2 "
            "req.rid='2a7' req.bootstrap_room=7: KVTransferError(bootstrap_room=7): Aborted by "
            "AbortReq."])
        transfer = next(f for f in analyze([logs]).findings if f.kind == "disagg-transfer")
        assert "1 KV transfer(s) failed; Mooncake reported 2 RDMA error line(s)" in (
            transfer.summary)
        assert [c["line"] for c in transfer.evidence] == [1, 2, 3]
        # a slice Mooncake retries is no failed transfer by itself
        (logs / "prefill.log").write_text("\n".join(
            (logs / "prefill.log").read_text().splitlines()[:2]) + "\n")
        assert [f.kind for f in analyze([logs]).findings] == []


def test_a_cann_error_inside_a_torch_npu_warning_is_that_rank_s(tmp_path: Path) -> None:
    """sglang#12464: torch_npu's warning carries CANN's error over several lines; the kernel
    error at its end is rank 3's crash."""
    logs = tmp_path / "logs"
    write(logs, "npu.log", [
        "[rank3]:[W1031 21:35:04.838006795 compiler_depend.ts:57] Warning: EZ9999: Inner Error!",
        "EZ9999: [PID: 696742] 2025-10-31-21:35:03.992.057 The error from device(chipId:7, "
        "dieId:0), serial number is 2, there is an exception of aivec error, core id is 9",
        "        TraceBack (most recent call last):",
        "       Kernel task happen error, retCode=0x31, [vector core exception].[FUNC:"
        "PreCheckTaskErr][FILE:davinci_kernel_task.cc][LINE:1539]"])
    analysis = analyze([logs], config=config(tmp_path, {"tp_size": 4, "device": "npu"}))
    assert [row(analysis.timeline, "npu.log", n)["world_rank"] for n in (2, 3, 4)] == [3] * 3
    crash = next(f for f in analysis.findings if f.kind == "crash")
    assert [p["world_rank"] for p in crash.processes] == [3]


class TestStartupAndOldVersions:
    """Fourth audit of public incidents: rendezvous failures, SGLang 0.2.x-0.3.x workers."""

    def test_the_rendezvous_store_out_of_reach(self, tmp_path: Path) -> None:
        """sglang#2561 (SLURM): the TCPStore at --dist-init-addr never answered."""
        logs = tmp_path / "logs"
        write(logs, "node1.log", [
            "[E1226 15:44:25.497183572 socket.cpp:1011] [c10d] The client socket has timed out "
            "after 600000ms while trying to connect to (sws-8h100grid-05, 8000).",
            "[W1226 15:44:25.497497753 TCPStore.cpp:358] [c10d] TCP client failed to connect/"
            "validate to host sws-8h100grid-05:8000 - retrying (try=0, timeout=600000ms, "
            "delay=82879ms): The client socket has timed out after 600000ms w"])
        found = analyze([logs], config=config(tmp_path, {"tp_size": 16, "nnodes": 2})).findings
        store = next(f for f in found if f.kind == "init-hang")
        assert store.processes == [] and store.severity == "error"
        assert "rendezvous store at sws-8h100grid-05:8000" in store.summary

    @pytest.mark.parametrize("header", ["[18:19:57 TP2] Exception in run_tp_server:",
                                        "Exception in ModelTpServer:"])
    def test_an_old_tp_worker_s_exception_is_a_crash(self, tmp_path: Path, header: str) -> None:
        """sglang PR#1127 / #737: 0.2.x-0.3.x TP workers log their traceback under these
        headers and re-raise: the worker died."""
        logs = tmp_path / "logs"
        write(logs, "server.log", [header, "Traceback (most recent call last):",
                                   '  File "/sgl/python/sglang/srt/managers/tp_worker.py", line '
                                   "806, in run_tp_server",
                                   "ValueError: the tensor shapes do not match"])
        tp = 8 if "TP2" in header else 1
        analysis = analyze([logs], config=config(tmp_path, {"tp_size": tp}))
        crash = next(f for f in analysis.findings if f.kind == "crash")
        assert [p["world_rank"] for p in crash.processes] == [2 if tp == 8 else 0]
        assert row(analysis.timeline, "server.log", 1)["role"] == "scheduler"


class TestReviewOfTheAuditRules:
    """A review of the rules added from the audits, each case a false finding it found."""

    @staticmethod
    def timeout(rank: int, when: str = "10:00:00.123456789") -> list[str]:
        return [f"[rank{rank}]:[E1129 {when} ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog "
                "caught collective operation timeout: WorkNCCL(SeqNum=5, OpType=ALLREDUCE, "
                "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600010 milliseconds before "
                "timing out.",
                f"[rank{rank}]:[E1129 10:00:00.323456789 ProcessGroupNCCL.cpp:1595] [PG ID 0 PG "
                f"GUID 0(default_pg) Rank {rank}] Received a dump signal due to a collective "
                "timeout from this local rank and we will try our best to dump the debug info. "
                "Last enqueued NCCL work: 30, last completed NCCL work: 30."]

    def test_the_dump_signal_names_no_group(self, tmp_path: Path) -> None:
        """The heartbeat monitor's dump signal is printed under default_pg whichever group
        timed out: it lends no group to the timeout (tp 4 · pp 2: stage 1 is not blamed)."""
        logs = tmp_path / "logs"
        for rank in range(8):
            lines = [f"[2026-11-29 09:00:00 PP{rank // 4} TP{rank % 4}] Load weight end."]
            write(logs, f"rank{rank}.log", lines + (self.timeout(rank) if rank < 3 else []))
        found = analyze([logs], config=config(tmp_path, {"tp_size": 4, "pp_size": 2})).findings
        hang = next(f for f in found if f.kind == "collective-hang")
        assert hang.processes == [] and "do not name the group" in hang.summary

    def test_a_split_member_that_never_completed(self, tmp_path: Path) -> None:
        logs = tmp_path / "logs"
        for rank in range(4):
            head = (f"gpu-node-0:500{rank}:500{rank} [{rank}] NCCL INFO ncclCommSplit comm "
                    f"0x55d1c0a3e00{rank} rank {rank} nranks 4 cudaDev {rank} nvmlDev {rank} "
                    f"busId {rank}b000")
            lines = [f"{head} parent 0x55d1bf2c4a0{rank} splitCount 3 color 1197013201 key "
                     f"{rank}- Init START"]
            if rank < 3:
                lines.append(f"{head} commId 0x44d8628a42586401 - Init COMPLETE")
            write(logs, f"rank{rank}.log", lines)
        init = next(f for f in analyze([logs], config=config(tmp_path, {"tp_size": 4})).findings
                    if f.kind == "init-hang")
        assert [p["world_rank"] for p in init.processes] == [3]
        assert "while 3 completed" in init.summary

    def test_a_store_retry_warning_is_no_failure(self, tmp_path: Path) -> None:
        logs = tmp_path / "logs"
        write(logs, "node1.log", [
            "[W1129 10:00:01.892069000 TCPStore.cpp:347] [c10d] TCP client failed to connect/"
            "validate to host 10.0.0.1:50810 - retrying (try=0, timeout=1800000ms, delay=487ms)"
            ": Connection reset by peer",
            "[2026-11-29 10:00:05 TP2] Init torch distributed ends. mem usage=0.00 GB"])
        found = analyze([logs], config=config(tmp_path, {"tp_size": 4, "nnodes": 2})).findings
        assert "init-hang" not in [f.kind for f in found]

    def test_an_untimed_failure_is_not_moved_before_a_victim(self, tmp_path: Path) -> None:
        """A segfault with no time of its own, printed after a line 30 minutes later, is not
        'within a minute' of the victim's failure."""
        logs = tmp_path / "logs"
        write(logs, "rank0.log", [
            "[2026-11-29 10:00:05 TP0] Scheduler hit an exception: Traceback (most recent call "
            "last):", '  File "/sgl/scheduler.py", line 2912, in event_loop',
            "RuntimeError: NCCL communicator was aborted on rank 0."])
        write(logs, "rank1.log", ["[2026-11-29 10:00:00 TP1] Load weight end.",
                                  "[2026-11-29 10:30:00 TP1] Init torch distributed begin.",
                                  "Fatal Python error: Segmentation fault"])
        crash = next(f for f in analyze([logs], config=config(tmp_path, {"tp_size": 2})).findings
                     if f.kind == "crash")
        assert [p["world_rank"] for p in crash.processes] == [0]
        assert "failed first" in crash.summary

    def test_the_watchdog_s_debug_info_dump_is_its_firing(self, tmp_path: Path) -> None:
        """sglang#33549: the logs end after `Scheduler debug info:` (printed before the
        py-spy dump and the timeout line)."""
        logs = tmp_path / "logs"
        write(logs, "console.log", [
            "[2026-08-04 11:58:42 TP1] Scheduler debug info:",
            "scheduler.cur_batch_for_debug.batch_size()=1",
            "[2026-08-04 11:58:42 TP7] Scheduler debug info:"])
        found = analyze([logs], config=config(tmp_path, {"tp_size": 8})).findings
        fired = next(f for f in found if f.kind == "watchdog-timeout")
        assert [p["world_rank"] for p in fired.processes] == [1, 7]
        assert fired.severity == "error"

    def test_the_shell_s_killed_line_is_its_own(self, tmp_path: Path) -> None:
        """PR#16067: bash's job report after a traceback is no line of the scheduler's."""
        logs = tmp_path / "logs"
        write(logs, "run.log", [
            "[2026-01-12 10:57:43 TP3] Scheduler hit an exception: Traceback (most recent call "
            "last):", "ValueError: token_to_kv_pool_allocator memory leak detected!", "", "",
            "./outputs/run-mml.sh: line 24: 3557732 Killed                  python -m "
            "sglang.launch_server ${COMMON_LAUNCH_ARGS}"])
        timeline = analyze([logs], config=config(tmp_path, {"tp_size": 8})).timeline
        last = row(timeline, "run.log", 5)
        assert (last["source"], last["world_rank"], last["role"]) == ("shell", None, None)


def test_rules_read_the_line_inside_a_docker_envelope(tmp_path: Path) -> None:
    """The diagnosis reads the decoded line, not the JSON around it: a clean exit is no
    crash, multiprocessing's `Process SpawnProcess-2:` opens one, a server_args line is
    complete, and a py-spy header ending with `:` announces its frames."""
    def docker(lines: list[str]) -> list[str]:
        out = []
        for n, text in enumerate(lines):
            body = text.replace("\\", "\\\\").replace('"', '\\"')
            out.append(f'{{"log":"{body}\\n","stream":"stderr","time":"2026-11-29T02:00:{n:02d}Z"}}')
        return out

    logs = tmp_path / "logs"
    write(logs, "c-json.log", docker([
        "[2026-11-29 10:00:00] server_args=ServerArgs(model_path='/m', tp_size=2, dp_size=1, "
        "nnodes=1, node_rank=0, enable_dp_attention=False)",
        "[2026-11-29 10:00:01 TP0] Load weight begin.",
        "[2026-11-29 10:00:01 TP1] Pyspy dump for PID 4321 (TP1):",
        "Thread 4321 (active): \"MainThread\"",
        "    event_loop_overlap (sglang/srt/managers/scheduler.py:1012)",
        "[2026-11-29 10:00:02] Scheduler or DataParallelController 7002 terminated with 0"]))
    analysis = analyze([logs])
    assert analysis.topology is not None and len(analysis.topology.processes) == 2
    assert [row(analysis.timeline, "c-json.log", n)["world_rank"] for n in (4, 5)] == [1, 1]
    assert "crash" not in [f.kind for f in analysis.findings]
    died = tmp_path / "died"
    write(died, "c-json.log", docker([
        "Process SpawnProcess-2:", "Traceback (most recent call last):",
        '  File "/usr/lib/python3.10/multiprocessing/process.py", line 314, in _bootstrap',
        "ValueError: boom"]))
    crash = next(f for f in analyze([died]).findings if f.kind == "crash")
    assert crash.summary.endswith("crashed: ValueError: boom")


class TestConsolesOfOneProcess:
    """Fifth audit (false findings on healthy logs): a console that names one process."""

    def test_a_shell_transcript_after_a_batch_line_is_not_the_scheduler_s(
            self, tmp_path: Path) -> None:
        """slurmv4 transcript: after decode TP0's last batch line come shell prompts and
        another server's JSON - not TP0's lines."""
        logs = tmp_path / "logs"
        write(logs, "transcript.log", [
            "[2026-03-02 14:44:12 TP0] Decode batch, #running-req: 1, #token: 193, token usage: "
            "0.00, cuda graph: True, gen throughput (token/s): 77.90, #queue-req: 0", "", "",
            "[dcbsr_dev@tpgds-aihub0003 ~]$ curl -s http://10.99.91.39:30000/get_server_info",
            "{", '    "model_path": "/app/models/Deepseek-R1/",'])
        detail = analyze([logs], config=config(tmp_path, {"tp_size": 8})).detail
        assert [row(detail, "transcript.log", n)["world_rank"] for n in range(1, 7)] == [
            0, None, None, None, None, None]

    def test_one_scheduler_s_console_holds_the_other_processes_too(self, tmp_path: Path
                                                                   ) -> None:
        """PR#13666: a TP1 server's console after Ctrl-C: the detokenizer's traceback (its
        frames name run_detokenizer_process) is not the scheduler's, and a traceback that
        ends in KeyboardInterrupt is a stop, not a crash."""
        logs = tmp_path / "logs"
        write(logs, "console.log", [
            "[2025-11-20 17:55:54] Capture cuda graph end. Time elapsed: 37.99 s.",
            "Process Process-2:",
            "Traceback (most recent call last):",
            '  File "/usr/lib/python3.12/multiprocessing/process.py", line 314, in _bootstrap',
            '  File "/sgl/srt/managers/detokenizer_manager.py", line 320, in '
            "run_detokenizer_process",
            "KeyboardInterrupt"])
        analysis = analyze([logs], config=config(tmp_path, {"tp_size": 1}))
        assert row(analysis.timeline, "console.log", 1)["world_rank"] == 0
        assert [row(analysis.timeline, "console.log", n)["world_rank"] for n in range(2, 7)] == [
            None] * 5
        assert "crash" not in [f.kind for f in analysis.findings]


class TestStopsAndPoolChecks:
    """Crash stems and stops the audits named, each on its real shape."""

    def test_a_pool_check_failure_is_the_crash(self, tmp_path: Path) -> None:
        """sglang#6888: the scheduler's memory-leak check raised, its header not in the
        excerpt; the main process's SIGQUIT follows. The ValueError is quoted and cited."""
        logs = tmp_path / "logs"
        write(logs, "run.log", [
            "ValueError: token_to_kv_pool_allocator memory leak detected! available_size="
            "3189424, protected_size=0, self.max_total_num_tokens=3185200",
            "self.token_to_kv_pool_allocator.available_size()=2864304", "", "",
            "[2025-06-06 01:56:27] Received sigquit from a child process. It usually means the "
            "child failed."])
        crash = next(f for f in analyze([logs], config=config(tmp_path, {"tp_size": 2})).findings
                     if f.kind == "crash")
        assert "memory leak detected!" in crash.summary
        assert crash.evidence[0] == {"file": "run.log", "line": 1}

    def test_a_sigquit_after_ctrl_c_is_no_crash(self, tmp_path: Path) -> None:
        logs = tmp_path / "logs"
        write(logs, "console.log", [
            "[2025-11-20 17:55:54] Capture cuda graph end. Time elapsed: 37.99 s.",
            "^CTraceback (most recent call last):",
            '  File "/sgl/srt/entrypoints/http_server.py", line 1210, in launch_server',
            "KeyboardInterrupt",
            "[2025-11-20 17:56:02] Received sigquit from a child process. It usually means the "
            "child failed."])
        found = analyze([logs], config=config(tmp_path, {"tp_size": 2})).findings
        assert "crash" not in [f.kind for f in found]

    def test_a_hip_error_is_a_crash(self, tmp_path: Path) -> None:
        """ROCm's torch says `HIP error:` where CUDA's says `CUDA error:` (here through the
        NCCL watchdog thread, with no SGLang exception header)."""
        logs = tmp_path / "logs"
        write(logs, "rocm.log", [
            "[2025-09-09 02:30:20 TP5] Decode batch. #running-req: 3, #token: 1200",
            "[rank5]:[E909 02:30:28.123456789 ProcessGroupNCCL.cpp:1785] [PG ID 2 PG GUID "
            "3(tp:device) Rank 5] Process group watchdog thread terminated with exception: HIP "
            "error: the launch timed out and was terminated"])
        crash = next(f for f in analyze([logs], config=config(tmp_path, {"tp_size": 8})).findings
                     if f.kind == "crash")
        assert [p["world_rank"] for p in crash.processes] == [5]


class TestInterleavedRecords:
    """Several processes of one node abort at once into one stream: their untagged lines
    interleave. A line goes to a record of its own grammar, and only to the one such record
    open in the stream; otherwise it is nobody's."""

    WHAT = ("[PG ID 2 PG GUID 3(tp:device) Rank 1] Process group watchdog thread terminated "
            "with exception: CUDA error: an illegal memory access was encountered")

    def analyze(self, tmp_path: Path, lines: list[str], chunk_bytes: int | None = None
                ) -> pl.DataFrame:
        logs = tmp_path / "logs"
        write(logs, "node0.log", lines)
        return analyze([logs], config=config(tmp_path, {"tp_size": 4}),
                       chunk_bytes=chunk_bytes).detail

    def test_a_dump_after_another_process_s_torch_line_is_not_its(self, tmp_path: Path) -> None:
        """A torch `[rank0]:[E…]` line is a one-line record: the faulthandler frames after it
        (written by whichever process aborted) are not rank 0's."""
        lines = [
            "[rank0]:[E1129 10:05:01.223456789 ProcessGroupNCCL.cpp:607] [PG ID 2 PG GUID "
            "3(tp:device) Rank 0] Watchdog caught collective operation timeout: WorkNCCL("
            "SeqNum=9141, OpType=ALLREDUCE) ran for 600071 milliseconds before timing out.",
            "Thread 0x00007f3b6d41d700 (most recent call first):",
            '  File "/usr/lib/python3.10/threading.py", line 324 in wait',
            "",
        ]
        detail = self.analyze(tmp_path, lines)
        assert [row(detail, "node0.log", n)["world_rank"] for n in (1, 2, 3, 4)] == [
            0, None, None, None]

    def test_two_dumps_at_once_are_nobody_s_and_a_closed_one_keeps_its_process(
            self, tmp_path: Path) -> None:
        """Two faulthandler dumps open at once: their frames could be either's. A traceback
        logged before them and closed by its exception line keeps its process, though
        another exception header comes in the same second; a C++ abort's `what()` names its
        process (`[PG … Rank 1]`), which its next lines take, across a torch line of another
        rank."""
        lines = [
            "[2026-11-29 10:05:01 TP2] Scheduler hit an exception: Traceback (most recent call "
            "last):",
            '  File "/sgl/scheduler.py", line 2912, in run_scheduler_process',
            "RuntimeError: boom",
            "[2026-11-29 10:05:01 TP3] Scheduler hit an exception: Traceback (most recent call "
            "last):",
            '  File "/sgl/scheduler.py", line 2912, in run_scheduler_process',
            "RuntimeError: bang",
            "Fatal Python error: Aborted",
            "",
            "Fatal Python error: Aborted",
            "Thread 0x00007f3b6d41d700 (most recent call first):",
            '  File "/usr/lib/python3.10/threading.py", line 324 in wait',
            "terminate called after throwing an instance of 'c10::DistBackendError'",
            f"  what():  {self.WHAT}",
            "[rank0]:[E1129 10:05:02.223456789 ProcessGroupNCCL.cpp:607] [PG ID 2 PG GUID "
            "3(tp:device) Rank 0] Watchdog caught collective operation timeout",
            "Exception raised from c10_cuda_check_implementation at ../c10/cuda/"
            "CUDAException.cpp:43 (most recent call first):",
            "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 "
            "(0x7f3b6d41df86 in /usr/lib/libc10.so)",
        ]
        for chunk_bytes in (None, 1):
            detail = self.analyze(tmp_path, lines, chunk_bytes)
            ranks = [row(detail, "node0.log", n)["world_rank"] for n in range(1, 17)]
            assert ranks == [2, 2, 2, 3, 3, 3, None, None, None, None, None, None, 1, 0, 1, 1], (
                chunk_bytes)
            assert row(detail, "node0.log", 11)["why"] == "interleaved records"
            assert row(detail, "node0.log", 16)["evidence"] == "continuation"

    def test_a_traceback_goes_on_across_another_process_s_line(self, tmp_path: Path) -> None:
        """A traceback that is the only one open goes on after a line another process wrote
        between its frames; its process comes from its own header."""
        lines = [
            "[2026-11-29 10:05:01 TP1] Scheduler hit an exception: Traceback (most recent call "
            "last):",
            '  File "/sgl/scheduler.py", line 2912, in run_scheduler_process',
            "RuntimeError: boom",
            "Traceback (most recent call last):",
            '  File "/sgl/detokenizer_manager.py", line 262, in run_detokenizer_process',
            "[2026-11-29 10:05:01 TP2] Load weight begin. avail mem=78.38 GB",
            '  File "/sgl/detokenizer_manager.py", line 100, in event_loop',
            "KeyboardInterrupt",
        ]
        detail = self.analyze(tmp_path, lines)
        assert [row(detail, "node0.log", n)["world_rank"] for n in range(1, 9)] == [
            1, 1, 1, None, None, 2, None, None]
        # the untagged traceback is one record: its frame after TP2's line is in it
        assert row(detail, "node0.log", 7)["record"] == row(detail, "node0.log", 4)["record"]

    def test_a_py_spy_dump_names_its_process(self, tmp_path: Path) -> None:
        """A bare py-spy dump's `Process N: sglang::scheduler_TP3` names its frames' process;
        a second dump opened before the first ends makes both nobody's."""
        lines = [
            "Process 3416: sglang::scheduler_TP3",
            "Python v3.12.3 (/usr/bin/python3.12)",
            'Thread 3416 (idle): "MainThread"',
            "    all_reduce (torch/distributed/distributed_c10d.py:2501)",
            "Process 3417: sglang::scheduler_TP2",
            "    event_loop_overlap (sglang/srt/managers/scheduler.py:1012)",
        ]
        detail = self.analyze(tmp_path, lines)
        assert [row(detail, "node0.log", n)["world_rank"] for n in range(1, 7)] == [
            3, 3, 3, 3, 2, None]


class TestGloo:
    """`[Gloo] Rank r is connected to n peer ranks` names its own rank in a group of n+1."""

    def test_gloo_rank_through_the_group_instance(self, tmp_path: Path) -> None:
        logs = tmp_path / "logs"
        write(logs, "dp1.log", [
            "[2026-11-29 10:00:00 DP1 TP0] Init torch distributed begin.",
            "[2026-11-29 10:00:00 DP1 TP1] Init torch distributed begin.",
            "[Gloo] Rank 3 is connected to 3 peer ranks. Expected number of connected peer "
            "ranks is : 3",
            # no group of 8 (each replica is a torch world of 4) nor of 6
            "[Gloo] Rank 7 is connected to 7 peer ranks. Expected number of connected peer "
            "ranks is : 7",
            "[Gloo] Rank 1 is connected to 5 peer ranks. Expected number of connected peer "
            "ranks is : 5",
        ])
        write(logs, "dp0.log", [
            "[2026-11-29 10:00:00 DP0 TP0] Init torch distributed begin.",
            "[Gloo] Rank 2 is connected to 3 peer ranks. Expected number of connected peer "
            "ranks is : 3",
        ])
        # a file whose processes span both replicas pins no instance
        write(logs, "both.log", [
            "[2026-11-29 10:00:00 DP0 TP1] Init torch distributed begin.",
            "[2026-11-29 10:00:00 DP1 TP2] Init torch distributed begin.",
            "[Gloo] Rank 2 is connected to 3 peer ranks. Expected number of connected peer "
            "ranks is : 3",
        ])
        detail = analyze([logs], config=config(tmp_path, {"tp_size": 4, "dp_size": 2})).detail
        # two TP4 replicas: the file's processes pin the second instance
        gloo = row(detail, "dp1.log", 3)
        assert (gloo["world_rank"], gloo["replica"], gloo["evidence"]) == (3, 1, "group-rank")
        assert (row(detail, "dp0.log", 2)["world_rank"], row(detail, "dp0.log", 2)["replica"]
                ) == (2, 0)
        assert [row(detail, "dp1.log", n)["world_rank"] for n in (4, 5)] == [None, None]
        assert row(detail, "both.log", 3)["world_rank"] is None


class TestStream:
    """The `stream` column names the output stream a line came through."""

    def test_stream_column_and_select(self, tmp_path: Path) -> None:
        logs = tmp_path / "logs"
        write(logs, "ray.log", [
            "(WorkerDict pid=859188, ip=10.0.0.1) [2025-09-09 08:45:30 TP1] Load weight begin.",
            "(WorkerDict pid=859188, ip=10.0.0.1) RuntimeError: CUDA error: an illegal memory "
            "access was encountered",
            "(WorkerDict pid=859190, ip=10.0.0.1) [2025-09-09 08:45:31 TP0] Load weight begin.",
            "[2025-09-09 08:45:32] The server is fired up and ready to roll!",
        ])
        analysis = analyze([logs], config=config(tmp_path, {"tp_size": 2}))
        timeline = analysis.timeline
        assert [row(timeline, "ray.log", n)["stream"] for n in (1, 2, 3, 4)] == [
            "WorkerDict pid=859188, ip=10.0.0.1", "WorkerDict pid=859188, ip=10.0.0.1",
            "WorkerDict pid=859190, ip=10.0.0.1", None]
        # the stream is no coordinate: the line nothing identifies keeps none
        assert row(timeline, "ray.log", 2)["world_rank"] is None
        picked = pl.concat(select_rows(analysis, parse_selector(
            "stream=WorkerDict pid=859188, ip=10.0.0.1")))
        assert picked["line"].to_list() == [1, 2] and set(picked["file"]) == {"ray.log"}
        assert pl.concat(select_rows(analysis, parse_selector("stream=pid=859190"))).height == 1
        # a file laid out one process per file is that process's stream
        ranks = tmp_path / "ranks"
        write(ranks, "rank0.log", ["[2025-09-09 08:45:30 TP0] Load weight begin.", ""])
        write(ranks, "rank1.log", ["[2025-09-09 08:45:30 TP1] Load weight begin."])
        timeline = analyze([ranks], config=config(tmp_path, {"tp_size": 2})).timeline
        assert [row(timeline, "rank0.log", n)["stream"] for n in (1, 2)] == ["rank0.log"] * 2


def test_a_plain_line_is_read_against_the_last_header_of_its_own_stream(tmp_path: Path) -> None:
    """In a file two compose services write, a line no process names is read against the last
    header of its own service's stream, not the other service's (which opened an exception
    here): it is a plain line printed in a shared file."""
    logs = tmp_path / "logs"
    write(logs, "compose.log", [
        "sglang-0  | [2026-11-29 10:00:00 TP0] Decode batch. #running-req: 1",
        "sglang-1  | [2026-11-29 10:00:01 TP1] Scheduler hit an exception: Traceback (most "
        "recent call last):",
        "sglang-0  | RuntimeWarning: evicted 3 tokens under memory pressure",
    ])
    analysis = analyze([logs], config=config(tmp_path, {"tp_size": 2}))
    assert [r["world_rank"] for r in analysis.timeline.iter_rows(named=True)] == [0, 1, None]
    assert analysis.unattributed_reasons() == {"plain line in a shared file": 1}
