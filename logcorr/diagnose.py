"""Rules: (tagged timeline, topology) -> findings that name the process that went wrong.

A watchdog timeout is a symptom: every healthy member of a hung collective times out and
shouts, while the one that caused it is often the quietest. So the rules compare members of one
group instance and look for the odd one out:

| kind              | rests on                                                                    |
|-------------------|-----------------------------------------------------------------------------|
| crash             | a process's first exception / fatal error; the earliest is the root, the     |
|                   | SIGQUIT / kill cascade after it is attached, not reported as more roots     |
| collective-hang   | torch watchdog timeouts of one group instance: members behind the SeqNum the |
|                   | others wait on, or silent, are culprits; the ones that timed out are waiting |
| watchdog-timeout  | SGLang's own watchdog fired: those processes hung; the kill after it is      |
|                   | attached                                                                    |
| init-hang         | a startup phase begun and never ended (NCCL `Init START` without COMPLETE,  |
|                   | `Init … begin` without its end, weights never loaded) while others went on  |
| missing-process   | processes of the topology that left no line at all                          |
| stalled           | a process whose last line is far earlier than its TP peers', no timeout      |
| inconsistent      | the config and the logs disagree                                            |
| clock-skew        | one collective timing out at different times on different hosts             |
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import polars as pl
import regex

from logcorr.formats import python
from logcorr.formats.torch import COUNTERS, WORK
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
CHILD_FAILED_STEMS = ("Received sigquit from a child process", "Server process exited with code")
# (not a bare "terminated with": torch's "watchdog thread terminated with exception" is the crash)
CASCADE_STEMS = ("Received sigquit", "SIGQUIT received", "crashed with exit code",
                 "terminated with signal", "terminated with exit code", "kill_process_tree",
                 "Killed", "Triggering SIGQUIT")
# multiprocessing's `Process SpawnProcess-1:` before the traceback of a child that raised and
# exited (anywhere after a wrapper)
CHILD_DIED = rf"(?:^|[\s)\]]){python.CHILD_DIED}"
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
ALL_STEMS = tuple(sorted({*CRASH_STEMS, *CASCADE_STEMS, *TIMEOUT_STEMS, *SGLANG_WATCHDOG_STEMS,
                          *DUMP_STEMS, *HEALTH_STEMS, *PEER_STEMS, *TRANSFER_STEMS,
                          *BOOTSTRAP_STEMS, *VICTIM_STEMS, NCCL_INIT_TRACE,
                          *CHILD_FAILED_STEMS, *STORE_STEMS, *RDMA_STEMS, INTERRUPTED,
                          "Pyspy dump", "NCCL WARN",
                          *(stem for _, begins, ends in PHASES for stem in begins + ends)}))
# Lines a serving scheduler prints while it makes progress (only the ranks that print batch
# statistics: attention-TP rank 0 of each DP rank, and only while they have requests)
PROGRESS_STEMS = ["] Decode batch", "] Prefill batch"]
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

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "severity": self.severity, "summary": self.summary,
                "processes": self.processes, "group": self.group,
                "group_members": self.group_members, "seq": self.seq, "op": self.op,
                "first_ts": self.first_ts, "last_ts": self.last_ts, "evidence": self.evidence,
                "waiting": self.waiting, "progress": self.progress}


@dataclass
class Context:
    """What the rules read: the few rows any rule looks at, and who each process is.

    `events` holds the rows with a message stem, an NCCL communicator field or a torch rank
    (`event_rows`, gathered chunk by chunk, with `_next`: the next physical line's text when
    it continues the line); `last` is each process's latest time and last line; `rows` reads
    the whole timeline (lazily, for the few lookups that need more than the events).
    """

    rows: pl.LazyFrame  # all rows, in no particular order (proc, record, text, ...)
    topology: Topology | None
    files: dict[int, str]
    people: dict[int, dict[str, Any]]  # proc -> full coordinates + host + pid
    events: pl.DataFrame = field(default_factory=pl.DataFrame)
    last: pl.DataFrame = field(default_factory=pl.DataFrame)
    progress: pl.DataFrame = field(default_factory=pl.DataFrame)  # proc -> last batch line time

    def __post_init__(self) -> None:
        if self.events.height == 0:
            self.events = pl.DataFrame(schema=_EVENT_SCHEMA)
        self.events = _rejoin_wrapped(self.events.sort(_ORDER).with_columns(
            pl.int_range(pl.len(), dtype=pl.UInt64).alias("order"),
            pl.col("host").alias("eff_host")))

    def who(self, procs: Iterable[int]) -> list[dict[str, Any]]:
        return [self.people[p] for p in sorted(set(procs)) if p in self.people]

    def cite(self, rows: pl.DataFrame, limit: int = 8) -> list[dict[str, Any]]:
        """The first `limit` distinct (file, line) places of `rows`, in their order."""
        places = rows.select("file_id", "line").unique(maintain_order=True).head(limit)
        return [{"file": self.files.get(f, "?"), "line": int(n)} for f, n in places.iter_rows()]


_ORDER = ["_sk", "file_id", "line", "part"]  # the timeline order (see logcorr.stream)
_STEMS = "|".join(regex.escape(s) for s in ALL_STEMS)
_EVENT_SCHEMA: dict[str, pl.DataType] = {"_sk": pl.Int64(), "file_id": pl.UInt32(), "line": pl.UInt32(), "part": pl.UInt16(),
                 "text": pl.String(), "proc": pl.UInt32(), "role": pl.String(),
                 "ts_full": pl.Datetime("us"),
                 "host": pl.String(), "pid": pl.Int64(), "record": pl.UInt32(),
                 "starts_record": pl.Boolean(), "torch_rank": pl.Int32(), "pg_desc": pl.String(),
                 "pg_rank": pl.Int32(), "seq": pl.Int64(), "op": pl.String(),
                 "last_enqueued": pl.Int64(), "last_completed": pl.Int64(), "comm": pl.String(),
                 "comm_id": pl.String(),
                 "comm_rank": pl.Int32(), "comm_nranks": pl.Int32(), "nccl_phase": pl.String(),
                 "_next": pl.String()}


def event_rows(frame: pl.DataFrame) -> pl.DataFrame:
    """The rows of a chunk that a rule may read (a message stem, an NCCL communicator line or
    a torch rank), with the columns the rules use."""
    # (the rules read the message: under a wrapper, the line without it; `msg` is null on
    # most rows, so testing it as well costs little, and only the hits are rewritten)
    wrapped = "msg" in frame.columns
    found = pl.col("text").str.contains(_STEMS) | pl.col("text").str.contains(CHILD_DIED)
    if wrapped:
        found |= pl.col("msg").str.contains(CHILD_DIED).fill_null(False)
    hits = frame.filter(found | pl.col("comm_id").is_not_null()
                        | pl.col("torch_rank").is_not_null())
    if wrapped:
        hits = hits.with_columns(pl.coalesce("msg", "text").alias("text"))
    return hits.select(pl.col(name).cast(dtype) for name, dtype in _EVENT_SCHEMA.items())


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
    "seq": (WORK, 1, pl.Int64), "op": (WORK, 2, pl.String),
    "last_enqueued": (COUNTERS, 1, pl.Int64), "last_completed": (COUNTERS, 2, pl.Int64),
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


def diagnose(ctx: Context, contradictions: list[dict[str, object]]) -> list[Finding]:
    """All findings, errors first, then by time."""
    findings: list[Finding] = []
    crashes = crash_findings(ctx)
    findings += crashes
    crashed = {p["world_rank"] for f in crashes for p in f.processes}
    findings += hang_findings(ctx, crashed)
    findings += watchdog_findings(ctx, findings)
    findings += unresponsive_findings(ctx, findings)
    findings += transfer_findings(ctx)
    findings += init_findings(ctx)
    findings += missing_findings(ctx)
    findings += stalled_findings(ctx, findings)
    findings += clock_findings(ctx)
    findings += [Finding("inconsistent", "warning", str(c["detail"]),
                         evidence=[{"file": c["file"], "line": c["line"]}] if c.get("file") else [])
                 for c in contradictions]
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    return sorted(findings, key=lambda f: (rank[f.severity], f.first_ts or "~", f.kind))


# --------------------------------------------------------------------------- crash


def crash_findings(ctx: Context) -> list[Finding]:
    """The first fatal event of each process; the earliest overall is the root, later crashes
    and the SIGQUIT cascade hang off it."""
    rows = ctx.events
    fatal = rows.filter((_contains_any(CRASH_STEMS) | pl.col("text").str.contains(CHILD_DIED))
                        & ~pl.col("text").str.contains("NCCL WARN", literal=True)
                        & ~pl.col("text").str.contains(_CLEAN_EXIT))
    fatal = _named_by_pid(ctx, _not_interrupted(rows, fatal.filter(
        ~_timeout_abort(rows, fatal) & ~_reaped_after_timeout(rows, fatal))))
    crash = fatal.filter(pl.col("proc").is_not_null())
    unnamed = fatal.filter(pl.col("proc").is_null()).sort("order")
    if crash.height == 0:
        return (_unnamed_crash(ctx, unnamed) or _nccl_init_failures(ctx)
                or _child_failed(ctx))
    firsts = crash.group_by("proc").agg(pl.all().sort_by("order").first())
    # in one second (SGLang prints whole seconds) a victim's line does not make it the root
    second = pl.col("ts_full").dt.truncate("1s")
    firsts = firsts.join(_victims(ctx.events, firsts), on="proc", how="left").with_columns(
        _victim=pl.col("_victim").fill_null(False),
        _tie=pl.when(second.is_null()).then(pl.col("order"))
        .otherwise(pl.col("order").min().over(second))
    ).sort("_tie", "_victim", "order").drop("_tie")
    firsts = _first_not_victim(firsts)
    peer_first = bool(firsts["_victim"].all())  # every process that failed blames a peer
    firsts = firsts.drop("_victim")
    root = firsts.row(0, named=True)
    earlier = unnamed.filter(pl.col("order") < root["order"])
    if earlier.height and earlier["role"][0] not in (None, "scheduler"):
        # the detokenizer, tokenizer manager or DP controller failed before any scheduler
        return _unnamed_crash(ctx, earlier, waiting=firsts["proc"].to_list())
    cascade = _cascade_after(ctx, root)
    later = firsts.slice(1)
    record = _record(ctx.rows, root)  # one read of the runs for both uses
    detail = _exception_text(record, root)
    proc_text = _short(ctx.people.get(root["proc"], {}))
    summary = f"{proc_text} failed first: {detail}"
    if peer_first:
        summary = (f"every process that failed says a peer failed before it"
                   f"{_blamed_peer(ctx.events, firsts)}, and that peer left no fatal line in "
                   f"these logs; the first to fail, {proc_text}: {detail}")
    if earlier.height:
        where = ctx.cite(earlier.head(1))[0]
        summary += (f" (but {earlier.height} fatal line(s) before it name no process, the "
                    f"first at {where['file']}:{where['line']})")
    if later.height:
        summary += f"; {later.height} other process(es) failed after it"
    warned = _nccl_warnings_before(ctx, root)
    if warned.height:
        others = sorted({_name(ctx.people[int(p)]) for p in warned["proc"].drop_nulls()
                         if int(p) in ctx.people and int(p) != root["proc"]})
        if others:
            summary += f"; NCCL warned before it on {', '.join(others)}"
    summary += _CASCADE_NOTE if cascade.height else ""
    evidence = ctx.cite(pl.concat([firsts.head(1).select("file_id", "line"),
                                   record.tail(1).select("file_id", "line"),
                                   warned.select("file_id", "line"),
                                   later.select("file_id", "line"),
                                   cascade.select("file_id", "line")]), limit=12)
    return [Finding("crash", "error", summary, ctx.who([] if peer_first else [root["proc"]]),
                    first_ts=_iso(root["ts_full"]),
                    last_ts=_iso(_last_ts(pl.concat([firsts.select("ts_full"),
                                                     cascade.select("ts_full")]))),
                    evidence=evidence,
                    waiting=ctx.who((firsts if peer_first else later)["proc"].to_list()))]


def _not_interrupted(events: pl.DataFrame, fatal: pl.DataFrame) -> pl.DataFrame:
    """Fatal rows whose record does not end in `KeyboardInterrupt` (Ctrl-C: a stop, not a
    failure)."""
    stopped = _interrupt_lines(events).select("file_id", "record").unique()
    if stopped.height == 0:
        return fatal
    return fatal.join(stopped, on=["file_id", "record"], how="anti", nulls_equal=True)


def _child_failed(ctx: Context) -> list[Finding]:
    """No fatal line, but the main process received a child's SIGQUIT (a scheduler that hit
    an exception sends it) or a launcher saw the server exit with a code: a crash of a process
    these logs do not show (its own log is elsewhere, or it was killed: -9 is the OOM
    killer's signal). Not after a collective timeout or an SGLang watchdog: that is the
    hang's cascade."""
    said = ctx.events.filter(_contains_any(CHILD_FAILED_STEMS)).sort("order")
    if said.height == 0:
        return []
    before = [_first_order(_interrupt_lines(ctx.events)), _first_order(_hang_lines(ctx.events))]
    if any(first is not None and first < said["order"][0] for first in before):
        return []  # after Ctrl-C, or the hang's cascade
    first = said.row(0, named=True)
    code = regex.search(r"exited with code (-?\d+)", " ".join(said["text"].to_list()))
    summary = ("a process these logs do not show failed: "
               + ("the main process received a child's SIGQUIT" if "sigquit" in
                  str(first["text"]).lower() else str(first["text"]).strip()[:200]))
    if code:
        summary += f"; the server exited with code {code.group(1)}"
        summary += " (-9: killed, e.g. by the kernel's OOM killer)" if code.group(1) == "-9" \
            else ""
    summary += "; the failing process's own output is not in these logs"
    first_ts, last_ts = _span(said.get_column("ts_full"))
    return [Finding("crash", "error", summary, first_ts=first_ts, last_ts=last_ts,
                    evidence=ctx.cite(said, 12))]


def _nccl_init_failures(ctx: Context) -> list[Finding]:
    """No fatal line, but NCCL's return trace shows ncclCommInitRank failing (`init.cc:1534 ->
    2`) on some processes: they failed, for the reason their WARN line before it gives (a
    bootstrap peer they cannot reach, …). Only the processes the trace names are blamed."""
    events = ctx.events
    traces = events.filter(pl.col("text").str.contains(NCCL_INIT_TRACE, literal=True)
                           & pl.col("text").str.contains(_FAILED_RETURN))
    failed = traces.group_by("host", "pid", maintain_order=True).agg(pl.all().first())
    if failed.height == 0:
        return []
    warns = (events.filter(pl.col("text").str.contains("NCCL WARN", literal=True))
             .join(failed.select("host", "pid", _trace=pl.col("order")), on=["host", "pid"])
             .filter(pl.col("order") < pl.col("_trace"))
             .group_by("host", "pid", maintain_order=True).agg(pl.all().first()))
    procs = failed["proc"].drop_nulls().unique(maintain_order=True).to_list()
    unnamed = [f"PID {pid} on {host}" for host, pid in
               failed.filter(pl.col("proc").is_null()).select("host", "pid").iter_rows()]
    names = [_name(ctx.people[p]) for p in procs if p in ctx.people] + unnamed[:4]
    if len(unnamed) > 4:
        names.append(f"{len(unnamed) - 4} more")
    who = ", ".join(names)
    reasons = sorted({str(t).split("NCCL WARN", 1)[1].strip() for t in warns["text"].to_list()})
    summary = (f"NCCL communicator init failed on {who}"
               + (f": {'; '.join(r[:160] for r in reasons[:3])}" if reasons else ""))
    rows = pl.concat([warns.select("file_id", "line", "ts_full", "order"),
                      failed.select("file_id", "line", "ts_full", "order")]).sort("order")
    first_ts, last_ts = _span(rows.get_column("ts_full"))
    return [Finding("crash", "error", summary, ctx.who(procs), first_ts=first_ts,
                    last_ts=last_ts, evidence=ctx.cite(rows, 12))]


_WARN_WINDOW = timedelta(minutes=10)


def _nccl_warnings_before(ctx: Context, root: dict[str, Any]) -> pl.DataFrame:
    """NCCL WARN lines before the root crash (a peer's failed connection often comes first,
    and NCCL lines print no time of their own): the first one of each process, within ten
    minutes of the root when they have a time."""
    warns = ctx.events.filter(pl.col("text").str.contains("NCCL WARN", literal=True)
                              & (pl.col("order") < root["order"]))
    if root["ts_full"] is not None:
        warns = warns.filter(pl.col("ts_full").is_null()
                             | (pl.col("ts_full") >= root["ts_full"] - _WARN_WINDOW))
    return warns.group_by("proc", maintain_order=True).first()


def _unnamed_crash(ctx: Context, unnamed: pl.DataFrame, waiting: list[int] | None = None
                   ) -> list[Finding]:
    """A fatal line that no evidence ties to a scheduler (`terminate called …` in a file many
    processes write to, or a crash of the main process): reported without a culprit, rather
    than not at all or pinned on the process whose line happened to come before it.
    `waiting`: schedulers that failed after it."""
    if unnamed.height == 0:
        return []
    first = unnamed.row(0, named=True)
    # (the main process or a launcher reports a child's death: the dead one is a scheduler)
    reaped = any(stem in str(first["text"]) for stem in REAPED_STEMS)
    who = _unnamed("scheduler" if reaped else first.get("role"))
    detail = _exception_text(_record(ctx.rows, first), first)
    what = ctx.events.filter((pl.col("file_id") == first["file_id"])
                             & (pl.col("line") == first["line"] + 1)
                             & pl.col("text").str.starts_with("  what():"))
    if what.height:
        detail += " " + str(what["text"][0]).strip()
    cascade = _cascade_after(ctx, first)
    summary = f"{who} crashed: {detail[:300]}"
    if waiting:
        summary += f"; {len(waiting)} scheduler(s) failed after it"
    summary += _CASCADE_NOTE if cascade.height else ""
    evidence = ctx.cite(pl.concat([unnamed.head(1).select("file_id", "line"),
                                   what.select("file_id", "line"),
                                   cascade.select("file_id", "line")]), limit=12)
    return [Finding("crash", "error", summary, first_ts=_iso(first["ts_full"]),
                    last_ts=_iso(_last_ts(pl.concat([unnamed.head(1).select("ts_full"),
                                                     cascade.select("ts_full")]))),
                    evidence=evidence, waiting=ctx.who(waiting or []))]


# `Scheduler or DataParallelController 7002 terminated with 0`: a clean exit
_CLEAN_EXIT = r"terminated with 0\s*$"
# the child the main process / DP controller / launcher saw die, by its PID
_DEAD_PID = r"(?:\(pid=|DataParallelController )(\d+)\)? (?:crashed|terminated)"


def _timeout_abort(events: pl.DataFrame, fatal: pl.DataFrame) -> pl.Series:
    """Fatal rows that are torch taking a process down after a collective timeout (`terminate
    called …` followed by a `what():` that holds the watchdog's timeout): a symptom of the
    hang, which the hang finding explains, not a crash of their own."""
    timeouts = events.filter(_contains_any(TIMEOUT_STEMS)).select(
        "file_id", (pl.col("line") - 1).alias("line"), pl.lit(True).alias("_timeout"))
    own = fatal.select(_contains_any(TIMEOUT_STEMS)).to_series()
    after = fatal.select("file_id", "line").join(
        timeouts.unique(), on=["file_id", "line"], how="left", maintain_order="left"
    ).get_column("_timeout").fill_null(False)
    primary = fatal.select(_contains_any(CUDA_FAULT_STEMS)).to_series()
    return (own | after) & ~primary


def _reaped_after_timeout(events: pl.DataFrame, fatal: pl.DataFrame) -> pl.Series:
    """A child's death reported after a collective timeout or a hard SGLang watchdog: the
    process was taken down for the hang (the hang or watchdog finding explains it)."""
    first = _first_order(_hang_lines(events))
    if first is None:
        return pl.repeat(False, fatal.height, eager=True)
    return fatal.select(_contains_any(REAPED_STEMS) & (pl.col("order") > first)).to_series()


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


def _named_by_pid(ctx: Context, fatal: pl.DataFrame) -> pl.DataFrame:
    """Unnamed `Subprocess scheduler_2 (pid=41233) crashed …` / `… DataParallelController 7002
    terminated with -9` lines take the process whose PID that is (when one process has it)."""
    by_pid: dict[int, list[int]] = {}
    for proc, person in ctx.people.items():
        if person.get("pid") is not None:
            by_pid.setdefault(int(person["pid"]), []).append(proc)
    unique = {pid: procs[0] for pid, procs in by_pid.items() if len(procs) == 1}
    if not unique or fatal.height == 0:
        return fatal
    table = pl.DataFrame({"_pid": list(unique), "_proc": list(unique.values())},
                         schema={"_pid": pl.Int64, "_proc": pl.UInt32})
    found = fatal.with_columns(pl.col("text").str.extract(_DEAD_PID, 1).cast(pl.Int64,
                                                                               strict=False)
                               .alias("_pid")).join(table, on="_pid", how="left",
                                                    maintain_order="left")
    return found.with_columns(pl.coalesce("proc", "_proc").alias("proc")).drop("_pid", "_proc")


_VICTIM_WINDOW = timedelta(seconds=60)


def _victims(events: pl.DataFrame, firsts: pl.DataFrame) -> pl.DataFrame:
    """proc -> True when it says a peer failed first (VICTIM_STEMS): in the record of its
    first fatal line (`ValueError: TP rank 1 could finish the model loading, but …`), or on a
    line of its own in the minute before it (torch's Gloo barrier line comes before the
    scheduler's exception)."""
    said = events.filter(_contains_any(VICTIM_STEMS) & pl.col("proc").is_not_null()).select(
        "proc", "file_id", "record", "order", "ts_full")
    fatal = firsts.select("proc", _file=pl.col("file_id"), _record=pl.col("record"),
                          _order=pl.col("order"), _ts=pl.col("ts_full"))
    joined = said.join(fatal, on="proc")
    own_record = (pl.col("file_id") == pl.col("_file")) & (pl.col("record") == pl.col("_record"))
    recent = (pl.col("ts_full").is_not_null() & pl.col("_ts").is_not_null()
              & (pl.col("ts_full") >= pl.col("_ts") - _VICTIM_WINDOW))
    before = (pl.col("order") <= pl.col("_order")) & recent
    return (joined.filter((own_record | before).fill_null(False)).select("proc").unique()
            .with_columns(_victim=pl.lit(True)))


def _first_not_victim(firsts: pl.DataFrame) -> pl.DataFrame:
    """`firsts` (in failure order) with the first process that does not blame a peer, and
    failed within a minute of the first, moved to the front: the victims' own lines often come
    first (a peer's death is seen at once, the dying process's error is still being printed)."""
    if firsts.height == 0 or not firsts["_victim"][0]:
        return firsts
    start = firsts["ts_full"][0]
    if start is None:  # (no time to measure the minute by)
        return firsts
    indexed = firsts.with_row_index("_i")
    soon = pl.col("ts_full").is_not_null() & (pl.col("ts_full") <= start + _VICTIM_WINDOW)
    found = indexed.filter(~pl.col("_victim") & soon)
    if found.height == 0:
        return firsts
    first = int(found["_i"][0])
    return pl.concat([indexed.slice(first, 1), indexed.slice(0, first),
                      indexed.slice(first + 1)]).drop("_i")


_PEER_RANK = regex.compile(r"waiting for send/recv from rank (\d+)")


def _blamed_peer(events: pl.DataFrame, firsts: pl.DataFrame) -> str:
    """Who the victims' lines blame, when they say: torch's Gloo barrier names the group rank
    it waited for; SGLang's load check names none."""
    said = events.filter(pl.col("proc").is_in(firsts["proc"].to_list())
                         & _contains_any(VICTIM_STEMS))["text"].to_list()
    ranks = sorted({int(m.group(1)) for t in said if (m := _PEER_RANK.search(str(t)))})
    if ranks:
        return (f" (torch's monitored barrier names rank(s) {ranks} of its process group; "
                "check that rank's logs)")
    if any("could finish the model loading" in str(t) for t in said):
        return " (SGLang: other TP ranks did not finish loading the model)"
    return ""


_CASCADE_NOTE = "; the SIGQUIT/kill cascade that followed is attached"


def _cascade_after(ctx: Context, row: dict[str, Any]) -> pl.DataFrame:
    """The SIGQUIT / kill lines after `row` (the killing that follows a crash or a hang)."""
    return ctx.events.filter(_contains_any(CASCADE_STEMS) & (pl.col("order") > row["order"]))


def _unnamed(role: str | None) -> str:
    """Who a line names when no evidence ties it to a process: at most its role."""
    if role == "scheduler":
        return "a scheduler that no line identifies"
    return f"the {role} process" if role else "a process that no line identifies"


def _record(rows: pl.LazyFrame, root: dict[str, Any]) -> pl.DataFrame:
    """The rows of the root's record (its traceback), in file order (a root without a
    process: the record's rows without one)."""
    return rows.filter((pl.col("file_id") == root["file_id"]) & (pl.col("record") == root[
        "record"]) & pl.col("proc").eq_missing(root["proc"])).select(
        "file_id", "line", "part", pl.coalesce("msg", "text").alias("text")
    ).collect().sort("line", "part")


# compiled at import: the `regex` package compiles in Python, and a signal that arrives inside
# one of its finalizers mid-analysis could not unwind cleanly
_SGLANG_STAMP = regex.compile(r"\[(?:\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d[^\]]*\] ")
_WATCHDOG_TIMEOUT = regex.compile(r"watchdog_timeout=([\d.]+)")


def _exception_text(record: pl.DataFrame, root: dict[str, Any]) -> str:
    """`ExcType: message` closing the root's traceback (`record`, from `_record`), else the
    root line's own message."""
    closing = record.filter(pl.col("text").str.contains(  # not C++'s `Exception raised from`
        r"^[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)(?::|$)"))
    if closing.height:
        return str(closing["text"][-1]).strip()[:200]
    text = str(root["text"])
    header = _SGLANG_STAMP.search(text)  # (behind wrappers)
    if header:
        return text[header.end():].strip()[:200]
    return text[text.find("] ") + 2:].strip()[:200] if "] " in text else text.strip()[:200]


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
    if not person:
        return "a process"
    bits = [f"replica {person['replica']}"] if person.get("replica") else []
    bits.append(_name(person))
    if person.get("world_rank") is not None:
        bits.append(f"TP{person['tp_rank']}")
        if person.get("dp_rank") is not None:
            bits.append(f"DP{person['dp_rank']}")
    if person.get("node_rank") is not None:
        bits.append(f"node {person['node_rank']} GPU {person['gpu_id']}")
    if person.get("host"):
        bits.append(f"host {person['host']}")
    if person.get("pid"):
        bits.append(f"PID {person['pid']}")
    return "process (" + ", ".join(bits) + ")"


# --------------------------------------------------------------------------- hangs


def _group_name(topology: Topology, desc: str | None, pg_rank: int | None,
                world_rank: int | None) -> str | None:
    """SGLang group of a torch PG line: from its description (`tp:device`). Without one (SGLang
    before 0.5.20 names no group), only when every group in which the process has rank
    `pg_rank` has the same members (e.g. pure TP, where tp, world and the MoE groups coincide);
    else unknown (rank 0 of tp is rank 0 of pp and of the world too)."""
    if desc:
        name = desc.split(":")[0]
        return "world" if name == "default_pg" else name
    if pg_rank is None or world_rank is None:
        return None
    fits = {name: members for name in topology.groups  # (one-member groups never wait)
            if 1 < len(members := topology.group_instance(name, world_rank))
            and pg_rank < len(members) and members[pg_rank] == world_rank}
    if len(set(fits.values())) != 1:
        return None
    return "tp" if "tp" in fits else next(iter(fits))


# torch lines about one failed work item (the last one may be hard-wrapped mid-word)
_WORK_FAILED = ("Exception (either an error or timeout)", "Timeout at NCCL work",
                "watchdog thread terminated with exception", "detected by watchd")


def _borrow_desc(events: pl.DataFrame, timeouts: pl.DataFrame) -> pl.DataFrame:
    """A timeout line without a PG description (torch 2.5's `[Rank 6] Watchdog caught …`)
    takes the one its process printed within the same second for the same group rank (the
    `[PG ID 0 PG GUID 0(default_pg) Rank 6] Exception … detected by watchdog` line that
    handles the same work), when that is a single description."""
    # (only lines about the failed work itself: the heartbeat monitor's dump signal speaks
    # for the default_pg whichever group timed out)
    tagged = events.filter(pl.col("pg_desc").is_not_null() & pl.col("proc").is_not_null()
                           & pl.col("pg_rank").is_not_null() & pl.col("ts_full").is_not_null()
                           & _contains_any(_WORK_FAILED) & ~_contains_any(DUMP_STEMS))
    if tagged.height == 0:
        return timeouts
    seconds = pl.col("ts_full").dt.truncate("1s")
    descs = (tagged.group_by("proc", "pg_rank", seconds.alias("_s"))
             .agg(pl.col("pg_desc").unique()).filter(pl.col("pg_desc").list.len() == 1)
             .select("proc", "pg_rank", "_s", _desc=pl.col("pg_desc").list.first()))
    return (timeouts.with_columns(_s=seconds)
            .join(descs, on=["proc", "pg_rank", "_s"], how="left", maintain_order="left")
            .with_columns(pg_desc=pl.coalesce("pg_desc", "_desc")).drop("_s", "_desc"))


def hang_findings(ctx: Context, crashed: set[int]) -> list[Finding]:
    """One finding per group instance whose members' watchdogs fired."""
    if ctx.topology is None:
        rows = ctx.events.filter(_contains_any(TIMEOUT_STEMS)).to_dicts()
        return [_unplaced_timeouts(ctx, rows, _NO_TOPOLOGY)] if rows else []
    timeouts = _borrow_desc(ctx.events, ctx.events.filter(_contains_any(TIMEOUT_STEMS)
                                                           & pl.col("proc").is_not_null()))
    instances: dict[tuple[int, str, tuple[int, ...]], list[dict[str, Any]]] = {}
    unknown: list[dict[str, Any]] = []
    for row in timeouts.iter_rows(named=True):
        person = ctx.people.get(row["proc"])
        group = _group_name(ctx.topology, row["pg_desc"], row["pg_rank"],
                            (person or {}).get("world_rank"))
        if person is None or group is None or group not in ctx.topology.groups:
            unknown.append(row)
            continue
        members = ctx.topology.group_instance(group, person["world_rank"])
        instances.setdefault((person["replica"], group, members), []).append(row)
    findings = [_hang(ctx, ctx.topology, replica, group, members, rows, crashed)
                for (replica, group, members), rows in sorted(instances.items())]
    if unknown and not findings:
        findings.append(_unplaced_timeouts(ctx, unknown))
    return findings + _replica_blind_hangs(ctx, ctx.topology)


_UNNAMED_GROUP = ("the lines do not name the group (SGLang before 0.5.20 gives torch no group "
                  "description)")
_NO_TOPOLOGY = ("without the launch config (--config ARGS, or a server_args line in the logs) "
                "the group's members are unknown")


def _unplaced_timeouts(ctx: Context, rows: list[dict[str, Any]], why: str = _UNNAMED_GROUP
                       ) -> Finding:
    """Collective timeouts whose group cannot be placed (a PG line without a description
    whose rank fits several groups, or no topology at all): reported, with who timed out,
    but with no culprit."""
    procs = sorted({r["proc"] for r in rows if r["proc"] is not None})
    seqs = sorted({r["seq"] for r in rows if r["seq"] is not None})
    times = [r["ts_full"] for r in rows if r["ts_full"]]
    ranks = sorted({r["torch_rank"] for r in rows if r["torch_rank"] is not None})
    groups = sorted({str(r["pg_desc"]).split(":")[0] for r in rows if r["pg_desc"]})
    who = (f"{len(procs)} process(es)" if procs and len(procs) >= len(ranks)
           else f"torch rank(s) {ranks}" if ranks else "a process")
    said = [f"SeqNum {', '.join(map(str, seqs[:4]))}"] if seqs else []
    said += [f"group {', '.join(groups)}"] if groups else []
    summary = (f"{who} timed out in a collective" + (f" ({'; '.join(said)})" if said else "")
               + f"; {why}, so the member that never reached it cannot be told")
    evidence = ctx.cite(_places(rows), 12)
    return Finding("collective-hang", "error", summary, seq=seqs[-1] if seqs else None,
                   first_ts=_iso(min(times, default=None)),
                   last_ts=_iso(max(times, default=None)), evidence=evidence,
                   waiting=ctx.who(procs))


def _replica_blind_hangs(ctx: Context, topology: Topology) -> list[Finding]:
    """Native-DP replicas repeat torch's `[rankN]`: timeout lines in a file shared by replicas
    name a world rank but no replica. The silent world ranks are the suspects; a suspect whose
    own SGLang watchdog fired or who dumped its stack (lines that carry its DP prefix) is the
    culprit, and its replica is the hung one."""
    if topology.sizes.replicas == 1:
        return []
    blind = ctx.events.filter(_contains_any(TIMEOUT_STEMS) & pl.col("proc").is_null()
                            & pl.col("torch_rank").is_between(0, topology.sizes.world - 1))
    instances: dict[tuple[str, tuple[int, ...]], list[dict[str, Any]]] = {}
    for row in blind.iter_rows(named=True):
        world = row["torch_rank"]
        group = _group_name(topology, row["pg_desc"], row["pg_rank"], world)
        if group in topology.groups:
            instances.setdefault((group, topology.group_instance(group, world)), []).append(row)
    stuck = ctx.events.filter(pl.col("proc").is_not_null()
                            & _contains_any(SGLANG_WATCHDOG_STEMS + ("Pyspy dump",)))
    findings = []
    for (group, members), rows in sorted(instances.items()):
        silent = set(members) - {r["torch_rank"] for r in rows}
        seq = max((r["seq"] for r in rows if r["seq"] is not None), default=None)
        suspects = stuck.filter(pl.col("proc").is_in(
            [r * topology.sizes.world + w for r in range(topology.sizes.replicas) for w in silent]))
        procs = sorted(set(suspects["proc"].to_list()))
        op = next((r["op"] for r in rows if r["op"]), None)
        where = (f"world rank(s) {sorted(silent)} never reached it" if silent else
                 "every member timed out")
        summary = (f"{group} group {list(members)} hangs in {op or 'a collective'} SeqNum {seq}: "
                   f"{where}; torch's lines do not say which native-DP replica they come from")
        summary += (", and the culprit's own watchdog / stack dump (with its DP prefix) names "
                    "its replica" if procs else ", and no culprit line names a replica")
        cited = pl.concat([suspects.select("file_id", "line"), _places(rows)])
        first = min((r["ts_full"] for r in rows if r["ts_full"]), default=None)
        findings.append(Finding("collective-hang", "error", summary, ctx.who(procs), group=group,
                                group_members=list(members), seq=seq, op=op,
                                first_ts=_iso(first), evidence=ctx.cite(cited, 12)))
    return findings


def _hang(ctx: Context, topology: Topology, replica: int, group: str, members: tuple[int, ...],
          rows: list[dict[str, Any]], crashed: set[int]) -> Finding:
    procs = {replica * topology.sizes.world + w: w for w in members}
    waited = max((r["seq"] for r in rows if r["seq"] is not None), default=None)
    ops = [r["op"] for r in rows if r["op"]]
    progress = _progress(ctx, procs, rows)
    reported = {p["proc"] for p in progress if p["timed_out"]}
    behind = {p["proc"] for p in progress if p["timed_out"] and waited is not None and (
        (p["last_enqueued"] is not None and p["last_enqueued"] < waited)
        or (p["seq"] is not None and p["seq"] < waited))}
    unseen = {p for p in procs if p not in ctx.people}  # no line at all: its log is missing
    dumps = ctx.events.filter(_contains_any(DUMP_STEMS) & pl.col("proc").is_in(list(procs)))
    dumped = set(dumps.get_column("proc").to_list()) - reported
    # a dump line that gives the member's counters (`Last enqueued NCCL work: 40`) shows it
    # behind when it never enqueued the SeqNum the others wait on (-1: no work in that PG)
    lagging = {int(r["proc"]) for r in dumps.filter(pl.col("last_enqueued") >= 0)
               .iter_rows(named=True)
               if waited is not None and r["last_enqueued"] < waited and r["proc"] in dumped
               and _group_name(topology, r["pg_desc"], r["pg_rank"], procs[r["proc"]]) == group}
    behind |= lagging
    dumped -= lagging
    silent = set(procs) - reported - unseen - dumped
    culprits = behind | silent
    waiting = reported - behind
    first = min((r["ts_full"] for r in rows if r["ts_full"]), default=None)
    last = max((r["ts_full"] for r in rows if r["ts_full"]), default=None)
    op = ops[0] if ops else None
    if culprits:
        names = ", ".join(f"world rank {procs[p]}" for p in sorted(culprits))
        how = ("never reached" if silent and not behind else "is behind on")
        summary = (f"{group} group {list(members)} (replica {replica}) hangs in "
                   f"{op or 'a collective'} SeqNum {waited}: {names} {how} it while "
                   f"{len(waiting)} member(s) timed out waiting")
        if {procs[p] for p in culprits} & crashed:
            summary += " (the culprit crashed: see the crash finding)"
        if unseen:
            summary += (f"; world rank(s) {sorted(procs[p] for p in unseen)} left no log, so "
                        "their part is unknown")
    else:
        summary = (f"{group} group {list(members)} (replica {replica}): every member in the logs "
                   f"timed out waiting on SeqNum {waited}; the missing participant is outside "
                   "these logs")
    if dumped:
        summary += (f"; world rank(s) {sorted(procs[p] for p in dumped)} only reported a "
                    "timeout without its SeqNum (a debug dump, or torch taking the process down), "
                    "so their progress is unknown")
    evidence_rows = _places(rows)
    culprit_lines = ctx.events.filter(pl.col("proc").is_in(sorted(culprits))
                                    & _contains_any(SGLANG_WATCHDOG_STEMS + ("Pyspy dump",)))
    evidence = ctx.cite(pl.concat([culprit_lines.select("file_id", "line"), evidence_rows]), 12)
    return Finding("collective-hang", "error", summary, ctx.who(culprits), group=group,
                   group_members=list(members), seq=waited, op=op, first_ts=_iso(first),
                   last_ts=_iso(last), evidence=evidence, waiting=ctx.who(waiting),
                   progress=progress)


def _progress(ctx: Context, procs: dict[int, int], rows: list[dict[str, Any]]
              ) -> list[dict[str, Any]]:
    """Per member: timed out?, its SeqNum, last enqueued/completed, last line time."""
    last_line = ctx.last.filter(pl.col("proc").is_in(list(procs)))
    last_seen = {int(p): t for p, t in last_line.select("proc", "ts_full").iter_rows()}
    table = []
    for proc, world in sorted(procs.items(), key=lambda kv: kv[1]):
        mine = [r for r in rows if r["proc"] == proc]
        table.append({
            "proc": proc, "world_rank": world, "timed_out": bool(mine),
            "seq": max((r["seq"] for r in mine if r["seq"] is not None), default=None),
            "last_enqueued": max((r["last_enqueued"] for r in mine
                                  if r["last_enqueued"] is not None), default=None),
            "last_completed": max((r["last_completed"] for r in mine
                                   if r["last_completed"] is not None), default=None),
            "last_line_ts": _iso(last_seen.get(proc)),
        })
    return table


# --------------------------------------------------------------------------- startup


def init_findings(ctx: Context) -> list[Finding]:
    """Processes stuck in a startup phase while others got further."""
    findings = _nccl_init_findings(ctx) + _store_unreachable(ctx)
    rows = ctx.events.filter(pl.col("proc").is_not_null())
    if rows.height == 0:
        return findings
    reached: dict[int, int] = {}
    open_phase: dict[int, tuple[int, dict[str, Any]]] = {}
    for index, (_, begins, ends) in enumerate(PHASES):
        began = rows.filter(_contains_any(begins)).group_by("proc", maintain_order=True).agg(
            pl.all().first())
        ended = set(rows.filter(_contains_any(ends))["proc"].to_list())
        for row in began.iter_rows(named=True):
            reached[row["proc"]] = max(reached.get(row["proc"], -1), index)
            if row["proc"] not in ended:
                open_phase[row["proc"]] = (index, row)
        for proc in ended:
            reached[proc] = max(reached.get(proc, -1), index)
    best = max(reached.values(), default=-1)
    stuck: dict[int, list[tuple[int, dict[str, Any]]]] = {}
    for proc, (index, row) in open_phase.items():
        behind = index < best or (index == best and len(open_phase) < len(reached))
        if behind and reached[proc] == index:
            stuck.setdefault(index, []).append((proc, row))
    at_best = [(p, row) for p, (index, row) in open_phase.items() if index == best]
    last_seen = {int(p): t for p, t in ctx.last.select("proc", "ts_full").iter_rows()}
    # nobody got further, nobody ended it, nobody printed a batch or any timed line long after
    # (a run whose logs lack the end message has gone on), no other startup finding
    ended_there = all(r["ts_full"] is not None and last_seen.get(p) is not None
                      and (last_seen[p] - r["ts_full"]).total_seconds() <= STALL_SECONDS
                      for p, r in at_best)
    if (len(at_best) >= 2 and len(at_best) == len(reached) and ended_there and not findings
            and ctx.progress.height == 0):
        procs = sorted(p for p, _ in at_best)
        findings.append(Finding(
            "init-hang", "warning",
            f"all {len(procs)} processes that logged began {PHASES[best][0]} and none finished "
            "it: the whole deployment stalls there (a peer outside these logs, the network, "
            "storage), or the logs end there", waiting=ctx.who(procs),
            first_ts=_iso(min((r["ts_full"] for _, r in at_best if r["ts_full"]), default=None)),
            evidence=ctx.cite(_places(r for _, r in at_best))))
    for index, items in sorted(stuck.items()):
        name = PHASES[index][0]
        procs = [p for p, _ in items]
        rows_cited = _places(r for _, r in items)
        findings.append(Finding(
            "init-hang", "error",
            f"{len(procs)} process(es) began {name} and never finished it while others got "
            f"further: {', '.join(_name(ctx.people[p]) for p in sorted(procs))}",
            ctx.who(procs), first_ts=_iso(min((r["ts_full"] for _, r in items if r["ts_full"]),
                                              default=None)),
            evidence=ctx.cite(rows_cited)))
    return findings


def _nccl_init_findings(ctx: Context) -> list[Finding]:
    """A communicator (commId) whose `Init START` some members logged without COMPLETE.
    NCCL's bootstrap needs every rank: when none completed and some comm ranks never logged
    START, those ranks are the ones the others wait for (named when the members that did log
    fit one group instance of the topology); the ones that started are waiting."""
    nccl = _split_ids(ctx.events.filter(pl.col("comm_id").is_not_null()
                                        & pl.col("nccl_phase").is_not_null()))
    findings = []
    for (comm_id,), group in nccl.group_by("comm_id", maintain_order=True):
        started = group.filter(pl.col("nccl_phase") == "Init START")
        done = set(group.filter(pl.col("nccl_phase") == "Init COMPLETE")["pid"].to_list())
        hung = started.filter(~pl.col("pid").is_in(list(done)))
        if hung.height == 0:
            continue
        counts = group["comm_nranks"].drop_nulls()
        nranks = int(counts[0]) if counts.len() else None
        name = (f"split (color {comm_id[6:].replace('/', ', split count ')})"
                 if comm_id.startswith("split ") else comm_id)
        summary = (f"NCCL communicator {name} (nranks {nranks if nranks else '?'}): "
                   f"{hung.height} rank(s) logged Init START and never Init COMPLETE")
        if done:
            findings.append(Finding("init-hang", "error", summary + f" while {len(done)} "
                                    "completed", ctx.who(hung["proc"].drop_nulls().to_list()),
                                    evidence=ctx.cite(hung)))
            continue
        ranks = set(started["comm_rank"].drop_nulls().to_list())
        absent = sorted(set(range(nranks)) - ranks) if nranks else []
        culprits = _absent_members(ctx, started, nranks, absent) if absent else []
        if absent:
            summary += (f"; comm rank(s) {absent} never logged Init START, and NCCL's bootstrap "
                        "waits for every rank")
            if culprits:
                summary += f" ({', '.join(_name(_person(ctx, p)) for p in culprits)})"
        else:
            summary += "; every rank started, so the bootstrap itself (network, ports) stalls"
        findings.append(Finding("init-hang", "error", summary,
                                [_person(ctx, p) for p in culprits],
                                evidence=ctx.cite(hung),
                                waiting=ctx.who(hung["proc"].drop_nulls().to_list())))
    return sorted(findings, key=lambda f: f.summary)


_STORE_ADDRESS = regex.compile(r"trying to connect to \(([^,()\s]+), (\d+)\)"
                               r"|to host \[?([^\s\]]+?)\]?:(\d+)\b")


def _store_unreachable(ctx: Context) -> list[Finding]:
    """Processes whose connection to torch's rendezvous store (TCPStore, served on SGLang's
    --dist-init-addr by the node of world rank 0) timed out: nobody in particular is to
    blame in these lines - that node is not up yet, died, or the address is not reachable."""
    rows = ctx.events.filter(_contains_any(STORE_STEMS)).sort("order")
    if rows.height == 0:
        return []
    addresses = sorted({":".join(g for g in m.groups() if g) for t in rows["text"].to_list()
                        if (m := _STORE_ADDRESS.search(str(t)))})
    procs = rows["proc"].drop_nulls().unique(maintain_order=True).to_list()
    who = f"{len(procs)} process(es)" if procs else f"{rows.height} line(s)"
    summary = (f"{who} could not reach torch's rendezvous store"
               + (f" at {', '.join(addresses)}" if addresses else "")
               + " (SGLang's --dist-init-addr, served by the node of world rank 0): that node "
               "is not up, has died, or the address is not reachable from here")
    first_ts, last_ts = _span(rows.get_column("ts_full"))
    return [Finding("init-hang", "error", summary, first_ts=first_ts, last_ts=last_ts,
                    evidence=ctx.cite(rows, 12), waiting=ctx.who(procs))]


def _split_ids(nccl: pl.DataFrame) -> pl.DataFrame:
    """A split's `Init START` (NCCL 2.23+, no commId: `split <color>/<count>`) takes the commId
    its process's COMPLETE line gives the same comm pointer; a START left without one hangs."""
    split = pl.col("comm_id").str.starts_with("split ")
    real = (nccl.filter(~split & pl.col("comm").is_not_null())
            .select("host", "pid", "comm", _id=pl.col("comm_id"))
            .unique(["host", "pid", "comm"], keep="last", maintain_order=True))
    joined = nccl.join(real, on=["host", "pid", "comm"], how="left", nulls_equal=True,
                       maintain_order="left")
    # a member that never completed takes the commId its split's other members completed
    learned = (joined.filter(split & pl.col("_id").is_not_null())
               .group_by("comm_id").agg(pl.col("_id").unique())
               .filter(pl.col("_id").list.len() == 1)
               .select("comm_id", _shared=pl.col("_id").list.first()))
    return (joined.join(learned, on="comm_id", how="left", maintain_order="left")
            .with_columns(comm_id=pl.when(split).then(pl.coalesce("_id", "_shared", "comm_id"))
                          .otherwise("comm_id"))
            .drop("_id", "_shared"))


def _person(ctx: Context, proc: int) -> dict[str, Any]:
    """Who `proc` is: from its lines, else (a process that left none) from the topology."""
    if proc in ctx.people or ctx.topology is None:
        return ctx.people.get(proc, {})
    process = ctx.topology.processes[proc]
    return {name: getattr(process, name) for name in COORDINATES} | {"host": None, "pid": None}


def _absent_members(ctx: Context, started: pl.DataFrame, nranks: int | None,
                    absent: list[int]) -> list[int]:
    """The processes at comm ranks `absent`, when the members that logged (proc, comm_rank)
    sit at those ranks of exactly one group instance of `nranks` members."""
    topology = ctx.topology
    rows = [(int(p), int(r)) for p, r in started.select("proc", "comm_rank").drop_nulls()
            .unique().iter_rows()]
    if topology is None or not rows or nranks is None:
        return []
    world = topology.sizes.world
    replicas = {p // world for p, _ in rows}
    fits: set[tuple[int, ...]] = set()
    for name in topology.groups:
        lists = {topology.group_instance(name, p % world) for p, _ in rows}
        one = next(iter(lists))
        if len(lists) == 1 and len(one) == nranks and all(one[r] == p % world for p, r in rows):
            fits.add(one)
    if len(fits) != 1 or len(replicas) != 1:
        return []
    found, replica = fits.pop(), replicas.pop()
    return [replica * world + found[r] for r in absent]


# --------------------------------------------------------------------------- absence


def missing_findings(ctx: Context) -> list[Finding]:
    if ctx.topology is None:
        return []
    seen = set(ctx.people)
    missing = [i for i in range(len(ctx.topology.processes)) if i not in seen]
    if not missing or not seen:
        return []
    nodes_seen = {ctx.topology.processes[p].node_rank for p in seen}
    by_node: dict[int, list[int]] = {}
    for index in missing:
        by_node.setdefault(ctx.topology.processes[index].node_rank, []).append(index)
    findings = []
    for node, procs in sorted(by_node.items()):
        whole = node not in nodes_seen
        people = [_person(ctx, p) for p in procs]
        summary = (f"node {node}: none of its {len(procs)} scheduler(s) left a line; its log "
                   "is missing entirely" if whole else
                   f"{len(procs)} scheduler(s) on node {node} left no line: "
                   f"{_ranks_text(ctx.topology, procs)}")
        findings.append(Finding("missing-process", "warning", summary, people))
    return findings


def _ranks_text(topology: Topology, procs: list[int]) -> str:
    """`world ranks [0, 1]`, or with native-DP replicas (where world ranks repeat) `replica 0
    world ranks [0, 1]; replica 1 world ranks [0]`."""
    processes = [topology.processes[p] for p in procs]
    if topology.sizes.replicas == 1:
        return f"world ranks {[p.world_rank for p in processes]}"
    by_replica: dict[int, list[int]] = {}
    for process in processes:
        by_replica.setdefault(process.replica, []).append(process.world_rank)
    return "; ".join(f"replica {r} world ranks {ranks}" for r, ranks in sorted(by_replica.items()))


def watchdog_findings(ctx: Context, earlier: list[Finding]) -> list[Finding]:
    """SGLang's own watchdog (`Scheduler watchdog timeout (self.watchdog_timeout=…)`, the same
    for the detokenizer, tokenizer manager and DP controller; older `Watchdog timeout (…)`): the
    process's loop made no progress for `--watchdog-timeout`, after which SGLang kills the
    server. One finding naming every process whose watchdog fired, unless a crash or a
    collective hang already names them."""
    fired = ctx.events.filter(_contains_any(SGLANG_WATCHDOG_STEMS)).sort("order")
    if fired.height == 0:
        return []
    named = fired.filter(pl.col("proc").is_not_null())
    firsts = named.group_by("proc").agg(pl.all().sort_by("order").first()).sort("order")
    people = [ctx.people[int(p)] for p in firsts.get_column("proc") if int(p) in ctx.people]
    explained = {(p.get("replica"), p.get("world_rank")) for f in earlier for p in f.processes}
    if people and {(p.get("replica"), p.get("world_rank")) for p in people} <= explained:
        return []
    first = fired.row(0, named=True)
    cascade = _cascade_after(ctx, first)
    who = (", ".join(_short(person) for person in people[:4])
           + (f" and {len(people) - 4} more" if len(people) > 4 else "")) if people else (
        _unnamed(first.get("role")))
    # (the timeout lines say the limit and whether it is soft; a `debug info:` dump does not)
    stated = fired.filter(pl.col("text").str.to_lowercase().str.contains(
        "watchdog timeout (", literal=True))
    timeout = _WATCHDOG_TIMEOUT.search(" ".join(stated["text"].head(1).to_list()))
    # a soft watchdog (`self.soft=True`) only dumps state; the process may go on
    soft = stated.height > 0 and bool(stated.select(
        pl.col("text").str.contains("self.soft=True", literal=True).all()).item())
    limit = f"watchdog_timeout={timeout.group(1)} s" if timeout else "the watchdog timeout"
    summary = (f"SGLang's {'soft ' if soft else ''}watchdog fired on {who}: its loop made no "
               f"progress for longer than {limit}"
               + (" (a slow step: a soft watchdog only dumps state, and the process may have "
                  "gone on)" if soft else " (the process hung)"))
    summary += _CASCADE_NOTE if cascade.height else ""
    evidence = ctx.cite(pl.concat([fired.select("file_id", "line"),
                                   cascade.select("file_id", "line")]), limit=12)
    first_ts, last_ts = _span(fired.get_column("ts_full"))
    return [Finding("watchdog-timeout", "warning" if soft else "error", summary, people,
                    first_ts=first_ts, last_ts=last_ts, evidence=evidence)]


_HEARTBEAT = regex.compile(r"for last (\d+) seconds\. tic start time: (\S+)\. "
                           r"last_heartbeat time: (\S+)")


def unresponsive_findings(ctx: Context, earlier: list[Finding]) -> list[Finding]:
    """The HTTP server's health check got no answer (`Health check failed. Server couldn't get
    a response from detokenizer …`): requests stopped flowing through the schedulers. Nothing
    in these lines names who stopped; the schedulers' last lines bound when. Not reported
    when an error finding (a crash, a hang, a watchdog) already explains it."""
    if any(f.severity == "error" for f in earlier):
        return []
    failed = ctx.events.filter(_contains_any(HEALTH_STEMS)).sort("order")
    if failed.height == 0:
        return []
    first = failed.row(0, named=True)
    found = _HEARTBEAT.search(str(first["text"]))
    summary = (f"the server stopped answering its health check {failed.height} time(s)"
               + (f": no response for {found.group(1)} s at {found.group(2)}, the last response "
                  f"(heartbeat) at {found.group(3)}" if found else ""))
    earliest, latest = _span(ctx.last.get_column("ts_full")) if ctx.last.height else (None, None)
    if earliest is not None:
        summary += f"; the schedulers' last lines are between {earliest} and {latest}"
    first_ts, last_ts = _span(failed.get_column("ts_full"))
    return [Finding("unresponsive", "error", summary, first_ts=first_ts, last_ts=last_ts,
                    evidence=ctx.cite(failed))]


_PEER = regex.compile(r"connection with (prefill|decode) instance \(bootstrap_addr: ([^)]*)\)"
                      r"(?:, (\d+) requests? affected)?")


def transfer_findings(ctx: Context) -> list[Finding]:
    """PD disaggregation: the peer instance was lost, or KV transfers failed. The processes
    that report it are on the side that survived: listed as waiting, not as culprits."""
    lost = ctx.events.filter(_contains_any(PEER_STEMS)).sort("order")
    failed = ctx.events.filter(_contains_any(TRANSFER_STEMS)).sort("order")
    unreachable = ctx.events.filter(_contains_any(BOOTSTRAP_STEMS)).sort("order")
    if lost.height == 0 and failed.height == 0 and unreachable.height == 0:
        return []
    peers: dict[tuple[str, str], int] = {}
    for text in lost.get_column("text").to_list():
        found = _PEER.search(str(text))
        if found:
            key = (found.group(1), found.group(2))
            peers[key] = peers.get(key, 0) + int(found.group(3) or 0)
    parts = [f"lost the {side} instance at {addr}" + (f" ({n} requests affected)" if n else "")
             for (side, addr), n in peers.items()]
    if failed.height:
        parts.append(f"{failed.height} KV transfer(s) failed")
    if unreachable.height:
        servers = sorted({_bootstrap_server(str(t)) for t in unreachable["text"].to_list()}
                         - {""})
        parts.append("could not reach the prefill instance's bootstrap server"
                     + (f" ({', '.join(servers)})" if servers else ""))
    rdma = ctx.events.filter(_contains_any(RDMA_STEMS))
    if rdma.height:
        parts.append(f"Mooncake reported {rdma.height} RDMA error line(s) (failed slices, NICs "
                     "marked inactive)")
    both = pl.concat([lost, failed, unreachable, rdma]).sort("order")
    first_ts, last_ts = _span(both.get_column("ts_full"))
    return [Finding("disagg-transfer", "warning",
                    "PD disaggregation: " + "; ".join(parts or ["the peer instance was lost"]),
                    first_ts=first_ts, last_ts=last_ts, evidence=ctx.cite(both),
                    waiting=ctx.who(both.get_column("proc").drop_nulls().to_list()))]


_SERVER = regex.compile(r"host='([^']+)', port=(\d+)|bootstrap_addr: (\S+?),?\s|from (\S+) after ")


def _bootstrap_server(text: str) -> str:
    """`host:port` of the bootstrap server a line failed to reach, when it says."""
    found = _SERVER.search(text + " ")
    if not found:
        return ""
    host, port, addr, other = found.groups()
    return f"{host}:{port}" if host else (addr or other or "")


def stalled_findings(ctx: Context, earlier: list[Finding]) -> list[Finding]:
    """Processes that printed batch statistics and went quiet long before their TP peers'
    latest batch line, with no other finding."""
    if ctx.topology is None:
        return []
    explained = {(p["replica"], p["world_rank"]) for f in earlier for p in f.processes + f.waiting}
    blind = ctx.events.filter(pl.col("proc").is_null() & pl.col("torch_rank").is_not_null())
    explained |= {(r, w) for w in blind["torch_rank"].unique().to_list()
                  for r in range(ctx.topology.sizes.replicas)}
    last_of = {int(p): (t, f, n) for p, t, f, n in
               ctx.last.select("proc", "ts_full", "file_id", "line").iter_rows()}
    progress = ({int(p): t for p, t in ctx.progress.select("proc", "ts_full").iter_rows()}
                if ctx.progress.height else {})
    findings = []
    for proc, (ts, file_id, line) in sorted(last_of.items()):
        person = ctx.people[proc]
        if proc not in progress or (person["replica"], person["world_rank"]) in explained:
            continue  # (a rank that prints no batch lines is quiet by design)
        world = ctx.topology.sizes.world
        peers = [progress[person["replica"] * world + w]
                 for w in ctx.topology.group_instance("tp", person["world_rank"])
                 if person["replica"] * world + w in progress]
        newest = max(peers)
        if (newest - ts).total_seconds() > STALL_SECONDS:
            findings.append(Finding(
                "stalled", "warning",
                f"{_short(person)} went quiet at {ts.isoformat()}, "
                f"{(newest - ts).total_seconds():.0f} s before its TP peers, with no timeout "
                "message", [person], first_ts=ts.isoformat(), last_ts=newest.isoformat(),
                evidence=[{"file": ctx.files.get(file_id, "?"), "line": int(line)}]))
    return findings


def clock_findings(ctx: Context) -> list[Finding]:
    """Hosts whose watchdogs fire on the same SeqNum at different times: their clocks differ."""
    timeouts = ctx.events.filter(_contains_any(TIMEOUT_STEMS[:1]) & pl.col("seq").is_not_null()
                               & pl.col("eff_host").is_not_null()
                               & pl.col("ts_full").is_not_null())
    per_host: dict[str, list[float]] = {}
    for (_, _), group in timeouts.group_by("pg_desc", "seq", maintain_order=True):
        hosts = group.group_by("eff_host").agg(pl.col("ts_full").median())
        if hosts.height < 2:
            continue
        base = hosts["ts_full"].min()
        for host, ts in hosts.iter_rows():
            per_host.setdefault(host, []).append((ts - base).total_seconds())
    offsets = {h: statistics.median(v) for h, v in per_host.items()}
    skewed = {h: o for h, o in offsets.items() if abs(o) > SKEW_SECONDS}
    if not skewed:
        return []
    flags = " ".join(f"--clock-offset {h}={-o:g}" for h, o in sorted(skewed.items()))
    return [Finding("clock-skew", "info",
                    "the same collective timed out at different times on different hosts: "
                    + ", ".join(f"{h} {o:+.1f} s" for h, o in sorted(offsets.items()))
                    + f"; to align, pass {flags}")]
