"""`crash`: the first fatal line of each process; the earliest is the root.

Reads: exception headers, fatal errors (CUDA/HIP/NPU faults, OOM, NCCL errors, torch's heartbeat
abort), a child reaped by its parent, a process's death of an uncaught exception (`death`), the
peer-blaming lines of victims, NCCL WARN lines before the root, torch elastic's failure summary,
and the SIGQUIT / kill cascade (and launchers' exit lines) after it.
Cannot decide: which process a fatal line in a shared file belongs to when no line ties it to
one (reported without a culprit); who failed when every failing process blames a peer that left
no fatal line (reported without a culprit, naming the peer torch's barrier blames); which of
several processes that died of the same exception within a second went first (one finding
naming them all)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import polars as pl
import regex

from logcorr.diagnose.clock import order_window
from logcorr.diagnose.context import (
    _FAILED_RETURN,
    CHILD_DIED,
    CHILD_FAILED_STEMS,
    CRASH_STEMS,
    GLOG_FATAL,
    NCCL_INIT_TRACE,
    NCCL_PEER_LOST,
    REAPED_STEMS,
    VICTIM_STEMS,
    WRAP_MIN,
    Context,
    Finding,
    _cascade_after,
    _contains_any,
    _first_order,
    _hang_lines,
    _interrupt_lines,
    _iso,
    _last_ts,
    _short,
    _span,
    _unnamed,
    lines_in,
    shifted,
)
from logcorr.diagnose.death import deaths, elastic_failures, same_exception
from logcorr.diagnose.identity import name_rows
from logcorr.diagnose.ranges import ranges, world_ranks
from logcorr.diagnose.teardown import mark_teardown
from logcorr.model import COORDINATES


def fatal_rows(ctx: Context) -> pl.DataFrame:
    """Every fatal event row (exception headers, faults, aborts, a reaped child, glog `F`),
    with `_teardown` / `_undecided`: whether it is the teardown of a hang
    (`teardown.mark_teardown`)."""
    rows = ctx.events
    fatal = rows.filter((_contains_any(CRASH_STEMS) | pl.col("text").str.contains(CHILD_DIED)
                         | pl.col("text").str.contains(GLOG_FATAL))
                        & ~pl.col("text").str.contains("NCCL WARN", literal=True)
                        & ~pl.col("text").str.contains(_CLEAN_EXIT))
    return mark_teardown(ctx, fatal, order_window(ctx))


def teardown_rows(ctx: Context, fatal: pl.DataFrame | None = None) -> pl.DataFrame:
    """The fatal rows that are a hang's teardown (aborts, exit codes after its timeout),
    named by PID or rank tag where the line allows, with `_undecided` (`fatal`: the
    `fatal_rows` already read, else read here)."""
    fatal = fatal_rows(ctx) if fatal is None else fatal
    return name_rows(ctx, fatal.filter("_teardown").drop("_teardown"))


def crash_findings(ctx: Context, fatal: pl.DataFrame | None = None) -> list[Finding]:
    """The first fatal event of each process; the earliest overall is the root, later crashes
    and the SIGQUIT cascade hang off it. A hang's teardown is not a crash (`fatal`: the
    `fatal_rows` already read, else read here)."""
    rows = ctx.events
    fatal = (fatal_rows(ctx) if fatal is None else fatal).filter(
        ~pl.col("_teardown")).drop("_teardown", "_undecided")
    died = deaths(ctx)
    if died.height:  # (an uncaught exception a process died of)
        fatal = pl.concat([fatal, died.select(fatal.columns)]).unique(
            ["file_id", "line", "part"], keep="first").sort("order")
    fatal = name_rows(ctx, _not_interrupted(rows, fatal), read_records=True)
    crash = fatal.filter(pl.col("proc").is_not_null())
    unnamed = fatal.filter(pl.col("proc").is_null()).sort("order")
    if crash.height == 0:
        return (_elastic_crash(ctx) or _unnamed_crash(ctx, unnamed, died=died)
                or _nccl_init_failures(ctx) or _child_failed(ctx))
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
        return _unnamed_crash(ctx, earlier, waiting=firsts["proc"].to_list(), died=died)
    return [_crash(ctx, firsts, earlier, peer_first, died)]


def _crash(ctx: Context, firsts: pl.DataFrame, earlier: pl.DataFrame, peer_first: bool,
           died: pl.DataFrame) -> Finding:
    """The crash finding: `firsts` (each failed process's first fatal row, the root first),
    the fatal rows before the root that name no process, whether every one blames a peer,
    the processes' deaths of an uncaught exception (`death.deaths`)."""
    root = firsts.row(0, named=True)
    cascade = _cascade_after(ctx, root)
    record = _record(ctx, root)  # one read of the rows for both uses
    detail = _exception_text(record, root)
    death = died.filter((pl.col("file_id") == root["file_id"]) & (pl.col("line") == root["line"]))
    fan = same_exception(died, death.row(0, named=True)) if death.height else []
    culprits = fan if len(fan) > 1 else [root["proc"]]
    later = firsts.filter(~pl.col("proc").is_in(culprits))
    proc_text = _short(ctx.people.get(root["proc"], {}))
    summary = f"{proc_text} failed first: {detail}"
    if len(fan) > 1:
        summary = (f"no single root can be told: {len(fan)} processes died of the same "
                   f"exception within a second ({world_ranks(ctx.who(fan))}): {detail}")
    elif death.height:
        summary = f"{proc_text} died of an uncaught exception first: {detail}"
    if peer_first:
        summary = (f"no culprit: every process that failed says a peer failed before it"
                   f"{_blamed_peer(ctx.events, firsts)}, and that peer left no fatal line in "
                   f"these logs; the first to fail, {proc_text}: {detail}")
    if earlier.height:
        where = ctx.cite(earlier.head(1))[0]
        summary += (f" (but {lines_in(earlier)} fatal line(s) before it name no process, the "
                    f"first at {where['file']}:{where['line']})")
    if later.height:
        summary += (f"; {later.height} other process(es) failed after it "
                    f"({world_ranks(ctx.who(later['proc'].to_list()))})")
    warned = _nccl_warnings_before(ctx, root)
    if warned.height:
        others = ctx.who(int(p) for p in warned["proc"].drop_nulls()
                         if int(p) != root["proc"])
        if others:
            summary += f"; NCCL warned before it on {world_ranks(others)}"
    failures = elastic_failures(ctx)
    summary += _elastic_said(ctx, failures, culprits)
    notice = died.filter(pl.col("proc").is_in(culprits)).select(
        pl.col("_by").struct.field("file_id"), pl.col("_by").struct.field("line")).drop_nulls()
    evidence = ctx.cite(pl.concat([firsts.filter(pl.col("proc").is_in(culprits))
                                   .select("file_id", "line"),
                                   record.tail(1).select("file_id", "line"),
                                   notice, _elastic_places(failures),
                                   warned.select("file_id", "line"),
                                   later.select("file_id", "line"),
                                   cascade.select("file_id", "line")], how="vertical_relaxed"),
                        limit=12)
    who = [] if peer_first else _with_launcher_pairs(ctx.who(culprits), failures)
    finding = Finding("crash", "error", summary, who,
                      first_ts=_iso(root["ts_full"]),
                      last_ts=_iso(_last_ts(pl.concat([firsts.select("ts_full"),
                                                       cascade.select("ts_full")]))),
                      evidence=evidence,
                      waiting=ctx.who((firsts if peer_first else later)["proc"].to_list()),
                      rows=firsts)
    finding.then("crash", later)
    return finding


def _elastic_said(ctx: Context, failures: list[dict[str, Any]], culprits: list[int]) -> str:
    """What torch elastic's summary adds to a crash: its first observed failure, and whether
    it is a culprit."""
    root = next((f for f in failures if f["root"]), None)
    if root is None:
        return ""
    ranks = {p.get("world_rank") for p in ctx.who(culprits)}
    said = (f"; torch elastic's summary names world rank {root['rank']} (local rank "
            f"{root['local_rank']}, PID {root['pid']}" + (f" on {root['host']}" if root["host"]
                                                         else "")
            + f", exit code {root['exitcode']}" + (f", {root['time']}" if root["time"] else "")
            + ") its first observed failure")
    return said if root["rank"] in ranks else said + " (these logs show another process first)"


def _elastic_places(failures: list[dict[str, Any]]) -> pl.DataFrame:
    """The (file_id, line) of the summary's root failure (its exitcode line)."""
    roots = [(f["file_id"], f["line"]) for f in failures if f["root"]]
    return pl.DataFrame(roots[:1], schema={"file_id": pl.UInt32, "line": pl.UInt32},
                        orient="row")


def _with_launcher_pairs(people: list[dict[str, Any]], failures: list[dict[str, Any]]
                         ) -> list[dict[str, Any]]:
    """The culprits, with the PID and host torch elastic's summary gives for their world rank
    when their own lines show none."""
    pairs = {f["rank"]: f for f in failures}
    out = []
    for person in people:
        failure = pairs.get(person.get("world_rank"))
        if failure is not None and not person.get("replica"):
            person = {**person, "pid": person.get("pid") or failure["pid"],
                      "host": person.get("host") or failure["host"]}
        out.append(person)
    return out


def _elastic_crash(ctx: Context) -> list[Finding]:
    """No fatal line of a process in these logs, but torch elastic's summary names its first
    observed failure: a crash of that world rank (named by the summary's rank, PID and host;
    its own output is elsewhere, e.g. `--log-dir` files, or it was killed by a signal)."""
    failures = elastic_failures(ctx)
    root = next((f for f in failures if f["root"]), None)
    if root is None:
        return []
    procs = [p for p, person in ctx.people.items()
             if person.get("world_rank") == root["rank"] and not person.get("replica")]
    people = (_with_launcher_pairs(ctx.who(procs), failures) if len(procs) == 1 else
              [{**{c: None for c in COORDINATES}, "world_rank": root["rank"],
                "host": root["host"], "pid": root["pid"]}])
    code = root["exitcode"]
    summary = (f"{_short(people[0])} failed first, by torch elastic's summary (local rank "
               f"{root['local_rank']}, exit code {code}"
               + (f" ({_SIGNALS[code]})" if code in _SIGNALS else "")
               + (f", {root['time']}" if root["time"] else "")
               + "); no exception of its own is in these logs (its output is elsewhere, e.g. "
               "torchrun's --log-dir files, or a signal ended it)")
    others = sorted({f["rank"] for f in failures if not f["root"]})
    if others:
        summary += f"; the summary lists world rank(s) {ranges(others)} as failed too"
    rows = ctx.events.filter(pl.col("order").is_in([f["order"] for f in failures]))
    cascade = _cascade_after(ctx, {"order": int(rows["order"].min())})  # type: ignore[arg-type]
    first_ts, last_ts = _span(pl.concat([rows["ts_full"], cascade["ts_full"]]))
    return [Finding("crash", "error", summary, people, first_ts=first_ts, last_ts=last_ts,
                    evidence=ctx.cite(pl.concat([_elastic_places(failures),
                                                 rows.select("file_id", "line"),
                                                 cascade.select("file_id", "line")],
                                                how="vertical_relaxed"), 12))]


_SIGNALS = {-6: "SIGABRT", -9: "SIGKILL", -11: "SIGSEGV", -15: "SIGTERM"}


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
    code = regex.search(r"(?:[Ee]xited with (?:exit )?code|exitcode:) (-?\d+)",
                        " ".join(said["text"].to_list()))
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
    names = ([world_ranks(ctx.who(procs))] if ctx.who(procs) else []) + unnamed[:4]
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
                             | (pl.col("ts_full") >= shifted(root["ts_full"], -_WARN_WINDOW)))
    return warns.group_by("proc", maintain_order=True).first()


def _unnamed_crash(ctx: Context, unnamed: pl.DataFrame, waiting: list[int] | None = None,
                   died: pl.DataFrame | None = None) -> list[Finding]:
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
    detail = _exception_text(_record(ctx, first), first)
    what = ctx.events.filter((pl.col("file_id") == first["file_id"])
                             & (pl.col("line") == first["line"] + 1)
                             & pl.col("text").str.starts_with("  what():"))
    if what.height:
        detail += " " + str(what["text"][0]).strip()
    cascade = _cascade_after(ctx, first)
    summary = f"{who} crashed: {detail[:300]}"
    if died is not None and died.filter((pl.col("file_id") == first["file_id"])
                                        & (pl.col("line") == first["line"])).height:
        summary = f"{who} died of an uncaught exception: {detail[:300]}"
    if waiting:
        summary += f"; {len(waiting)} scheduler(s) failed after it"
    evidence = ctx.cite(pl.concat([unnamed.head(1).select("file_id", "line"),
                                   what.select("file_id", "line"),
                                   cascade.select("file_id", "line")]), limit=12)
    return [Finding("crash", "error", summary, first_ts=_iso(first["ts_full"]),
                    last_ts=_iso(_last_ts(pl.concat([unnamed.head(1).select("ts_full"),
                                                     cascade.select("ts_full")]))),
                    evidence=evidence, waiting=ctx.who(waiting or []))]


# `Scheduler or DataParallelController 7002 terminated with 0`: a clean exit
_CLEAN_EXIT = r"terminated with 0\s*$"
_VICTIM_WINDOW = timedelta(seconds=60)


def _victims(events: pl.DataFrame, firsts: pl.DataFrame) -> pl.DataFrame:
    """proc -> True when it says a peer failed first (VICTIM_STEMS): in the record of its
    first fatal line (`ValueError: TP rank 1 could finish the model loading, but …`), or on a
    line of its own in the minute before it (torch's Gloo barrier line comes before the
    scheduler's exception)."""
    nccl = _nccl_peer_lost(events)
    said = events.filter(_contains_any(VICTIM_STEMS) & pl.col("proc").is_not_null()).select(
        "proc", "file_id", "record", "order", "ts_full",
        _nccl=pl.lit(False)).vstack(nccl.select("proc", "file_id", "record", "order", "ts_full",
                                                _nccl=pl.lit(True)))
    fatal = firsts.select("proc", _file=pl.col("file_id"), _record=pl.col("record"),
                          _order=pl.col("order"), _ts=pl.col("ts_full"))
    joined = said.join(fatal, on="proc")
    own_record = (pl.col("file_id") == pl.col("_file")) & (pl.col("record") == pl.col("_record"))
    recent = (pl.col("ts_full").is_not_null() & pl.col("_ts").is_not_null()
              & (pl.col("ts_full") >= pl.col("_ts") - _VICTIM_WINDOW))
    # (NCCL's own lines print no time of their own: a refused or closed connection to a peer
    # on the process's NCCL lines before its failure, within ten minutes when they have one)
    nccl_recent = pl.col("_nccl") & (pl.col("ts_full").is_null() | pl.col("_ts").is_null()
                                     | (pl.col("ts_full") >= pl.col("_ts") - _WARN_WINDOW))
    before = (pl.col("order") <= pl.col("_order")) & (recent | nccl_recent)
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
    soon = pl.col("ts_full").is_not_null() & (pl.col("ts_full") <= shifted(start, _VICTIM_WINDOW))
    found = indexed.filter(~pl.col("_victim") & soon)
    if found.height == 0:
        return firsts
    first = int(found["_i"][0])
    return pl.concat([indexed.slice(first, 1), indexed.slice(0, first),
                      indexed.slice(first + 1)]).drop("_i")


_PEER_RANK = regex.compile(r"waiting for send/recv from rank (\d+)")
# the peer an NCCL WARN names: `Connect to 10.0.0.2<43821> failed`, `Connection closed by
# remote peer gpu-node-1<43224>`, `Call to recv from 10.0.0.2<34567> failed`
_NCCL_PEER = regex.compile(r"(?:[Cc]onnect to|remote peer|from|peer) \[?([\w.:\-]+?)\]?<(\d+)>")


def _nccl_peer_lost(events: pl.DataFrame) -> pl.DataFrame:
    """NCCL WARN lines of a process saying its connection to a peer was refused or closed, or
    that the remote process exited: the process is a victim of that peer."""
    return events.filter(pl.col("proc").is_not_null()
                         & pl.col("text").str.contains("NCCL WARN", literal=True)
                         & _contains_any(NCCL_PEER_LOST))


def _blamed_peer(events: pl.DataFrame, firsts: pl.DataFrame) -> str:
    """Who the victims' lines blame, when they say: torch's Gloo barrier names the group rank
    it waited for; SGLang's load check names none."""
    said = events.filter(pl.col("proc").is_in(firsts["proc"].to_list())
                         & _contains_any(VICTIM_STEMS))["text"].to_list()
    nccl = _nccl_peer_lost(events).filter(pl.col("proc").is_in(firsts["proc"].to_list()))
    peers = sorted({m.group(1) for t in nccl["text"].to_list()
                    if (m := _NCCL_PEER.search(str(t)))})
    if peers:
        return (f" (NCCL's own lines on the failing process(es) say a connection to "
                f"{', '.join(peers[:4])} was refused or closed: the process there failed "
                "first; check its logs)")
    ranks = sorted({int(m.group(1)) for t in said if (m := _PEER_RANK.search(str(t)))})
    if ranks:
        return (f" (torch's monitored barrier names rank(s) {ranges(ranks)} of its process group; "
                "check that rank's logs)")
    if any("could finish the model loading" in str(t) for t in said):
        return " (SGLang: other TP ranks did not finish loading the model)"
    return ""


def _record(ctx: Context, root: dict[str, Any]) -> pl.DataFrame:
    """The rows of the root's record (its traceback), in file order: its process's, and the
    pieces no line tied to a process (a hard-wrapped line whose head only a rank tag names),
    with `_width`: the physical line's length."""
    return ctx.rows_of([root["file_id"]]).filter((pl.col("file_id") == root["file_id"]) & (pl.col("record") == root[
        "record"]) & (pl.col("proc").eq_missing(root["proc"]) | pl.col("proc").is_null())
    ).select("file_id", "line", "part", pl.coalesce("msg", "text").alias("text"),
             pl.col("text").str.len_chars().alias("_width")).collect().sort("line", "part")


def _unwrapped(record: pl.DataFrame, root: dict[str, Any]) -> str:
    """The root line whole again when a hard wrap cut it at a fixed column: its piece and
    the record's next pieces, each joined while the one before it is as long as the root's
    (at least WRAP_MIN); else the root row's own text."""
    pieces = record.filter(pl.col("line") >= root["line"])
    if pieces.height < 2 or pieces["_width"][0] < WRAP_MIN:
        return str(root["text"])
    width = pieces["_width"][0]
    texts, widths = pieces["text"].to_list(), pieces["_width"].to_list()
    joined = str(texts[0])
    for index in range(1, len(texts)):
        if widths[index - 1] != width:
            break
        joined += str(texts[index])
    return joined


# compiled at import: the `regex` package compiles in Python, and a signal that arrives inside
# one of its finalizers mid-analysis could not unwind cleanly. (The prefix after the time is
# bounded, so that a line of many `[10:00:00` without `] ` is searched in linear time.)
_SGLANG_STAMP = regex.compile(r"\[(?:\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d[^\]]{0,200}\] ")


def _exception_text(record: pl.DataFrame, root: dict[str, Any]) -> str:
    """`ExcType: message` closing the root's traceback (`record`, from `_record`), else the
    root line's own message."""
    closing = record.filter(pl.col("text").str.contains(  # not C++'s `Exception raised from`
        r"^[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit)(?::|$)"))
    if closing.height:
        return str(closing["text"][-1]).strip()[:200]
    text = _unwrapped(record, root)
    header = _SGLANG_STAMP.search(text)  # (behind wrappers)
    if header:
        return text[header.end():].strip()[:200]
    return text[text.find("] ") + 2:].strip()[:200] if "] " in text else text.strip()[:200]
