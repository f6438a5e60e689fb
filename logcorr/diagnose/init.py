"""`init-hang`: a startup phase begun and never ended.

Reads: NCCL `Init START` / `Init COMPLETE` per commId (a split's START matched to its COMPLETE by
comm pointer), torch rendezvous-store timeouts, SGLang's phase begin/end lines (`Init torch
distributed begin`, `Load weight begin`, `Capture cuda graph begin`, …).
Cannot decide: who blocks a bootstrap when every member started and none completed and the
members' comm ranks do not fit one group instance; who to blame for an unreachable store."""

from __future__ import annotations

from typing import Any

import polars as pl
import regex

from logcorr.diagnose.context import (
    PHASES,
    STALL_SECONDS,
    STORE_STEMS,
    Context,
    Finding,
    _contains_any,
    _iso,
    _name,
    _person,
    _places,
    _span,
)


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
