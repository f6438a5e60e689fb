"""Shared vocabulary: coordinate names, line families, and the column schemas of each stage.

Nothing here computes anything; every other module imports its names from here so a column
is spelled one way across the pipeline.
"""

from __future__ import annotations

import polars as pl

# The coordinates a scheduler process has, in the order they are shown.
COORDINATES: tuple[str, ...] = (
    "node_rank",
    "replica",
    "dp_rank",
    "pp_rank",
    "tp_rank",
    "world_rank",
    "gpu_id",
    "attn_dp_rank",
    "attn_cp_rank",
    "attn_tp_rank",
    "moe_dp_rank",
    "moe_ep_rank",
    "moe_tp_rank",
)

# Line families (`source` column).
SOURCES: tuple[str, ...] = (
    "sglang",
    "nccl",
    "torch",
    "glog",
    "traceback",
    "faulthandler",
    "cpp",
    "pyspy",
    "uvicorn",
    "tqdm",
    "cann",
    "gloo",
    "router",  # the SGLang router / model gateway (Rust): `… INFO sglang_router_rs::…`
    "ucx",  # UCX's `[host:pid:n:tid] Caught signal 11 (…)` (NIXL, Mooncake transfers)
    "other",
)

# Process roles (`role` column).
ROLES: tuple[str, ...] = (
    "scheduler",
    "main",
    "detokenizer",
    "dp_controller",
    "tokenizer_worker",
    "router",  # the SGLang router / model gateway (a separate program)
    "encoder",  # an encoder server of EPD disaggregation (` encode_server` prefix)
)

# How the process of a line was identified (`evidence` column).
EVIDENCE: tuple[str, ...] = (
    "prefix",  # the SGLang prefix ranks on the line itself
    "only-scheduler",  # a scheduler-only message with no tokens, when there is one scheduler
    "pid",  # a PID on the line that an earlier line tied to a process
    "nccl-device",  # NCCL host + cudaDev -> node + gpu_id -> process
    "gpu-prefix",  # SGLang 0.2.x `[gpu=N]` -> node + gpu_id -> process
    "torch-rank",  # torch's `[rankN]:` global rank (unique only without native DP)
    "group-rank",  # a group-local rank resolved through the group's member list
    "continuation",  # an unprefixed line inside a record started by an identified line
    "file",  # the whole file belongs to one process
    "srun-task",  # an `srun --label` task whose lines show one torch rank, one task per rank
)

# ---------------------------------------------------------------------------------------------
# Stage 1 (ingest): one row per physical line.
LINES_SCHEMA: dict[str, pl.DataType] = {
    "file_id": pl.UInt32(),  # index into the list of sources, in sorted path order
    "line": pl.UInt32(),  # 1-based physical line number in that file
    "text": pl.String(),  # decoded line, line ending removed, undecodable bytes -> U+FFFD
}

# Stage 2 (formats): one row per record part; everything a line says about itself.
# Columns are null when the line does not carry that field.
PARSED_SCHEMA: dict[str, pl.DataType] = {
    "file_id": pl.UInt32(),
    "line": pl.UInt32(),
    "part": pl.UInt16(),  # 0.. ; parts of one physical line concatenate to its text
    "text": pl.String(),  # this part's text, unchanged
    # the message under a peeled wrapper (a CRI / kubectl / Loki / relay prefix, a Docker
    # json-file envelope decoded); null when the text is the message. Rules read this.
    "msg": pl.String(),
    "source": pl.String(),  # one of SOURCES
    "role": pl.String(),  # role the line itself proves (e.g. uvicorn -> main), else null
    "starts_record": pl.Boolean(),  # a header line (own prefix / own timestamp) vs continuation
    # time, as printed on the line (naive local time); see `ts_has_year` / `ts_has_date`
    "ts": pl.Datetime("us"),
    "ts_has_date": pl.Boolean(),  # False: time of day only (year-month-day placeholder 2000-01-01)
    "ts_has_year": pl.Boolean(),  # False: month/day known, year placeholder 2000 (glog, c10)
    "wrap_ts": pl.Datetime("us", "UTC"),  # collector / CRI timestamp when it carries a zone
    # the output stream a wrapper names (`pod/NAME` of kubectl --prefix, `Actor pid=N, ip=…`
    # of Ray, `task=N` of srun --label, a docker compose service): a line continues only a
    # record of its own stream
    "stream": pl.String(),
    # identity fields printed on the line or its wrapper
    "host": pl.String(),
    "pid": pl.Int64(),
    "tid": pl.Int64(),
    "device_id": pl.Int32(),  # NCCL [cudaDev], CANN Device:
    # SGLang prefix tokens
    "p_dp": pl.Int32(),
    "p_pp": pl.Int32(),
    "p_attn_cp": pl.Int32(),
    "p_moe_dp": pl.Int32(),
    "p_tp": pl.Int32(),
    "p_ep": pl.Int32(),
    "p_pid": pl.Int32(),  # trailing PID<n> token (proposed upstream)
    # torch c10d
    "torch_rank": pl.Int32(),  # [rankN]: (the WORLD rank of its replica)
    "pg_id": pl.Int32(),
    "pg_guid": pl.String(),
    "pg_desc": pl.String(),  # e.g. "tp:device", "default_pg"
    "pg_rank": pl.Int32(),  # rank inside that PG
    "seq": pl.Int64(),  # WorkNCCL SeqNum / "at work" sequence id
    "op": pl.String(),  # WorkNCCL OpType
    "last_enqueued": pl.Int64(),
    "last_completed": pl.Int64(),
    # NCCL communicator lines
    "comm": pl.String(),  # per-process pointer 0x...
    "comm_id": pl.String(),  # shared by all members
    "comm_rank": pl.Int32(),
    "comm_nranks": pl.Int32(),
    "nccl_phase": pl.String(),  # "Init START" | "Init COMPLETE" | "Abort COMPLETE"
    # torch's Gloo group init: `[Gloo] Rank r is connected to n peer ranks` -> r, n + 1
    "gloo_rank": pl.Int32(),
    "gloo_size": pl.Int32(),
    # links between a PID and a process learned from the text
    "link_pid": pl.Int64(),  # "Pyspy dump for PID n", "Process n: sglang::scheduler_TP3", ...
    "proctitle": pl.String(),  # "sglang::scheduler_DP0_TP0_EP0" when printed with link_pid
    "server_args": pl.Boolean(),  # the line holds server_args=...
    # the last part of a line cut into `parts.MAX_PARTS` parts: it holds the line's rest whole
    "capped": pl.Boolean(),
}

# Stage 5 (output): the tagged timeline contract. Order of columns is the output order.
TIMELINE_SCHEMA: dict[str, pl.DataType] = {
    "file": pl.String(),
    "line": pl.UInt32(),
    "part": pl.UInt16(),
    "order": pl.UInt64(),
    "ts": pl.String(),  # ISO 8601 local time with the fraction the line has, or null
    "source": pl.String(),
    "role": pl.String(),
    "host": pl.String(),
    "node_rank": pl.Int32(),
    "pid": pl.Int64(),
    "tid": pl.Int64(),
    "device_id": pl.Int32(),
    "gpu_id": pl.Int32(),
    "replica": pl.Int32(),
    "world_rank": pl.Int32(),
    "dp_rank": pl.Int32(),
    "pp_rank": pl.Int32(),
    "tp_rank": pl.Int32(),
    "attn_dp_rank": pl.Int32(),
    "attn_cp_rank": pl.Int32(),
    "attn_tp_rank": pl.Int32(),
    "moe_dp_rank": pl.Int32(),
    "moe_ep_rank": pl.Int32(),
    "moe_tp_rank": pl.Int32(),
    "evidence": pl.String(),
    # the output stream the line came through: the wrapper's (`pod/NAME`, a Ray actor
    # `WorkerDict pid=N, ip=…`, `task=N`, a compose service), else the file when it is one
    # process's own; not a process coordinate (an actor's children print under its pid)
    "stream": pl.String(),
    "text": pl.String(),
}
