"""Tests for logcorr.formats: each family's fields on real-shaped lines, parts, totality."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logcorr.formats import LOCAL_COLUMNS, parse
from logcorr.model import PARSED_SCHEMA


def _frame(lines: list[str]) -> pl.DataFrame:
    return pl.DataFrame(
        {"file_id": [0] * len(lines), "line": list(range(1, len(lines) + 1)), "text": lines},
        schema={"file_id": pl.UInt32, "line": pl.UInt32, "text": pl.String},
    )


def parts(line: str) -> list[dict[str, Any]]:
    return parse(_frame([line])).to_dicts()


def one(line: str) -> dict[str, Any]:
    rows = parts(line)
    assert len(rows) == 1, rows
    return rows[0]


def check(line: str, **expected: Any) -> dict[str, Any]:
    row = one(line)
    got = {key: row[key] for key in expected}
    assert got == expected
    return row


class TestSchema:
    def test_columns_and_dtypes(self) -> None:
        """The output has exactly the PARSED_SCHEMA columns, then what a line says by itself
        (LOCAL_COLUMNS), in order, with their dtypes."""
        out = parse(_frame(["[2025-02-22 08:19:45 TP26] x", "other", ""]))
        assert dict(out.schema) == {**PARSED_SCHEMA, **LOCAL_COLUMNS}
        assert list(out.columns) == [*PARSED_SCHEMA, *LOCAL_COLUMNS]

    def test_empty_input(self) -> None:
        """No lines -> an empty frame with the schema."""
        assert dict(parse(_frame([])).schema) == {**PARSED_SCHEMA, **LOCAL_COLUMNS}

    def test_order_is_kept(self) -> None:
        """Rows come back in (line, part) order whatever family parsed them."""
        lines = ["  File \"a\", line 1, in f", "[2025-02-22 08:19:45 TP1] x", "h:1:2 [0] NCCL INFO y", "z"]
        out = parse(_frame(lines))
        assert out.get_column("text").to_list() == lines


class TestSglang:
    def test_tp_only(self) -> None:
        """Date + TP: scheduler, ts with date, TP rank."""
        check(
            "[2025-02-22 08:19:45 TP26] Load weight begin. avail mem=78.38 GB",
            source="sglang", role="scheduler", starts_record=True, p_tp=26, p_dp=None,
            ts=datetime(2025, 2, 22, 8, 19, 45), ts_has_date=True, ts_has_year=True,
        )  # fmt: skip

    @pytest.mark.parametrize(
        ("line", "ranks"),
        [
            ("[2025-05-08 10:34:41 DP7 TP15] Memory pool end.", {"p_dp": 7, "p_tp": 15}),
            ("[2025-12-22 11:36:30 TP1 EP1] Scheduler hit", {"p_tp": 1, "p_ep": 1}),
            ("[2026-06-28 23:41:27 DP0 PP1 TP0] x", {"p_dp": 0, "p_pp": 1, "p_tp": 0}),
            ("[2026-05-20 08:02:44 PP0 ATTN_CP7 TP7] x", {"p_pp": 0, "p_attn_cp": 7, "p_tp": 7}),
            ("[2026-05-20 08:02:44 MOE_DP1 TP3 EP2 PID4242] x", {"p_moe_dp": 1, "p_tp": 3, "p_ep": 2, "p_pid": 4242}),
            ("[2025-01-01 00:00:00 DP1 TP2 EP3 PP4] old order", {"p_dp": 1, "p_tp": 2, "p_ep": 3, "p_pp": 4}),
            ("[2025-01-01 00:00:00 TP2 DP1] any order", {"p_dp": 1, "p_tp": 2}),
        ],
    )  # fmt: skip
    def test_rank_tokens(self, line: str, ranks: dict[str, int]) -> None:
        """Every rank token is read, in any order, and absent ones are null."""
        row = one(line)
        for name in ("p_dp", "p_pp", "p_attn_cp", "p_moe_dp", "p_tp", "p_ep", "p_pid"):
            assert row[name] == ranks.get(name), name
        assert row["role"] == "scheduler"

    def test_milliseconds(self) -> None:
        """SGLANG_LOG_MS lines keep the milliseconds."""
        check(
            "[2026-07-05 19:49:44.257 DP1 TP1 EP1] Scheduler hit an exception: Traceback",
            ts=datetime(2026, 7, 5, 19, 49, 44, 257000), p_dp=1, p_ep=1,
        )  # fmt: skip

    def test_time_only(self) -> None:
        """v0.3 lines have no date: placeholder date, ts_has_date False."""
        check(
            "[15:58:39 TP0] Prefill batch. #new-seq: 1",
            source="sglang", ts=datetime(2000, 1, 1, 15, 58, 39), ts_has_date=False, p_tp=0,
        )  # fmt: skip

    def test_missing_bracket(self) -> None:
        """A first line that lost its `[` is still a SGLang line."""
        check("2026-06-28 23:41:27 DP1 PP1 TP1] Scheduler hit", source="sglang", p_pp=1)

    def test_leading_nuls(self) -> None:
        """`^@^@^@[15:58:39 TP0]` parses; the text keeps its NULs."""
        row = check("\x00\x00\x00[15:58:39 TP0] x", source="sglang", p_tp=0)
        assert row["text"].startswith("\x00")

    @pytest.mark.parametrize(
        "line",
        [
            "[15:57:49] The server is fired up and ready to roll!",
            "[2026-02-27 14:33:03] INFO server_args.py:1697: Attention backend not specified.",
            "[2026-08-10 09:47:30] INFO:     Started server process [3415995]",
            '[2026-05-20 08:02:44] INFO:     10.42.0.190:54466 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
            "[2025-03-09 00:57:20] Received sigquit from a child proces. It usually means the child failed.",
            "[2026-01-01 00:00:00] Subprocess scheduler_0 (pid=3417555) crashed with exit code -3.",
            "[2026-01-01 00:00:00] kill_process_tree called: parent_pid=3415995, include_parent=True",
        ],
    )  # fmt: skip
    def test_main_role_when_proved(self, line: str) -> None:
        """Messages only the main process prints give role main."""
        check(line, source="sglang", role="main", server_args=None)

    def test_empty_prefix_proves_nothing(self) -> None:
        """A prefix-less line with an ordinary message has no role (could be a TP1 scheduler);
        a message only a scheduler writes names its role."""
        check("[2025-02-22 08:19:45] Using default HuggingFace chat template.", source="sglang",
              role=None)
        check("[2025-02-22 08:19:45] Load weight begin.", source="sglang", role="scheduler")

    @pytest.mark.parametrize(
        "line",
        [
            "[2026-02-27 14:33:04] server_args=ServerArgs(model_path='/m/', tp_size=8)",
            "[2026-02-27 14:33:04] server_args={'model_path': '/m/', 'tp_size': 8}",
        ],
    )
    def test_server_args(self, line: str) -> None:
        """server_args lines are flagged and belong to main."""
        check(line, server_args=True, role="main")

    def test_pyspy_link(self) -> None:
        """`Pyspy dump for PID n:` links the pid to the prefix."""
        check("[2025-05-08 10:34:41 DP7 TP15] Pyspy dump for PID 10366:", link_pid=10366, p_tp=15,
              pid=10366)
        # the scheduler's watchdog dumps its own process; a failed dump names it too
        check("[2025-06-26 07:25:31 DP4 TP4] Pyspy failed to dump PID 113688. Error: x",
              link_pid=113688, pid=113688, p_tp=4)


class TestWrappers:
    def test_cri(self) -> None:
        """CRI prefix: wrap_ts in UTC, inner SGLang line parsed, text unchanged."""
        line = "2025-07-25T07:53:08.21748708+08:00 stdout F [2025-07-25 07:53:08 TP2] Scheduler hit"
        check(
            line, text=line, source="sglang", p_tp=2, starts_record=True,
            ts=datetime(2025, 7, 25, 7, 53, 8),
            wrap_ts=datetime(2025, 7, 24, 23, 53, 8, 217487, tzinfo=timezone.utc),
        )  # fmt: skip

    def test_cri_without_header(self) -> None:
        """A CRI-wrapped continuation line does not start a record."""
        check('2025-07-25T07:53:08.2+08:00 stderr F   File "x.py", line 1, in f', source="traceback", starts_record=False)

    def test_docker_json_file(self) -> None:
        """Docker's json-file envelope: the `log` string is decoded (escapes, the final
        newline) and parsed; `time` is the envelope's UTC time; the text stays as read."""
        line = ('{"log":"[2026-11-29 10:00:00 TP3] Scheduler hit an exception: Traceback '
                '(most recent call last):\\n","stream":"stderr",'
                '"time":"2026-11-29T02:00:00.123456789Z"}')
        check(line, text=line, source="sglang", p_tp=3, starts_record=True,
              ts=datetime(2026, 11, 29, 10, 0, 0),
              wrap_ts=datetime(2026, 11, 29, 2, 0, 0, 123456, tzinfo=timezone.utc))
        check('{"log":"  File \\"/sgl/scheduler.py\\", line 2912, in f\\n","stream":"stderr",'
              '"time":"2026-11-29T02:00:00.2Z"}', source="traceback", starts_record=False)
        check('{"log":"node0:11:12 [0] NCCL INFO comm 0x1 rank 0 nranks 2 cudaDev 0 busId 1000'
              ' \\u003cnone\\u003e - Init COMPLETE\\n","stream":"stdout","time":"2026-11-29T02:00:01Z"}',
              source="nccl", host="node0", pid=11, comm_rank=0, nccl_phase="Init COMPLETE")
        # a torch line inside: its `[rankN]:` is peeled from the decoded line
        check('{"log":"[rank3]:[E1129 10:00:02.526290891 ProcessGroupNCCL.cpp:1785] x\\n",'
              '"stream":"stderr","time":"2026-11-29T02:00:02Z"}', torch_rank=3, source="torch")

    def test_docker_json_file_glued_stays_whole(self) -> None:
        """Two records glued in one envelope stay one part: parts cut from the decoded line
        could not make up the line read."""
        line = ('{"log":"[2026-11-29 10:00:00 TP3] Decode batch[2026-11-29 10:00:00 TP1] x\\n",'
                '"stream":"stderr","time":"2026-11-29T02:00:00Z"}')
        check(line, text=line, part=0, p_tp=3)

    def test_loki(self) -> None:
        """Loki export: epoch ms + ISO UTC."""
        check(
            "1779264164797\t2026-05-20T08:02:44.797Z\t[2026-05-20 08:02:44 PP0 ATTN_CP7 TP7] x",
            wrap_ts=datetime(2026, 5, 20, 8, 2, 44, 797000, tzinfo=timezone.utc), p_attn_cp=7,
        )  # fmt: skip

    def test_collector_and_torchrun(self) -> None:
        """Generic collector timestamp + `[rank3]:` + c10 header."""
        check(
            "[2025-02-27T16:30:43.48675097Z] [rank3]:[E227 16:30:43.526290891 ProcessGroupNCCL.cpp:1785] x",
            wrap_ts=datetime(2025, 2, 27, 16, 30, 43, 486750, tzinfo=timezone.utc),
            torch_rank=3, source="torch",
        )  # fmt: skip

    def test_local_collector_host(self) -> None:
        """Local-time collector gives host (and ts only when the line has none)."""
        row = check(
            "2025-03-27 17:31:11.084  sm228-a100-40g-23 ji-server-0:72:294 [0] NCCL INFO [Service thread] Connection closed by localRank 0",
            host="ji-server-0", pid=72, tid=294, source="nccl",
        )  # fmt: skip
        assert row["ts"] == datetime(2025, 3, 27, 17, 31, 11, 84000)
        check("2025-03-27 17:31:11.084  sm228-a100-40g-23 plain text", host="sm228-a100-40g-23")

    def test_pdsh(self) -> None:
        """pdsh host tag before an NCCL line."""
        check(
            "rdma-gpu-train-worker-0: rdma-gpu-train-worker-0:19488:21063 [4] NCCL INFO x",
            host="rdma-gpu-train-worker-0", pid=19488, device_id=4, source="nccl",
        )  # fmt: skip

    def test_not_pdsh(self) -> None:
        """`ValueError: x` is an exception line, not a pdsh host."""
        check("ValueError: bad value", source="traceback", host=None)

    @pytest.mark.parametrize(
        "line",
        [
            "(RayWorkerWrapper pid=270291, ip=10.175.94.190) [rank3]:[E219 08:58:32.606667496 ProcessGroupNCCL.cpp:1785] x",
            "\x1b[36m(RayWorkerWrapper pid=270291)\x1b[0m [rank3]:[E219 08:58:32.606667496 ProcessGroupNCCL.cpp:1785] x",
        ],
    )  # fmt: skip
    def test_ray(self, line: str) -> None:
        """The Ray prefix is peeled with or without colour codes. Its pid names the output
        stream, not the line's writer (an actor's child processes print under it)."""
        row = check(line, pid=None, torch_rank=3, source="torch")
        assert row["stream"] in ("RayWorkerWrapper pid=270291, ip=10.175.94.190",
                                 "RayWorkerWrapper pid=270291")

    @pytest.mark.parametrize(
        "line",
        [
            '(SGLangEngine pid=6680)   File "/sgl/python/sglang/srt/managers/scheduler.py", line 2612, in run_scheduler_process',
            '\x1b[36m(SGLangEngine pid=6680)\x1b[0m   File "/sgl/python/sglang/srt/managers/scheduler.py", line 2612, in run_scheduler_process',
        ],
    )  # fmt: skip
    def test_ray_keeps_the_indent_of_the_line(self, line: str) -> None:
        """Ray writes one space after its prefix: a traceback frame under it keeps its indent
        and is read as a traceback line (issue THUDM/slime#369 shape)."""
        row = check(line, stream="SGLangEngine pid=6680", source="traceback")
        assert row["text"] == line

    def test_ray_host_name_and_frame_title(self) -> None:
        """verl#1611 shape: Ray's `ip=` may be a host name; a C++ frame in the main executable
        names the process title SGLang set, which identifies the writer."""
        row = check("(WorkerDict pid=1052, ip=train-13280-worker-0) frame #26: "
                    "_PyEval_EvalFrameDefault + 0x6bd (0x55f5f43e926d in sglang::scheduler_TP1)",
                    source="cpp", stream="WorkerDict pid=1052, ip=train-13280-worker-0",
                    proctitle="sglang::scheduler_TP1")
        assert row["text"].startswith("(WorkerDict pid=1052")
        # a frame of a shared library names the library, not the process
        check("frame #4: <unknown function> + 0xd6df4 (0x7f3bca9d5df4 in "
              "/usr/lib/x86_64-linux-gnu/libstdc++.so.6)", source="cpp", proctitle=None)

    def test_encoder_server_prefix(self) -> None:
        """An EPD encoder server logs `[… encode_server]` / `[… encode_dp_worker[N]]`
        (configure_logger's prefix in disaggregation/encoder): an SGLang line of role encoder,
        no rank tokens."""
        check("[2026-11-29 10:00:00 encode_server] Encoder ready", source="sglang",
              role="encoder", p_tp=None, p_dp=None, starts_record=True)
        check("[2026-11-29 10:00:00.123 encode_dp_worker[3]] x", source="sglang",
              role="encoder", p_dp=None)

    def test_router_lines(self) -> None:
        """The SGLang router (Rust, sglang#10560) is a program of its own: role router, its
        time, a record of its own."""
        check("2025-09-17 08:22:52  INFO sglang_router_rs::server: src/server.rs:261: Starting "
              "router on 0.0.0.0:30000", source="router", role="router", starts_record=True,
              ts=datetime(2025, 9, 17, 8, 22, 52))
        check("the smg thing", source="other", role=None)
        # inside a request the tracing span comes before the target (sglang#10001)
        check("2025-09-04 07:15:26 ERROR http_request{method=POST uri=/v1/completions "
              "version=HTTP/1.1}: sglang_router_rs::routers::pd_router: src/routers/pd_router.rs"
              ":565: Decode server returned error status decode_url=http://10.160.1.22:50000 "
              "status=500 Internal Server Error", source="router", role="router",
              starts_record=True, ts=datetime(2025, 9, 4, 7, 15, 26))

    def test_ucx_caught_signal(self) -> None:
        """UCX (NIXL, Mooncake) reports a native crash as `[host:pid:n:tid] Caught signal 11
        (…)` (sglang#6694): host, pid and thread; it opens a record."""
        check("[ubuntu-GPU-L40S-4802111:12796:1:13303] Caught signal 11 (Segmentation fault: "
              "invalid permissions for mapped object at address 0x7fbd60001400)",
              source="ucx", host="ubuntu-GPU-L40S-4802111", pid=12796, tid=13303,
              starts_record=True)

    def test_docker_compose_prefix(self) -> None:
        """`docker compose logs` puts `service-1  | ` before each line (sglang#12076): peeled,
        the service is the stream, and the line is one record (no part split)."""
        check("sglang-1  | [2025-10-29 11:25:58 TP3] Watchdog timeout "
              "(self.watchdog_timeout=300)", source="sglang", stream="sglang-1", p_tp=3, part=0)
        check("proj_sglang_1  | Process 309: sglang::scheduler_TP6", source="pyspy",
              stream="proj_sglang_1", link_pid=309)
        check("Name | Value", stream=None)  # a table row is no compose prefix

    def test_control_sequences_before_a_wrapper(self) -> None:
        """`docker compose up` on a terminal clears the line (`ESC[2K`) and colours the
        service before each `service  | `: the service is still the stream, the line one
        record, and the text keeps the sequences (issue 31). So for srun, Ray and kubectl."""
        erase, colour, reset = "\x1b[2K", "\x1b[36m", "\x1b[0m"
        line = f"{erase}sglang-1  | [2026-11-29 10:00:01 TP1] Load weight begin."
        check(line, source="sglang", stream="sglang-1", p_tp=1, part=0, text=line)
        line = f"{erase}{colour}sglang-1  | {reset}[2026-11-29 10:00:01 TP2] Decode batch"
        check(line, source="sglang", stream="sglang-1", p_tp=2, part=0, text=line)
        check(f"\x1b[1A{erase}7: [rank7]: Traceback (most recent call last):",
              source="traceback", stream="task=7", torch_rank=7)
        check(f"{reset}{colour}(WorkerDict pid=859188){reset} [rank3]:[E1129 10:11:09.000000000 "
              "ProcessGroupNCCL.cpp:607] x", source="torch", stream="WorkerDict pid=859188",
              torch_rank=3)
        check(f"{erase}[pod/sglang-0/sglang] [2026-11-29 10:00:00 TP0] x",
              stream="pod/sglang-0", p_tp=0)

    def test_srun_label(self) -> None:
        """`srun --label` puts `N: ` before each line of task N (sglang#6017 shape): peeled,
        and the task is the line's output stream."""
        check('0:   File "/sgl/python/sglang/srt/managers/tp_worker.py", line 181, in forward',
              source="traceback", stream="task=0")
        check("1: [2025-05-12 22:14:52 DP3 TP3] Decode batch. #running-req: 1", source="sglang",
              stream="task=1", p_tp=3, p_dp=3)

    def test_frame_without_indent_is_traceback(self) -> None:
        """A frame line whose indentation a collector trimmed is still a traceback line."""
        check('File "/sgl/python/sglang/srt/managers/scheduler.py", line 2612, in run',
              source="traceback", starts_record=False)

    def test_kubectl_prefix_and_timestamps(self) -> None:
        """`kubectl logs --prefix [--timestamps]` wrappers are peeled: the line inside is read
        as itself, in one part (not a glued record behind an untagged prefix part), and the
        kubectl time is the wrapper's time."""
        check("[pod/sglang-1/sglang] [2025-09-09 08:45:30 TP9] Scheduler hit an exception: x",
              source="sglang", p_tp=9, part=0)
        check("[pod/sglang-0/sglang] sglang-0:206:206 [1] NCCL INFO Bootstrap : Using eth0",
              source="nccl", host="sglang-0", pid=206, device_id=1)
        check('[pod/sglang-1/sglang]   File "/sgl/scheduler.py", line 2912, in run',
              source="traceback")
        row = check("2025-09-09T08:45:30.123456789Z [2025-09-09 08:45:30 TP9] x",
                    source="sglang", p_tp=9)
        assert row["wrap_ts"] == datetime(2025, 9, 9, 8, 45, 30, 123456, tzinfo=timezone.utc)
        check("[pod/sglang-1/sglang] 2025-09-09T08:45:30.1Z RuntimeError: boom",
              source="traceback", part=0)

    def test_ray_lost_escape_and_repeat(self) -> None:
        """Lost-ESC colour junk and `[repeated Nx across cluster]` are ignored."""
        check(
            " [36m(RayWorkerVllm pid=5310) [0m [pod-name]:5310:5433 [7] NCCL INFO comm 0xaf19000 rank 14 nranks 16 cudaDev 6 busId db000 - Abort COMPLETE [32m [repeated 6x across cluster] [0m",
            host="[pod-name]", pid=5310, device_id=7, nccl_phase="Abort COMPLETE", comm_rank=14,
        )  # fmt: skip

    @pytest.mark.parametrize(
        ("line", "source"),
        [
            ("1067:[default0]:[rank0]: Traceback (most recent call last):", "traceback"),
            ('nemo.collections.llm.api.pretrain/0 [default0]:[rank0]:   File "/opt/p.py", line 532, in f', "traceback"),
            ("[80746] [rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught", "torch"),
            ("dinov2-giant-nodes.cn-d004 [stderr] [rank0]:[E909 09:55:29.307629539 ProcessGroupNCCL.cpp:607] [Rank 14] W", "torch"),
        ],
    )  # fmt: skip
    def test_torchrun_nemo_viewer(self, line: str, source: str) -> None:
        """torchrun/NeMo/viewer/milabench prefixes peel to the inner line."""
        check(line, torch_rank=0, source=source)


class TestParts:
    @pytest.mark.parametrize(
        ("line", "sources"),
        [
            (
                "Extension modules: numpy, sentencepiece._sentencepiece[2025-05-07 09:29:36 DP11 TP11] TpModelWorkerClient hit an exception",
                ["faulthandler", "sglang"],
            ),
            (
                "Capturing batches:  87%|████████▋ | 20/23 [00:07<00:00,  6.84s/it][2025-12-22 11:36:30 TP1 EP1] Scheduler hit an exception",
                ["tqdm", "sglang"],
            ),
            (
                "g183:161258:163308 [1] NCCL g183:161260:163309 [3] NCCL INFO comm 0x55d84d0db840 rank 3 nRanks 8 nNodes 1 localRanks 8 localRank 3 MNNVL 0",
                ["nccl", "nccl"],
            ),
            ("  what():    what():    what():  [PG 3 Rank 5] x", ["cpp"]),
            ("[2025-02-22 08:19:45 TP1] ok [2025-02-22 08:19:46] second", ["sglang", "sglang"]),
        ],
    )  # fmt: skip
    def test_glued_lines_split(self, line: str, sources: list[str]) -> None:
        """Glued records split at strong headers; texts concatenate to the line."""
        rows = parts(line)
        assert "".join(r["text"] for r in rows) == line
        assert [r["part"] for r in rows] == list(range(len(rows)))
        assert [r["source"] for r in rows] == sources

    def test_glued_fields(self) -> None:
        """The glued SGLang part carries its own ranks and time."""
        rows = parts("x[2025-05-07 09:29:36 DP11 TP11] TpModelWorkerClient hit an exception")
        assert rows[1]["p_dp"] == 11 and rows[1]["ts"] == datetime(2025, 5, 7, 9, 29, 36)
        nccl = parts("g183:161258:163308 [1] NCCL g183:161260:163309 [3] NCCL INFO comm 0x5 rank 3 nRanks 8")
        assert [(r["pid"], r["tid"], r["device_id"]) for r in nccl] == [
            (161258, 163308, 1),
            (161260, 163309, 3),
        ]
        assert nccl[1]["comm_rank"] == 3 and nccl[1]["comm_nranks"] == 8

    def test_glued_nccl_header_takes_a_known_host(self) -> None:
        """Two processes writing into one line (ms-swift#3934 shape): the glued header's host
        run (`166015g183`, `512g183`) is cut at the host an NCCL line of the chunk starts
        with; the parts still concatenate to the line."""
        lines = [
            "g183:161262:161262 [5] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
            "g183:161264:166015g183:161258:166018 [1] NCCL INFO Connected NVLS tree",
            "g183:161258:166018 [1] NCCL INFO threadThresholds 8/8/64 | 512 | 512g183:161262:166017 [5] NCCL g183:161264:166015 [7] NCCL INFO Connected NVLS tree",
        ]  # fmt: skip
        rows = parse(_frame(lines)).to_dicts()
        for number, line in enumerate(lines, start=1):
            assert "".join(r["text"] for r in rows if r["line"] == number) == line
        assert [(r["text"][:22], r["host"], r["pid"], r["device_id"]) for r in rows[1:]] == [
            ("g183:161264:166015", "g183", 161264, None),  # a header cut off by the glued line
            ("g183:161258:166018 [1]", "g183", 161258, 1),
            ("g183:161258:166018 [1]", "g183", 161258, 1),
            ("g183:161262:166017 [5]", "g183", 161262, 5),
            ("g183:161264:166015 [7]", "g183", 161264, 7),
        ]

    def test_bare_header_start_is_nccl_only_before_a_glued_header(self) -> None:
        """`host:pid:tid` alone is an NCCL line's start only when a glued NCCL header follows
        it on the line; elsewhere such text proves nothing."""
        cut = parse(_frame(["g183:161258:166018 [1] NCCL INFO Bootstrap : Using eth0",
                            "g183:161264:166015g183:161258:166018 [1] NCCL INFO Connected"]))
        assert [(r["source"], r["host"], r["pid"], r["tid"], r["starts_record"])
                for r in cut.to_dicts()][1] == ("nccl", "g183", 161264, 166015, True)
        # with no line naming the host, where the thread id ends is not known: no fields
        unknown = parts("g183:161264:166015g183:161258:166018 [1] NCCL INFO Connected")
        assert (unknown[0]["source"], unknown[0]["pid"]) == ("other", None)
        alone = parts("g183:161264:166015")
        assert [(r["source"], r["pid"]) for r in alone] == [("other", None)]

    def test_glued_nccl_header_of_an_unseen_host_has_no_host(self) -> None:
        """When no NCCL line of the chunk starts with a host that ends the glued run, the part
        keeps its pid, thread and device, and its host is left empty rather than guessed."""
        rows = parts("x | 512node7:42:43 [2] NCCL INFO Connected all rings")
        assert [(r["host"], r["pid"], r["tid"], r["device_id"], r["source"]) for r in rows] == [
            (None, None, None, None, "other"), (None, 42, 43, 2, "nccl")]
        # a pdsh wrapper still names the host the whole physical line came from
        pdsh = parts("worker-0: g1:5:5 [0] NCCL INFO a 512node7:42:43 [2] NCCL INFO b")
        assert [(r["host"], r["pid"]) for r in pdsh] == [("g1", 5), ("worker-0", 42)]
        # behind a bare SGLang stamp the header's start is plain to see: its host is kept
        stamped = parts("x [2026-02-25 16:41:56] h9:1:1 [3] os/linux.cc:200 NCCL WARN x")
        assert [(r["host"], r["pid"], r["device_id"]) for r in stamped] == [
            (None, None, None), ("h9", 1, 3)]

    def test_wrapper_not_split(self) -> None:
        """A header right after a wrapper is not a split point."""
        assert len(parts("2025-07-25T07:53:08.2+08:00 stdout F [2025-07-25 07:53:08 TP2] x")) == 1
        assert len(parts("[2026-02-25 16:41:56] h:1:1 [3] os/linux.cc:200 NCCL WARN x")) == 1


class TestNcclGluedHost:
    def test_a_few_glued_characters_before_a_known_host(self) -> None:
        """sglang#8974: `adp-u` of a cut-off line ran into a header of host `adp-us-…`; that
        token on one line, the host on many, is the host (else the file names two hosts)."""
        host = "adp-us-llm-1-00001-deployment-6f47c67945-s59dl"
        lines = [f"{host}:23{i % 3 + 4}:23{i % 3 + 4} [{i % 3}] NCCL INFO Channel 0{i}/0 : "
                 f"{i % 3}[{i % 3}] -> {i % 3 + 1}[{i % 3 + 1}] via P2P/IPC" for i in range(10)]
        lines.insert(4, f"adp-u{host}:235:235 [1] NCCL INFO cudaDriverVersion 12090")
        rows = parse(_frame(lines)).to_dicts()
        assert {r["host"] for r in rows} == {host}
        assert (rows[4]["pid"], rows[4]["device_id"]) == (235, 1)
        # two hosts of a few lines each stay two hosts
        two = parse(_frame([f"node1:5:5 [0] NCCL INFO a{i}" for i in range(3)]
                           + [f"gpu-node1:6:6 [0] NCCL INFO b{i}" for i in range(3)])).to_dicts()
        assert {r["host"] for r in two} == {"node1", "gpu-node1"}


class TestNccl:
    def test_init(self) -> None:
        """2.29 `[Rank N]` init line: header and communicator fields."""
        check(
            "tpgds-aihub0003:3828976:3828976 [0] NCCL INFO [Rank 0] ncclCommInitRank comm 0x5621301a1640 rank 0 nranks 16 cudaDev 0 nvmlDev 0 busId a000 commId 0x35712f37c64c1510 - Init START",
            source="nccl", host="tpgds-aihub0003", pid=3828976, tid=3828976, device_id=0,
            comm="0x5621301a1640", comm_id="0x35712f37c64c1510", comm_rank=0, comm_nranks=16,
            nccl_phase="Init START", starts_record=True,
        )  # fmt: skip

    def test_split_and_old(self) -> None:
        """ncclCommSplit and pre-commId lines."""
        check(
            "deepseek-yanfa:190:3197 [2] NCCL INFO ncclCommSplit comm 0x5601dc4ed8b0 rank 2 nranks 16 cudaDev 2 nvmlDev 2 busId 41000 parent 0x5601b34852c0 color 1197013201 key 2 commId 0x44d8628a425864f9 - Init COMPLETE",
            comm="0x5601dc4ed8b0", comm_id="0x44d8628a425864f9", comm_rank=2, nccl_phase="Init COMPLETE",
        )  # fmt: skip
        check(
            "A03-R28-I49-3-9000018:193027:193119 [7] NCCL INFO comm 0x7fdf08000d00 rank 15 nranks 16 cudaDev 7 busId e7000 - Init COMPLETE",
            host="A03-R28-I49-3-9000018", comm_rank=15, comm_id=None, nccl_phase="Init COMPLETE",
        )  # fmt: skip
        # NCCL 2.23+: a split's START has no commId yet and no space before the dash
        check(
            "node-3:5123:5123 [1] NCCL INFO ncclCommSplit comm 0x55d1c0a3e0f0 rank 1 nranks 4 cudaDev 1 nvmlDev 1 busId 1b000 parent 0x55d1bf2c4a10 splitCount 3 color 1197013201 key 1- Init START",
            comm="0x55d1c0a3e0f0", comm_id="split 1197013201/3", comm_rank=1, comm_nranks=4,
            nccl_phase="Init START",
        )  # fmt: skip

    def test_topology_form(self) -> None:
        """`nRanks` topology lines give comm rank and size."""
        check(
            "h:1:2 [1] NCCL INFO comm 0x5581a86a1830 rank 1 nRanks 16 nNodes 2 localRanks 8 localRank 1 MNNVL 0",
            comm_rank=1, comm_nranks=16, nccl_phase=None,
        )  # fmt: skip

    def test_warn_with_source_and_stamp(self) -> None:
        """WARN with src:line, behind a bare SGLang stamp: nccl with ts."""
        check(
            "[2026-02-25 16:41:56] tpgds-aihub0003:2387398:2387398 [3] os/linux.cc:200 NCCL WARN x",
            source="nccl", pid=2387398, device_id=3, ts=datetime(2026, 2, 25, 16, 41, 56),
        )  # fmt: skip

    def test_bare_version(self) -> None:
        """A bare `NCCL version` line is nccl without host."""
        check("NCCL version 2.21.5+cuda12.4", source="nccl", host=None, starts_record=False)


class TestTorch:
    def test_watchdog(self) -> None:
        """Watchdog timeout: rank, ts (no year, ns->us), PG identity, seq, op."""
        check(
            "[rank1]:[E1016 03:31:38.928019586 ProcessGroupNCCL.cpp:607] [PG ID 2 PG GUID 3(tp:device) Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9141, OpType=_ALLGATHER_BASE, NumelIn=19008, NumelOut=152064, Timeout(ms)=600000) ran for 600071 milliseconds before timing out.",
            source="torch", torch_rank=1, ts=datetime(2000, 10, 16, 3, 31, 38, 928019),
            ts_has_year=False, ts_has_date=True, pg_id=2, pg_guid="3", pg_desc="tp:device",
            pg_rank=1, seq=9141, op="_ALLGATHER_BASE", starts_record=True,
        )  # fmt: skip

    def test_unpadded_month_and_leap_day(self) -> None:
        """`E210` is Feb 10; Feb 29 works in the placeholder year."""
        check("[E210 01:02:03.000000001 socket.cpp:1] x", ts=datetime(2000, 2, 10, 1, 2, 3))
        check("[W229 01:02:03.123456789 socket.cpp:1] x", ts=datetime(2000, 2, 29, 1, 2, 3, 123456))

    @pytest.mark.parametrize(
        ("line", "seq", "enq", "done"),
        [
            ("[rank3]:[E227 16:30:43.526290891 ProcessGroupNCCL.cpp:1785] [PG 3 Rank 5] Exception (either an error or timeout) detected by watchdog at work: 1522789, last enqueued NCCL work: 1522789, last completed NCCL work: 1522788.", 1522789, 1522789, 1522788),
            ("[rank0]:[E1206 01:00:00.000000000 ProcessGroupNCCL.cpp:1] [Rank 0] Timeout at NCCL work: 32, last enqueued NCCL work: 32, last completed NCCL work: 31.", 32, 32, 31),
            ("[rank1]:[E1206 01:00:00.000000000 ProcessGroupNCCL.cpp:1] [PG ID 2 PG GUID 3 Rank 1]  failure detected by watchdog at work sequence id: 40231 PG status: last enqueued work: 40267, last completed work: 40230", 40231, 40267, 40230),
        ],
    )  # fmt: skip
    def test_counters(self, line: str, seq: int, enq: int, done: int) -> None:
        """All three watchdog counter forms."""
        check(line, seq=seq, last_enqueued=enq, last_completed=done)

    @pytest.mark.parametrize(
        ("line", "pg"),
        [
            ("[E ProcessGroupNCCL.cpp:475] [Rank 2] Watchdog caught", (None, None, None, 2)),
            ("[rank6]:[F429 14:03:49.385461578 ProcessGroupNCCL.cpp:1554] [PG ID 0 PG GUID 0(default_pg) Rank 6] x", (0, "0", "default_pg", 6)),
            # torch 2.4: the number after `PG` is the GUID, or a hash of the ranks
            ("[rank0]:[E909 09:55:29.307629539 ProcessGroupNCCL.cpp:607] [PG 0 (default_pg) Rank 12] x", (None, "0", "default_pg", 12)),
            ("[rank3]:[E909 09:55:29.307629539 ProcessGroupNCCL.cpp:607] [PG 7c4f3b02bd0a2e0c1d7b1f4d2a44c5d8e7f60123 (tp:device) Rank 3] x", (None, "7c4f3b02bd0a2e0c1d7b1f4d2a44c5d8e7f60123", "tp:device", 3)),
            ("[E909 09:55:29.307629539 ProcessGroupNCCL.cpp:607] [PG ID 4 PG GUID  Rank 2] x", (4, "", None, 2)),
        ],
    )  # fmt: skip
    def test_pg_tags(self, line: str, pg: tuple[Any, ...]) -> None:
        """PG tag variants, including no-time headers and an empty GUID."""
        row = check(line, source="torch")
        assert (row["pg_id"], row["pg_guid"], row["pg_desc"], row["pg_rank"]) == pg

    def test_glog_built_torch_keeps_the_watchdog_facts(self) -> None:
        """A torch built with glog writes c10d's lines as glog: PG and work fields still read."""
        row = check("E1129 10:11:09.123456 632355 ProcessGroupNCCL.cpp:632] [Rank 2] Watchdog "
                    "caught collective operation timeout: WorkNCCL(SeqNum=41, OpType=ALLREDUCE, "
                    "NumelIn=7168, NumelOut=7168, Timeout(ms)=600000) ran for 600081 milliseconds "
                    "before timing out.", source="glog", tid=632355)
        assert (row["pg_rank"], row["seq"], row["op"]) == (2, 41, "ALLREDUCE")

    def test_doubled_rank_verbose(self) -> None:
        """`[rank0]:[rank0]:V0731 …` (pipelining verbose): rank and glog time."""
        check(
            "[rank0]:[rank0]:V0731 00:44:16 */torch/distributed/pipelining/stage.py:1326] Finished",
            torch_rank=0, source="glog", ts=datetime(2000, 7, 31, 0, 44, 16),
        )  # fmt: skip

    def test_cpp_tail(self) -> None:
        """The C++ exception tail is cpp: `terminate called` opens the record, the rest
        continue it; what() keeps PG facts."""
        check("terminate called after throwing an instance of 'c10::DistBackendError'",
              source="cpp", starts_record=True)
        for line in [
            "  what():  [PG 3 Rank 5] Process group watchdog thread terminated",
            "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:609 (most recent call first):",
            "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 (0x7f3b6d41df86 in /usr/lib/libc10.so)",
        ]:
            check(line, source="cpp", starts_record=False)
        check("  what():  [PG 3 Rank 5] Process group watchdog thread terminated", source="cpp", pg_guid="3", pg_rank=5)


class TestPython:
    def test_glog_python_pid(self) -> None:
        """Python glog (µs ending 000): pid."""
        check(
            "W0922 18:51:16.217000 1197897 torch/distributed/run.py:774] *****",
            source="glog", pid=1197897, tid=None, ts=datetime(2000, 9, 22, 18, 51, 16, 217000),
            ts_has_year=False, starts_record=True,
        )  # fmt: skip

    def test_glog_cpp_tid(self) -> None:
        """C++ glog: tid."""
        check("I1028 12:13:38.405081 632355 ProcessGroupNCCL.cpp:843] [Rank 0] NCCL watchdog", tid=632355, pid=None)

    @pytest.mark.parametrize(
        ("line", "source"),
        [
            ('  File "/x/scheduler.py", line 1419, in event_loop', "traceback"),
            ("    self.run()", "traceback"),
            ("    ^^^^^^^^^^", "traceback"),
            ("ValueError: bad thing", "traceback"),
            ("torch.distributed.DistBackendError: NCCL error", "traceback"),
            ("Thread 0x00007ee43dfff640 (most recent call first):", "faulthandler"),
            ('  File "/x/scheduler.py", line 1419 in watchdog_thread', "faulthandler"),
            ("Extension modules: numpy.core._multiarray_umath, torch._C (total: 91)", "faulthandler"),
            ("Python v3.12.3 (/usr/bin/python3.12)", "pyspy"),
            ("    wait4 (libc.so.6)", "pyspy"),
            ("    join (multiprocessing/process.py:149)", "pyspy"),
            ("", "other"),
            ("something else", "other"),
        ],
    )
    def test_continuations(self, line: str, source: str) -> None:
        """Traceback, faulthandler and py-spy lines are continuations."""
        check(line, source=source, starts_record=False)

    @pytest.mark.parametrize(
        ("line", "source"),
        [
            ("Traceback (most recent call last):", "traceback"),
            ("Exception in ModelTpServer:", "traceback"),
            ("Fatal Python error: Aborted", "faulthandler"),
        ],
    )
    def test_crash_openers_start_a_record(self, line: str, source: str) -> None:
        """An uncaught traceback or a faulthandler dump at the start of a line is the crash of
        some process: a record of its own, not a continuation of the line before."""
        check(line, source=source, starts_record=True)

    def test_chained_traceback_continues(self) -> None:
        """A traceback announced by the line before (or the one before a blank line) ending
        with `:` continues that record: chained exceptions, `Exception in ModelTpServer:` of
        SGLang 0.2-0.4 with or without its prefix; after any other line it opens its own."""
        lines = [
            "Traceback (most recent call last):",
            "ValueError: first",
            "",
            "During handling of the above exception, another exception occurred:",
            "",
            "Traceback (most recent call last):",
            "RuntimeError: second",
            "The above exception was the direct cause of the following exception:",
            "Traceback (most recent call last):",
            "ValueError: third",
            "Exception in ModelTpServer:",
            "Traceback (most recent call last):",
            "something else",
            "Traceback (most recent call last):",
            "[2024-10-01 10:00:00 TP0] Exception in ModelTpServer:",
            "Traceback (most recent call last):",
        ]
        rows = parse(_frame(lines)).to_dicts()
        assert [r["line"] for r in rows if r["starts_record"]] == [1, 11, 14, 15]

    def test_pyspy_links(self) -> None:
        """py-spy `Process n: title` links pid and proctitle; thread lines give tid."""
        check(
            "Process 10366: sglang::scheduler_DP0_TP0_EP0",
            source="pyspy", link_pid=10366, proctitle="sglang::scheduler_DP0_TP0_EP0",
        )  # fmt: skip
        check('Thread 4113894 (idle): "Thread-2 (forward_thread_func)"', source="pyspy", tid=4113894)


class TestMisc:
    def test_uvicorn_raw(self) -> None:
        """Raw uvicorn access line: main process."""
        check('INFO:     127.0.0.1:50812 - "POST /generate HTTP/1.1" 200 OK', source="uvicorn", role="main")

    def test_tqdm(self) -> None:
        """tqdm bars."""
        check("Loading safetensors checkpoint shards:  99% Completed | 161/163 [01:15<00:00,  2.24it/s]", source="tqdm")

    def test_cann(self) -> None:
        """CANN [ERROR] and error-code lines: pid, device, ts."""
        check(
            "[ERROR] 2025-04-08-18:07:20 (PID:1292363, Device:1, RankID:1) ERR01100 OPS call acl api failed.",
            source="cann", pid=1292363, device_id=1, ts=datetime(2025, 4, 8, 18, 7, 20), starts_record=True,
        )  # fmt: skip
        check(
            "EZ9999[PID: 8472] 2026-05-14-02:02:46.251.038 AclNN_Inner_Error(EZ9999):  Nnopbase fails",
            source="cann", pid=8472, ts=datetime(2026, 5, 14, 2, 2, 46, 251038),
        )  # fmt: skip
        check(
            "EI0006: [PID: 1292363] 2025-04-08-18:07:20.444.436 Getting socket times out.",
            source="cann", pid=1292363,
        )  # fmt: skip
        # the rest of a torch_npu warning (sglang#12464): no record of its own
        rows = parse(_frame([
            "[rank3]:[W1031 21:35:04.838006795 compiler_depend.ts:57] Warning: EZ9999: Inner Error!",
            "EZ9999: [PID: 696742] 2025-10-31-21:35:03.992.057 The error from device(chipId:7, dieId:0)",
            "EZ9999: [PID: 696742] 2025-10-31-21:35:04.000.001 Kernel task happen error, retCode=0x31",
        ])).to_dicts()  # fmt: skip
        assert [(r["source"], r["pid"], r["starts_record"]) for r in rows] == [
            ("torch", None, True), ("cann", 696742, False), ("cann", 696742, True)]

    def test_gloo(self) -> None:
        """Gloo lines."""
        check("[Gloo] Rank 1 is connected to 15 peer ranks. Expected number of connected peer ranks is : 15", source="gloo")


_ALPHABET = st.sampled_from(
    list("abcXYZ019 :[]()-_.\t\r\x00\x1b|%/\"'=,")
    + ["[2025-02-22 08:19:45 TP1] ", "h:1:2 [0] NCCL ", "[rank1]:", "\x1b[36m", "[0m", "\ue000", "é", "\ufffd", "  File \"", "NCCL "]
)  # fmt: skip
_TEXT = st.lists(_ALPHABET, max_size=30).map("".join)


class TestTotality:
    @settings(max_examples=300, deadline=None)
    @given(st.lists(_TEXT, min_size=1, max_size=8))
    def test_any_text_parses(self, lines: list[str]) -> None:
        """Any text: no exception, ≥1 part per line, parts concatenate to the line."""
        lines = [line.replace("\n", "") for line in lines]
        out = parse(_frame(lines))
        assert dict(out.schema) == {**PARSED_SCHEMA, **LOCAL_COLUMNS}
        joined = out.group_by("line", maintain_order=True).agg(pl.col("text").str.join(""))
        assert joined.get_column("text").to_list() == lines
        assert out.get_column("source").null_count() == 0
        assert out.get_column("starts_record").null_count() == 0

    @settings(max_examples=100, deadline=None)
    @given(st.binary(max_size=300))
    def test_any_bytes_through_ingest(self, data: bytes) -> None:
        """Arbitrary bytes (invalid UTF-8, CR, NUL) through ingest and parse."""
        import tempfile
        from pathlib import Path

        from logcorr.ingest import Source, read_lines

        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "x.log"
            path.write_bytes(data)
            lines, _ = read_lines([Source(0, path, "x.log")])
        out = parse(lines)
        joined = out.group_by("line", maintain_order=True).agg(pl.col("text").str.join(""))
        assert joined.get_column("text").to_list() == lines.get_column("text").to_list()
