"""What every rule reads: the `Context` (the event rows, each process's last line and
coordinates), the `Finding` a rule returns, the message stems, and the helpers that name and cite
processes. No rule lives here."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import polars as pl
import regex

from logcorr import _core
from logcorr.model import COORDINATES
from logcorr.topology import Topology

SEVERITIES = ("error", "warning", "info")

# Event stems, tested with literal `contains` on the text (cheap, vectorised).
# a CUDA fault (`CUDA error:` with its colon: a model-config warning says "may lead to … CUDA
# errors")
CUDA_FAULT_STEMS = ("illegal memory access", "CUDA error:", "CUDA Error:", "HIP error:",
                    # the ROCm runtime's report before it aborts the process (no traceback)
                    "Memory access fault by GPU")
# lines by which the main process, DP controller or a node's launcher reports a dead child
REAPED_STEMS = ("crashed with exit code", "Scheduler or DataParallelController",
                "scheduler is dead", "scheduler died during initialization")
CRASH_STEMS = ("hit an exception", "Fatal Python error", *CUDA_FAULT_STEMS,
               # SGLang 0.2.x-0.3.x: a TP worker logs its traceback under these and re-raises
               "Exception in ModelTpServer", "Exception in run_tp_server",
               "terminate called after throwing", "died during initialization", *REAPED_STEMS,
               # torch's heartbeat monitor: the process's NCCL watchdog thread itself got stuck
               "Heartbeat monitor timed out", "due to ProcessGroupNCCL watchdog hang",
               "NCCL error", "ncclSystemError", "ncclInternalError", "ncclUnhandledCudaError",
               # a native crash caught by UCX (NIXL / Mooncake), and Ascend NPU device errors
               "] Caught signal ", "NPU function error", "Kernel task happen error",
               "call acl api failed",
               # out of device memory (torch's CUDA / ROCm / torch_npu messages)
               "CUDA out of memory", "HIP out of memory", "NPU out of memory", "OutOfMemoryError",
               # the scheduler's own pool check (raised, the scheduler exits)
               "memory leak detected!")
# The closing line of a traceback after Ctrl-C: the operator stopped the server (every child
# without its own handler prints `Process Process-2:` and this traceback)
INTERRUPTED = "KeyboardInterrupt"
# The main process heard that a child failed, or a launcher saw the server die (SGLang's
# popen_launch_server): with no other fatal line, a crash whose process the logs do not show.
# So does a job launcher: srun's `srun: error: node-3: task 7: Exited with exit code 1`,
# torchrun's elastic agent's `failed (exitcode: 1) local_rank: 3 (pid: 12345) of binary: …`.
LAUNCHER_EXIT_STEMS = ("Exited with exit code", "failed (exitcode: ")
CHILD_FAILED_STEMS = ("Received sigquit from a child process", "Server process exited with code",
                      *LAUNCHER_EXIT_STEMS)
# A launcher taking the job down once a process died: slurmstepd cancelling the step
# (`slurmstepd: error: *** STEP 1745223.0 ON node-3 CANCELLED AT 2025-04-21T10:00:05 ***`),
# torchrun's agent raising `ChildFailedError` (its summary, below) or killed by a signal
# (`torch.distributed.elastic.multiprocessing.api.SignalException: Process 4000 got signal: 15`)
LAUNCHER_STEMS = ("CANCELLED AT", "ChildFailedError", "SignalException: Process")
# (not a bare "terminated with": torch's "watchdog thread terminated with exception" is the crash)
CASCADE_STEMS = ("Received sigquit", "SIGQUIT received", "crashed with exit code",
                 "terminated with signal", "terminated with exit code", "kill_process_tree",
                 "Killed", "Triggering SIGQUIT", *LAUNCHER_EXIT_STEMS, *LAUNCHER_STEMS)
# A traceback a process writes raw to stderr (`sys.excepthook`): its first line (a logged one,
# `… hit an exception: Traceback …`, is a crash stem of its own)
UNCAUGHT = "Traceback (most recent call last)"
# torch elastic's `ChildFailedError` summary: `Root Cause (first observed failure):`, then per
# failure `[0]:` / `  time      : 2025-04-21_10:00:03` / `  host      : node-1` / `  rank      :
# 11 (local_rank: 3)` / `  exitcode  : 1 (pid: 5012)` / `  error_file: …` / `  traceback : …`
ELASTIC_STEMS = ("Root Cause (first observed failure)", "  time      : ", "  host      : ",
                 "  rank      : ", "  exitcode  : ")
# What a process writes as it exits after an uncaught exception (not work of its own): torch's
# warning that the process group was not destroyed, Python's shutdown warnings
EXIT_NOISE = ("process group has NOT been destroyed", "destroy_process_group() was not called",
              "leaked semaphore", "Exception ignored in", "resource_tracker")
# How a process is taken down rather than why: Python's faulthandler on SIGABRT, C++'s
# std::terminate, torch's heartbeat monitor ending a process whose watchdog thread is stuck.
# After a group's timeout these (and a parent's `exit code -6`) are the hang's teardown.
ABORT_STEMS = ("Fatal Python error: Aborted", "terminate called after throwing",
               "Terminating the process", "due to ProcessGroupNCCL watchdog hang",
               "Heartbeat monitor timed out")
# multiprocessing's `Process SpawnProcess-1:` before the traceback of a child that raised and
# exited (anywhere after a wrapper)
CHILD_DIED = rf"(?:^|[\s)\]]){_core.PATTERNS['CHILD_DIED']}"
TIMEOUT_STEMS = ("Watchdog caught collective operation timeout", "detected by watchdog at work",
                 "Timeout at NCCL work", "failure detected by watchdog")
# Lines by which a member says it saw a timeout (its own or a peer's) without the SeqNum it
# reached: torch's flight-recorder dump lines, and what WorkNCCL::handleException prints when the
# member's own work failed or timed out. They carry no progress of the group that hangs.
DUMP_STEMS = ("Received a dump signal", "preparing to dump debug info",
              "Some NCCL operations have failed or timed out",
              "To avoid data inconsistency, we are taking the entire process down")
# `{debug_name} watchdog timeout (self.watchdog_timeout=…)` (utils/watchdog.py: Scheduler,
# DetokenizerManager, TokenizerManager, DataParallelController), older `Watchdog timeout (…)`
SGLANG_WATCHDOG_STEMS = (" watchdog timeout (self.watchdog_timeout", "Watchdog timeout (self.watchdog_timeout",
                         # printed first when it fires (utils/watchdog.py 0.5.9+: debug info, a
                         # py-spy dump, then the timeout line): logs cut before the last still show it
                         "] Scheduler debug info:", "] DetokenizerManager debug info:",
                         "] TokenizerManager debug info:", "] DataParallelController debug info:")
# The HTTP server's health check got no answer through the detokenizer (http_server.py 0.4-0.5)
HEALTH_STEMS = ("Health check failed. Server couldn't get a response",)
# PD disaggregation: a decode/prefill instance lost its peer (mooncake/nixl conn: 0.5.9
# `Losing connection with prefill instance`, 0.5.23 `Lost connection with …`) and the KV
# transfers that failed with it
PEER_STEMS = ("connection with prefill instance", "connection with decode instance")
TRANSFER_STEMS = ("Decode transfer failed", "Prefill transfer failed",
                  # 0.5.23: a request aborted in the handshake with its peer
                  "Prefill bootstrap failed for request", "Decode handshake failed for request")
# Mooncake's transfer engine: a slice that failed (it retries it) and a NIC it stops using
# (transfers move to the others). Cited with a transfer failure, never one by themselves.
RDMA_STEMS = ("Too many errors found in local RNIC", "Process failed for slice")
# a decode instance cannot reach the prefill instance's bootstrap server (common/mooncake conn:
# 0.4.x-0.5.23 `Error fetching prefill parallel info from bootstrap: HTTPConnectionPool(...)`,
# `Could not fetch prefill parallel info from bootstrap_addr: …` / `… from <addr> after n
# attempts`)
BOOTSTRAP_STEMS = ("Error fetching prefill parallel info from bootstrap",
                   "Error fetching prefill info from bootstrap",
                   "Could not fetch prefill parallel info from",
                   "Failed to get prefill parallel info", "Failed to get prefill server info")
# What a process prints when a peer failed first (see `_victims`): torch's Gloo barrier naming
# the rank it waited for, SGLang's check that every TP rank loaded the model, broken links.
VICTIM_STEMS = ("remote process exited", "communicator was aborted", "Connection reset by peer",
                "ncclRemoteError", "Connection closed by peer", "Broken pipe",
                "received errors while waiting for send/recv from rank",
                "could finish the model loading, but there are other ranks")
# torch's rendezvous store (TCPStore, at SGLang's --dist-init-addr) out of reach at startup:
# a connect that timed out, or `TCP client failed to connect/validate to host … - timed out
# (try=…)` (not its `… - retrying (…)` warning, unless the cause it quotes is that timeout)
STORE_STEMS = ("The client socket has timed out after", " - timed out (try=")
# NCCL's error return trace through communicator init (`NCCL INFO init.cc:1534 -> 2`): the
# WARN before it on the same process is why its ncclCommInitRank failed
NCCL_INIT_TRACE = "NCCL INFO init.cc:"
_FAILED_RETURN = r" -> [1-9]\d*\s*$"
# Startup phases in order: (name, begin stem, end stem).
PHASES = (
    ("distributed init", ("Init torch distributed begin", "Init parallel begin"),
     ("Init torch distributed ends", "Init parallel ends")),
    ("weight loading", ("Load weight begin",), ("Load weight end",)),
    ("memory pool", ("Load weight end",), ("KV Cache is allocated", "Memory pool end")),
    ("CUDA graph capture", ("Capture cuda graph begin", "CUDA graph begin"),
     ("Capture cuda graph end", "CUDA graph end")),
)
# NCCL's communicator init, in the order a rank goes through it (NCCL 2.18-2.27): after `Init
# START` the bootstrap allgather (the `nNodes … localRanks` topology line, 2.23+'s `Bootstrap
# timings`), then connection setup (`Channel 00/0 : 0[0] -> 1[1] via P2P/IPC`, `… [send] via
# NET/IB/0`), `Connected all rings`, `Connected all trees` / `Connected NVLS`, `Init COMPLETE`.
NCCL_INIT_STEPS = (
    ("Init START", ("Init START",)),
    ("bootstrap", (" localRanks ", "Bootstrap timings")),
    ("connection setup", ("] via P2P", "] via NET", "] via SHM", "] [send] via ",
                          "] [receive] via ")),
    ("rings connected", ("Connected all rings",)),
    ("trees connected", ("Connected all trees", "Connected NVLS", "Connected collnet")),
    ("Init COMPLETE", ("- Init COMPLETE",)),
)
# NCCL's own words that a peer went away (the rank saying it is a victim): a refused or closed
# connection to a peer, a remote error
NCCL_PEER_LOST = ("Connection refused", "Connection closed by remote peer", "remote process exited",
                  "Connection reset by peer", "ncclRemoteError")
# py-spy's thread line (its next line is the top frame: `    all_reduce (torch/…:2501)`)
PYSPY_THREAD = ': "MainThread"'
ALL_STEMS = tuple(sorted({*CRASH_STEMS, *CASCADE_STEMS, *TIMEOUT_STEMS, *SGLANG_WATCHDOG_STEMS,
                          *DUMP_STEMS, *HEALTH_STEMS, *PEER_STEMS, *TRANSFER_STEMS,
                          *BOOTSTRAP_STEMS, *VICTIM_STEMS, NCCL_INIT_TRACE,
                          *CHILD_FAILED_STEMS, *STORE_STEMS, *RDMA_STEMS, INTERRUPTED,
                          UNCAUGHT, *ELASTIC_STEMS,
                          "Pyspy dump", "NCCL WARN", PYSPY_THREAD, *NCCL_PEER_LOST,
                          *(stem for _, begins, ends in PHASES for stem in begins + ends)}))
# Lines a serving scheduler prints while it makes progress (only the ranks that print batch
# statistics: attention-TP rank 0 of each DP rank, and only while they have requests)
PROGRESS_STEMS = ["] Decode batch", "] Prefill batch"]
# glog's fatal severity (`[F1129 10:00:00.123 ProcessGroupNCCL.cpp:1400] …`, behind `[rank3]:`):
# LOG(FATAL) aborts the process
GLOG_FATAL = r"(?:^|\]:)\s*\[F\d{3,4} \d\d:\d\d:\d\d"
STALL_SECONDS = 120.0
SKEW_SECONDS = 2.0


@dataclass
class Finding:
    kind: str
    severity: str
    summary: str
    processes: list[dict[str, Any]] = field(default_factory=list)
    group: str | None = None
    group_members: list[int] | None = None
    seq: int | None = None
    op: str | None = None
    first_ts: str | None = None
    last_ts: str | None = None
    evidence: list[dict[str, Any]] = field(default_factory=list)
    progress: list[dict[str, Any]] = field(default_factory=list)  # per member, for the table
    waiting: list[dict[str, Any]] = field(default_factory=list)
    # processes of the incident whose logs are not in the set: nothing can be said of them
    unknown: list[dict[str, Any]] = field(default_factory=list)
    # what followed from this finding, one record per kind (see `consequences.records`)
    consequences: list[dict[str, Any]] = field(default_factory=list)
    # an error finding's role in the incidents: "root" (the verdict) or "independent" (a
    # second incident: its summary says why it is separate)
    role: str | None = None
    # the wrapper stream its lines came through, when no process can be named (Ray's
    # `(WorkerDict pid=859188)`)
    stream: str | None = None
    # the event rows it rests on, and the rows of what followed from it by kind (folded into
    # `consequences` once the incidents are known); not part of the report
    rows: pl.DataFrame | None = field(default=None, repr=False, compare=False)
    followed: list[tuple[str, pl.DataFrame]] = field(default_factory=list, repr=False,
                                                     compare=False)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "severity": self.severity, "summary": self.summary,
                "role": self.role, "processes": self.processes, "stream": self.stream,
                "group": self.group, "group_members": self.group_members, "seq": self.seq,
                "op": self.op, "first_ts": self.first_ts, "last_ts": self.last_ts,
                "evidence": self.evidence, "waiting": self.waiting, "progress": self.progress,
                "unknown_processes": self.unknown, "consequences": self.consequences}

    def then(self, kind: str, rows: pl.DataFrame | None) -> None:
        """Record that `rows` (event rows, of observations of `kind` unless their text says
        another: an abort, an exit code, the kill cascade) followed from this finding."""
        if rows is not None and rows.height:
            self.followed.append((kind, rows))


@dataclass
class Context:
    """What the rules read: the few rows any rule looks at, and who each process is.

    `events` holds the rows with a message stem, an NCCL communicator field or a torch rank
    (gathered by the core in pass 2, with `_next`: the next physical line's text when it
    continues the line); `last` is each process's latest time and last line; `rows_of` reads
    the rows of some files (lazily, for the few lookups that need more than the events: the
    stored runs, or the files read again).
    """

    # file ids -> their rows, in no particular order (proc, record, text, msg, host, pid, ...)
    rows_of: Callable[[list[int]], pl.LazyFrame]
    topology: Topology | None
    files: dict[int, str]
    people: dict[int, dict[str, Any]]  # proc -> full coordinates + host + pid
    events: pl.DataFrame = field(default_factory=pl.DataFrame)
    last: pl.DataFrame = field(default_factory=pl.DataFrame)
    progress: pl.DataFrame = field(default_factory=pl.DataFrame)  # proc -> last batch line time
    places: pl.DataFrame = field(default_factory=pl.DataFrame)  # (file_id, proc): where its lines are

    def __post_init__(self) -> None:
        if self.events.height == 0:
            self.events = pl.DataFrame(schema=_EVENT_SCHEMA)
        if "_n" not in self.events.columns:
            self.events = self.events.with_columns(pl.lit(1, pl.UInt32).alias("_n"))
        self.events = _rejoin_wrapped(self.events.sort(_ORDER).with_columns(
            pl.int_range(pl.len(), dtype=pl.UInt64).alias("order"),
            pl.col("host").alias("eff_host")))

    def absent(self, procs: Iterable[int]) -> list[int]:
        """The processes of `procs` whose logs are not in the set: no line of their own, and no
        file holds lines of two processes of their node (a node's or a combined file would
        hold theirs too: then they are silent, not absent)."""
        missing = sorted(p for p in set(procs) if p not in self.people)
        if not missing or self.topology is None:
            return missing
        seen = pl.concat([self.events.select("file_id", "proc"),
                          self.last.select("file_id", "proc") if self.last.height else
                          pl.DataFrame(schema={"file_id": pl.UInt32, "proc": pl.UInt32})],
                         how="vertical_relaxed").drop_nulls().unique()
        processes = self.topology.processes
        node = {p: processes[p].node_rank for p in seen["proc"].to_list() if p < len(processes)}
        shared: set[int | None] = set()
        for (_,), rows in seen.group_by("file_id"):
            nodes = [node.get(int(p)) for p in rows["proc"].to_list()]
            shared |= {n for n in nodes if nodes.count(n) > 1}
        return [p for p in missing if p >= len(processes) or processes[p].node_rank not in shared]

    def files_of(self, procs: Iterable[int]) -> list[int]:
        """The files that hold lines of these processes."""
        if self.places.height == 0:
            return []
        return (self.places.filter(pl.col("proc").is_in(list(procs)))
                .get_column("file_id").unique().to_list())

    def who(self, procs: Iterable[int]) -> list[dict[str, Any]]:
        return [self.people[p] for p in sorted(set(procs)) if p in self.people]

    def cite(self, rows: pl.DataFrame, limit: int = 8) -> list[dict[str, Any]]:
        """The first `limit` distinct (file, line) places of `rows`, in their order."""
        places = rows.select("file_id", "line").unique(maintain_order=True).head(limit)
        return [{"file": self.files.get(f, "?"), "line": int(n)} for f, n in places.iter_rows()]


_ORDER = ["_sk", "file_id", "line", "part"]  # the timeline order (see logcorr.stream)
# A line at least this long (bytes) may be the first half of a message hard-wrapped at a fixed
# column: the core reads the seam of it and the next line for a stem cut in two.
WRAP_MIN = 60
_EVENT_SCHEMA: dict[str, pl.DataType] = {"_sk": pl.Int64(), "file_id": pl.UInt32(), "line": pl.UInt32(), "part": pl.UInt16(),
                 "text": pl.String(), "proc": pl.UInt32(), "role": pl.String(),
                 "ts_full": pl.Datetime("us"),
                 "host": pl.String(), "pid": pl.Int64(), "record": pl.UInt32(),
                 "starts_record": pl.Boolean(), "torch_rank": pl.Int32(), "pg_desc": pl.String(),
                 "pg_rank": pl.Int32(), "seq": pl.Int64(), "op": pl.String(),
                 "last_enqueued": pl.Int64(), "last_completed": pl.Int64(), "comm": pl.String(),
                 "comm_id": pl.String(),
                 "comm_rank": pl.Int32(), "comm_nranks": pl.Int32(), "nccl_phase": pl.String(),
                 "_next": pl.String(), "stream": pl.String(), "_said": pl.Boolean(),
                 "_n": pl.UInt32()}

# A process can log one failure line per request, slice or health check (a PD decode instance
# whose prefill peer died: a KV transfer failure for every request) and fill a log with them.
# Of the event rows that say the same (the same columns and the same text but for times and long
# ids: request ids, bootstrap rooms, pointers), the first THIN_FIRST and the last THIN_LAST in
# timeline order are kept, with the earliest and the latest time, and `_n` of the last first one
# counts the rows left out: the rules count lines by `_n` (`lines_in`), cite at most the first 12
# places of what they read and take first and last times, so they answer as with every row, in
# memory that does not grow with the repeats.
# A row that is an event row only for its fields (a torch rank, a communicator: `_said` false;
# a torch watchdog heartbeat every minute, say) is read by the rules only for who wrote it and
# when, never for its counters: rows of that kind that differ only in numbers (their text's
# and the counters') say the same.
THIN_FIRST = 64
THIN_LAST = 16
_VOLATILE = (r"\d{4}-\d{2}-\d{2}|\d{1,2}:\d{2}:\d{2}(?:[.,]\d+)?|\b[IWEF]\d{4}\b"
             r"|(?:0x)?[0-9a-fA-F]{8,}(?:\.\d+)?")
# (where a row stands in the timeline, and what it says: not part of what it repeats)
_PLACE = {"_sk", "file_id", "line", "part", "text", "ts_full", "record", "_n"}
_COUNTERS = ("seq", "last_enqueued", "last_completed")


def lines_in(rows: pl.DataFrame) -> int:
    """How many log lines event rows stand for (a kept row of repeats counts those left out)."""
    return int(rows.get_column("_n").sum())


def thin_events(events: pl.DataFrame) -> pl.DataFrame:
    """`events` (with `_n`) with each run of rows that say the same cut to its first
    THIN_FIRST and last THIN_LAST, the rows left out counted on the last first one; in the
    timeline order when anything was cut.

    Only a row's number, its group's and the timeline key are carried through the sort (a
    set of many different event rows cuts hundreds of thousands at a time: the rows
    themselves are gathered once, at the end)."""
    if "_n" not in events.columns:
        events = events.with_columns(pl.lit(1, pl.UInt32).alias("_n"))
    most = THIN_FIRST + THIN_LAST
    if events.height <= most:
        return events
    same = [c for c in events.columns if c not in _PLACE]
    # (a row only its fields made an event row: its counters are not what it says)
    said = pl.col("_said") if "_said" in events.columns else pl.lit(True)
    kinds = {c: pl.when(said).then(pl.col(c)).alias(c) for c in _COUNTERS if c in same}
    # (rows that differ in a column differ whatever their text: most chunks end here)
    if events.select(pl.len().over([kinds.get(c, pl.col(c)) for c in same]).max()
                     ).item() <= most:
        return events
    key = [*same, "_shape"]
    shape = pl.col("text").str.replace_all(_VOLATILE, "#")
    groups = (events.with_columns(*kinds.values(),
                                  pl.when(said).then(shape)
                                  .otherwise(shape.str.replace_all(r"\d+", "#")).alias("_shape"),
                                  pl.int_range(pl.len(), dtype=pl.UInt32).alias("_row"))
              .select("_row", pl.col("_row").min().over(key).alias("_group"),
                      pl.len().over(key).alias("_size")))
    if groups.get_column("_size").max() <= most:  # type: ignore[operator]
        return events
    # (a group of at most `most` rows keeps them all, and their counts)
    big = (pl.concat([groups, events.select(*_ORDER, "ts_full", "_n")], how="horizontal")
           .filter(pl.col("_size") > most).sort(_ORDER))
    rank = pl.int_range(pl.len()).over("_group")
    # (and the earliest and latest time: a clock that jumps back puts them elsewhere)
    span = (rank == pl.col("ts_full").arg_min().over("_group")) | (
        rank == pl.col("ts_full").arg_max().over("_group"))
    big = big.with_columns(
        _keep=(rank < THIN_FIRST) | (rank >= pl.col("_size") - THIN_LAST) | span.fill_null(False),
        _last_first=rank == THIN_FIRST - 1)
    left_out = pl.when(pl.col("_keep")).then(0).otherwise(pl.col("_n")).sum().over("_group")
    big = big.select("_row", "_keep", pl.when("_last_first").then(pl.col("_n") + left_out)
                     .otherwise("_n").cast(pl.UInt32).alias("_n"))
    rows = big.get_column("_row")
    counts = events.get_column("_n").cast(pl.UInt32).scatter(rows, big.get_column("_n"))
    keep = pl.repeat(True, events.height, eager=True).scatter(rows, big.get_column("_keep"))
    return events.with_columns(counts).filter(keep).sort(_ORDER)


def merge_people(parts: list[pl.DataFrame]) -> dict[int, dict[str, Any]]:
    """proc -> its coordinates (from its first line) with the host and PID most of its lines
    show (ties: the smallest), from per-chunk (proc, host, pid, len, coordinates, key)."""
    parts = [p for p in parts if p.height]
    if not parts:
        return {}
    counts = pl.concat(parts)

    def most_common(name: str) -> pl.DataFrame:
        per = (counts.filter(pl.col(name).is_not_null()).group_by("proc", name)
               .agg(pl.col("len").sum()))
        return (per.filter(pl.col("len") == pl.col("len").max().over("proc"))
                .group_by("proc").agg(pl.col(name).min()))
    first = counts.sort(_ORDER).group_by("proc", maintain_order=True).agg(
        *(pl.col(c).first() for c in COORDINATES))
    table = (first.join(most_common("host"), on="proc", how="left")
             .join(most_common("pid"), on="proc", how="left"))
    return {int(row.pop("proc")): row for row in table.iter_rows(named=True)}


# Fields of a watchdog line that a terminal copy may have hard-wrapped onto the next line.
_WRAPPED_FIELDS = {
    "seq": (_core.PATTERNS["WORK"], 1, pl.Int64), "op": (_core.PATTERNS["WORK"], 2, pl.String),
    "last_enqueued": (_core.PATTERNS["COUNTERS"], 1, pl.Int64),
    "last_completed": (_core.PATTERNS["COUNTERS"], 2, pl.Int64),
    "pg_desc": (r"PG GUID [^\s(\]]*\(([^)]*)\)", 1, pl.String),
    "pg_rank": (r"\) Rank (\d+)\]", 1, pl.Int32),
}


def _rejoin_wrapped(events: pl.DataFrame) -> pl.DataFrame:
    """Watchdog lines cut by a hard wrap (`WorkNCCL(S` / `eqNum=9141, …`): read their fields
    again from the line joined with the next physical line (`_next`)."""
    cut = (pl.col("text").str.contains("WorkNCCL(", literal=True) & pl.col("seq").is_null()
           | pl.col("text").str.contains("last enqueued", literal=True)
           & pl.col("last_completed").is_null()
           | pl.col("text").str.contains("PG GUID", literal=True) & pl.col("pg_desc").is_null())
    joined = pl.col("text") + pl.col("_next").fill_null("")
    return events.with_columns(
        pl.when(cut).then(pl.coalesce(name, joined.str.extract(pattern, group)
                                      .cast(dtype, strict=False))).otherwise(pl.col(name))
        .alias(name) for name, (pattern, group, dtype) in _WRAPPED_FIELDS.items())


def _contains_any(stems: Iterable[str]) -> pl.Expr:
    return pl.any_horizontal(pl.col("text").str.contains(s, literal=True) for s in stems)


def shifted(when: datetime, by: timedelta) -> datetime:
    """`when + by`, held at the calendar's first or last instant rather than past it: a rule's
    window around a record stamped in the first minutes of year 1 (or the last of 9999) ends
    at the calendar's edge. (A window polars computes, on 64-bit microseconds, cannot
    overflow: only Python's datetime arithmetic needs this.)

    >>> shifted(datetime(1, 1, 1, 0, 0, 30), timedelta(minutes=-10))
    datetime.datetime(1, 1, 1, 0, 0)
    >>> shifted(datetime(9999, 12, 31, 23, 59, 50), timedelta(seconds=60)).isoformat()
    '9999-12-31T23:59:59.999999'
    """
    try:
        return when + by
    except OverflowError:
        edge = datetime.min if by < timedelta(0) else datetime.max
        return edge.replace(tzinfo=when.tzinfo)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _span(times: pl.Series) -> tuple[str | None, str | None]:
    """(first_ts, last_ts) of a Finding from a column of times (nulls ignored)."""
    values = times.drop_nulls()
    if values.len() == 0:
        return None, None
    return _iso(values.min()), _iso(values.max())  # type: ignore[arg-type]


def _places(rows: Iterable[dict[str, Any]]) -> pl.DataFrame:
    """(file_id, line) of event rows held as dicts, for `Context.cite`."""
    return pl.DataFrame([{"file_id": r["file_id"], "line": r["line"]} for r in rows],
                        schema={"file_id": pl.UInt32, "line": pl.UInt32})


def _hang_lines(events: pl.DataFrame) -> pl.DataFrame:
    """Collective timeouts and hard SGLang watchdogs (a soft one only dumps state)."""
    return events.filter(_contains_any(TIMEOUT_STEMS + SGLANG_WATCHDOG_STEMS)
                         & ~pl.col("text").str.contains("self.soft=True", literal=True))


def _interrupt_lines(events: pl.DataFrame) -> pl.DataFrame:
    """`KeyboardInterrupt` closing a traceback: Ctrl-C."""
    return events.filter(pl.col("text").str.strip_chars().str.starts_with(INTERRUPTED))


def _first_order(rows: pl.DataFrame) -> int | None:
    """The timeline position of the first of `rows`, None when there are none."""
    return int(rows["order"].min()) if rows.height else None  # type: ignore[arg-type]


def _cascade_after(ctx: Context, row: dict[str, Any]) -> pl.DataFrame:
    """The SIGQUIT / kill lines after `row` (the killing that follows a crash or a hang)."""
    return ctx.events.filter(_contains_any(CASCADE_STEMS) & (pl.col("order") > row["order"]))


def _unnamed(role: str | None) -> str:
    """Who a line names when no evidence ties it to a process: at most its role."""
    if role == "scheduler":
        return "a scheduler that no line identifies"
    return f"the {role} process" if role else "a process that no line identifies"


def _last_ts(frame: pl.DataFrame) -> datetime | None:
    values = frame["ts_full"].drop_nulls()
    return values.max() if values.len() else None  # type: ignore[return-value]


_TOKENS = (("dp_rank", "DP"), ("pp_rank", "PP"), ("attn_cp_rank", "ATTN_CP"),
           ("moe_dp_rank", "MOE_DP"), ("tp_rank", "TP"), ("moe_ep_rank", "EP"))


def _name(person: dict[str, Any]) -> str:
    """`world rank 9`, or without a topology the ranks its prefix printed (`DP4 TP9 EP9`)."""
    if person.get("world_rank") is not None:
        return f"world rank {person['world_rank']}"
    printed = " ".join(f"{token}{person[key]}" for key, token in _TOKENS
                       if person.get(key) is not None)
    return printed or "an unnamed process"


def _short(person: dict[str, Any]) -> str:
    """Who a process is, as a summary names it first: `world rank 5 (TP5, node 0 GPU 5)`,
    `replica 1 world rank 2 (TP2, DP1, node 0 GPU 6)` with native-DP replicas (`PPn` past the
    first pipeline stage); without a world rank, the ranks its prefix printed and its host and
    PID (and a rank without a node - a torch job's, no topology - its host and PID)."""
    if not person:
        return "a process"
    head = (f"replica {person['replica']} " if person.get("replica") else "") + _name(person)
    bits = []
    if person.get("world_rank") is not None:
        bits += [f"TP{person['tp_rank']}"] if person.get("tp_rank") is not None else []
        bits += [f"DP{person['dp_rank']}"] if person.get("dp_rank") is not None else []
        bits += [f"PP{person['pp_rank']}"] if person.get("pp_rank") else []
    if person.get("node_rank") is not None:
        bits.append(f"node {person['node_rank']}" + (f" GPU {person['gpu_id']}"
                                                      if person.get("gpu_id") is not None else ""))
    # (no world rank, or a torch job's rank that no topology places on a node)
    if person.get("world_rank") is None or person.get("node_rank") is None:
        bits += [f"host {person['host']}"] if person.get("host") else []
        bits += [f"PID {person['pid']}"] if person.get("pid") else []
    return f"{head} ({', '.join(bits)})" if bits else head


def _person(ctx: Context, proc: int) -> dict[str, Any]:
    """Who `proc` is: from its lines, else (a process that left none) from the topology."""
    if proc in ctx.people or ctx.topology is None:
        return ctx.people.get(proc, {})
    process = ctx.topology.processes[proc]
    return {name: getattr(process, name) for name in COORDINATES} | {"host": None, "pid": None}


_FRAME_NAME = regex.compile(r"^\s*([^\s(]+) \(")


def stack_tops(ctx: Context, procs: Iterable[int]) -> dict[int, str]:
    """proc -> the function at the top of its main thread's py-spy dump (`Thread 4113 (idle):
    "MainThread"` / `    all_reduce (torch/distributed/distributed_c10d.py:2501)`), the last
    dump of each process."""
    wanted = sorted(set(procs))
    rows = ctx.events.filter(pl.col("proc").is_in(wanted) & pl.col("_next").is_not_null()
                             & pl.col("text").str.contains(PYSPY_THREAD, literal=True)
                             & pl.col("text").str.starts_with("Thread "))
    tops: dict[int, str] = {}
    for proc, frame in rows.sort("order").select("proc", "_next").iter_rows():
        found = _FRAME_NAME.match(str(frame))
        if found:
            tops[int(proc)] = found.group(1)
    return tops


def stack_groups(tops: dict[int, str]) -> tuple[str, list[int]]:
    """(`15 in all_reduce, 1 in synchronize`, the odd one out): the dumped processes grouped by
    their top frame; a single process whose top frame differs from that of all the others
    (two or more, all in one frame) is the odd one."""
    groups: dict[str, list[int]] = {}
    for proc, frame in tops.items():
        groups.setdefault(frame, []).append(proc)
    ranked = sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    text = ", ".join(f"{len(procs)} in {frame}" for frame, procs in ranked)
    odd = (ranked[1][1] if len(ranked) == 2 and len(ranked[1][1]) == 1
           and len(ranked[0][1]) >= 2 else [])
    return text, odd
