"""`init-hang`: a startup phase begun and never ended.

Reads: NCCL `Init START` / `Init COMPLETE` per commId (a split's START matched to its COMPLETE by
comm pointer), torch rendezvous-store timeouts, SGLang's phase begin/end lines (`Init torch
distributed begin`, `Load weight begin`, `Capture cuda graph begin`, …).
Cannot decide: who blocks a bootstrap when every member started and none completed and the
members' comm ranks do not fit one group instance; who to blame for an unreachable store."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import polars as pl
import regex

from logcorr.diagnose.context import (
    NCCL_INIT_STEPS,
    PHASES,
    STALL_SECONDS,
    STORE_STEMS,
    Context,
    Finding,
    _contains_any,
    _iso,
    _person,
    _places,
    _short,
    _span,
    lines_in,
)
from logcorr.diagnose.ranges import ranges, world_ranks


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
    nccl = [f for f in findings if f.processes]
    for index, items in sorted(stuck.items()):
        name = PHASES[index][0]
        procs = [p for p, _ in items]
        rows_cited = _places(r for _, r in items)
        finding = Finding(
            "init-hang", "error",
            f"{_who(ctx, procs, 'a process')} began {name} and never finished it, while "
            "others got further",
            ctx.who(procs), first_ts=_iso(min((r["ts_full"] for _, r in items if r["ts_full"]),
                                              default=None)),
            evidence=ctx.cite(rows_cited))
        # (the same processes stuck in an NCCL communicator's init: one incident)
        same = next((f for f in nccl if finding.processes
                     and _keys(finding.processes) <= _keys(f.processes)), None)
        if same is not None:
            same.then("init-hang", ctx.events.join(rows_cited.unique(), on=["file_id", "line"]))
        else:
            findings.append(finding)
    return findings


def _keys(people: list[dict[str, Any]]) -> set[tuple[Any, Any]]:
    return {(p.get("replica"), p.get("world_rank")) for p in people}


def _nccl_init_findings(ctx: Context) -> list[Finding]:
    """A communicator (commId) whose `Init START` some members logged without COMPLETE.
    With some members complete, the ones that are not are the culprits. With none complete,
    NCCL's bootstrap waits for every rank: comm ranks that never logged START while their logs
    are here are the culprits (mapped to processes through the one group instance the others
    fit), those whose logs are not here are unknown; when every rank started, the ranks that
    got least far through init (bootstrap, connection setup, rings, trees) are the suspects
    and the others waiting."""
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
        comm = f"NCCL communicator {name} (nranks {nranks if nranks else '?'})"
        if done:
            completed = group.filter(pl.col("nccl_phase") == "Init COMPLETE")["proc"]
            culprits = hung["proc"].drop_nulls().to_list()
            findings.append(Finding(
                "init-hang", "error", f"{_who(ctx, culprits, 'rank(s)')} never completed init "
                f"of {comm}: Init START and no Init COMPLETE, while {len(done)} completed",
                ctx.who(culprits), evidence=ctx.cite(hung),
                waiting=ctx.who(completed.drop_nulls().to_list())))
            continue
        findings.append(_none_complete(ctx, comm, hung, started, nranks))
    return sorted(findings, key=lambda f: f.summary)


def _who(ctx: Context, procs: list[int], fallback: str) -> str:
    """One process with its coordinates, several as world ranks, none as `fallback`."""
    people = [_person(ctx, p) for p in sorted(set(procs))]
    if len(people) == 1:
        return _short(people[0])
    return world_ranks(people) if people else fallback


def _none_complete(ctx: Context, comm: str, hung: pl.DataFrame, started: pl.DataFrame,
                   nranks: int | None) -> Finding:
    """A communicator none of whose ranks completed init: the ranks that never started
    (logs here: culprits; logs missing: unknown), else the ranks that got least far."""
    ranks = set(started["comm_rank"].drop_nulls().to_list())
    absent = sorted(set(range(nranks)) - ranks) if nranks else []
    members = _absent_members(ctx, started, nranks, absent) if absent else []
    unknown = ctx.absent(members)
    culprits = [p for p in members if p not in unknown]
    waiting = hung["proc"].drop_nulls().unique(maintain_order=True).to_list()
    cited = hung
    waits = f"{hung.height} rank(s) logged Init START and wait"
    if absent and members:
        comm_rank = dict(zip(members, absent))
        summary = (f"{_who(ctx, culprits, '')} never logged Init START of {comm} (comm rank(s) "
                   f"{ranges(comm_rank[p] for p in culprits)}; their logs are here), and NCCL's "
                   f"bootstrap waits for every rank; {waits}" if culprits else
                   f"no culprit: {comm}: {waits}")
        if unknown:
            summary += (f"; comm rank(s) {ranges(comm_rank[p] for p in unknown)} "
                        f"({world_ranks([_person(ctx, p) for p in unknown])}) left no log in "
                        "this set, so how far they got is unknown (look here next: "
                        f"{_their_logs(ctx, unknown)})")
    elif absent:
        summary = (f"no culprit: {comm}: {waits}; comm rank(s) {ranges(absent)} logged no Init "
                   "START in these logs (their processes cannot be placed in one group "
                   "instance, and their logs may be missing: look here next)")
    else:
        step_rows = _step_rows(ctx, hung)
        culprits, summary = _least_far(ctx, comm, hung, _init_steps(hung, step_rows))
        waiting = [p for p in waiting if p not in culprits]
        if culprits:
            cited = pl.concat([hung.select("file_id", "line"),
                               step_rows.select("file_id", "line")])
    return Finding("init-hang", "error", summary, ctx.who(culprits), evidence=ctx.cite(cited),
                   waiting=ctx.who(waiting), unknown=[_person(ctx, p) for p in unknown])


def _least_far(ctx: Context, comm: str, hung: pl.DataFrame,
               steps: dict[tuple[str, int], int]) -> tuple[list[int], str]:
    """Every rank started and none completed: the ranks that got least far through init are
    the suspects (none when all reached the same step). (suspects, the summary)"""
    reached = set(steps.values())
    if len(reached) <= 1:
        step = NCCL_INIT_STEPS[reached.pop()][0] if reached else "Init START"
        return [], (f"no culprit: every rank of {comm} started and all got as far as {step}, "
                    "so the bootstrap itself (network, ports) stalls")
    low = min(reached)
    culprits = sorted({int(p) for (h, pid), s in steps.items() if s == low
                       for p in hung.filter((pl.col("host") == h) & (pl.col("pid") == pid))
                       ["proc"].drop_nulls().to_list()})
    behind = sum(1 for s in steps.values() if s == low)
    others = ", ".join(f"{NCCL_INIT_STEPS[s][0]} ({n})"
                       for s, n in sorted(_count(steps.values()).items()) if s != low)
    return culprits, (f"{_who(ctx, culprits, f'{behind} rank(s)')} got no further than "
                      f"{NCCL_INIT_STEPS[low][0]} in init of {comm}, while the others reached "
                      f"{others}; decided by the NCCL init step each rank reached: the ranks "
                      "that got least far are the suspects")


def _count(values: Iterable[int]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for value in values:
        counts[value] = counts.get(value, 0) + 1
    return counts


def _step_rows(ctx: Context, hung: pl.DataFrame) -> pl.DataFrame:
    """The NCCL init lines (NCCL_INIT_STEPS between START and COMPLETE) that the processes of
    `hung` printed in the same file after their `Init START` and before any later START of
    theirs, with `_step` (the step's index). Read from the whole timeline, only for a
    communicator that hangs (connection lines are too many to gather as events)."""
    mine = hung.filter(pl.col("host").is_not_null() & pl.col("pid").is_not_null()).select(
        "host", "pid", "file_id", _start=pl.col("line"))
    if mine.height == 0:
        return pl.DataFrame(schema={"host": pl.String, "pid": pl.Int64, "file_id": pl.UInt32,
                                    "line": pl.UInt32, "_step": pl.Int32})
    starts = (ctx.events.filter(pl.col("nccl_phase") == "Init START")
              .select("host", "pid", "file_id", _next_start=pl.col("line")))
    later = (mine.join(starts, on=["host", "pid", "file_id"])
             .filter(pl.col("_next_start") > pl.col("_start"))
             .group_by("host", "pid", "file_id", "_start").agg(pl.col("_next_start").min()))
    step = pl.lit(None, pl.Int32)
    for index, (_, stems) in enumerate(NCCL_INIT_STEPS[1:-1], start=1):
        step = pl.when(_contains_any(stems)).then(pl.lit(index, pl.Int32)).otherwise(step)
    every = [s for _, group in NCCL_INIT_STEPS[1:-1] for s in group]
    found = (ctx.rows_of(mine["file_id"].unique().to_list())
             .filter(pl.col("host").is_in(mine["host"].unique().to_list())
                             & pl.col("pid").is_in(mine["pid"].unique().to_list())
                             & pl.col("text").str.contains_any(every))
             .select(pl.col("host").cast(pl.String), pl.col("pid").cast(pl.Int64),
                     pl.col("file_id").cast(pl.UInt32), pl.col("line").cast(pl.UInt32),
                     "text").collect())
    return (found.with_columns(_step=step)
            .join(mine.join(later, on=["host", "pid", "file_id", "_start"], how="left"),
                  on=["host", "pid", "file_id"])
            .filter((pl.col("line") > pl.col("_start"))
                    & (pl.col("_next_start").is_null()
                       | (pl.col("line") < pl.col("_next_start"))))
            .select("host", "pid", "file_id", "line", "_step"))


def _init_steps(hung: pl.DataFrame, step_rows: pl.DataFrame) -> dict[tuple[str, int], int]:
    """(host, pid) -> the furthest init step (index into NCCL_INIT_STEPS) each process of
    `hung` reached after its `Init START` (`step_rows`: from `_step_rows`)."""
    reached = {(h, int(p)): 0 for h, p in hung.select("host", "pid").iter_rows()
               if p is not None}
    rows = step_rows.group_by("host", "pid").agg(pl.col("_step").max())
    for host, pid, step in rows.iter_rows():
        reached[(host, int(pid))] = max(reached.get((host, int(pid)), 0), int(step))
    return reached


def _their_logs(ctx: Context, procs: list[int]) -> str:
    """`node 1's log` / `the logs of world ranks [8, 9]`: where the unknown processes' lines
    would be."""
    topology = ctx.topology
    if topology is None:
        return "their logs"
    nodes = sorted({topology.processes[p].node_rank for p in procs
                    if p < len(topology.processes)})
    whole = [n for n in nodes if all(topology.processes[q].node_rank != n or q in procs
                                     for q in range(len(topology.processes)))]
    if whole and len(whole) == len(nodes):
        return ", ".join(f"node {n}'s log" for n in whole)
    return f"the logs of {world_ranks([_person(ctx, p) for p in procs])}"


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
    who = f"{len(procs)} process(es)" if procs else f"{lines_in(rows)} line(s)"
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
        # (a logged rank outside the group, as a damaged line may give, fits no instance)
        if len(lists) == 1 and len(one) == nranks and all(
                0 <= r < nranks and one[r] == p % world for p, r in rows):
            fits.add(one)
    if len(fits) != 1 or len(replicas) != 1:
        return []
    found, replica = fits.pop(), replicas.pop()
    return [replica * world + found[r] for r in absent if 0 <= r < nranks]
