"""`stalled` and `unresponsive`: a server or a process that went quiet.

Reads: each process's last batch line (`Decode batch` / `Prefill batch`) and last line, the HTTP
server's failed health checks. Cannot decide: who stopped answering a health check (nothing in
those lines names a process); why a process went quiet without a timeout."""

from __future__ import annotations

import polars as pl
import regex

from logcorr.diagnose.context import (
    HEALTH_STEMS,
    STALL_SECONDS,
    Context,
    Finding,
    _contains_any,
    _short,
    _span,
    lines_in,
)

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
    summary = (f"the server stopped answering its health check {lines_in(failed)} time(s)"
               + (f": no response for {found.group(1)} s at {found.group(2)}, the last response "
                  f"(heartbeat) at {found.group(3)}" if found else ""))
    earliest, latest = _span(ctx.last.get_column("ts_full")) if ctx.last.height else (None, None)
    if earliest is not None:
        summary += f"; the schedulers' last lines are between {earliest} and {latest}"
    first_ts, last_ts = _span(failed.get_column("ts_full"))
    return [Finding("unresponsive", "error", summary, first_ts=first_ts, last_ts=last_ts,
                    evidence=ctx.cite(failed))]


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
