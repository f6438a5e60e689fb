"""`collective-hang`: torch watchdog timeouts of one group instance.

Reads: torch's `WorkNCCL(SeqNum=…)` timeout lines, their last enqueued/completed counters, the
PG description (which SGLang group), debug-dump lines, each member's last line.
Cannot decide: the group of a PG line without a description whose rank fits several groups,
or any group without a launch config (the timeouts are reported with no culprit); a member's
progress when its only lines carry no SeqNum."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import polars as pl

from logcorr.diagnose.context import (
    DUMP_STEMS,
    SGLANG_WATCHDOG_STEMS,
    TIMEOUT_STEMS,
    Context,
    Finding,
    _contains_any,
    _iso,
    _person,
    _places,
    _short,
    shifted,
    stack_groups,
    stack_tops,
)
from logcorr.diagnose.ranges import ranges, world_ranks
from logcorr.topology import Topology


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
    people = ctx.who(procs)
    # (the processes of a torch world assumed without a config have world ranks)
    named = bool(people) and all(p.get("world_rank") is not None for p in people)
    who = (world_ranks(people) if named and len(procs) >= len(ranks)
           else f"{len(procs)} process(es)" if procs and len(procs) >= len(ranks)
           else f"torch rank(s) {ranges(ranks)}" if ranks else "a process")
    said = [f"SeqNum {', '.join(map(str, seqs[:4]))}"] if seqs else []
    said += [f"group {', '.join(groups)}"] if groups else []
    summary = (f"no culprit: {who} timed out in a collective"
               + (f" ({'; '.join(said)})" if said else "")
               + f"; {why}, so the member that never reached it cannot be told")
    evidence = ctx.cite(_places(rows), 12)
    return Finding("collective-hang", "error", summary, seq=seqs[-1] if seqs else None,
                   first_ts=_iso(min(times, default=None)),
                   last_ts=_iso(max(times, default=None)), evidence=evidence,
                   waiting=ctx.who(procs), rows=_frame(ctx, rows))


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
    world, replicas = topology.sizes.world, topology.sizes.replicas
    findings = []
    for (group, members), rows in sorted(instances.items()):
        timed = {r["torch_rank"] for r in rows}
        silent = set(members) - timed
        seq = max((r["seq"] for r in rows if r["seq"] is not None), default=None)
        first = min((r["ts_full"] for r in rows if r["ts_full"]), default=None)
        # the replica, from what other lines of the same time say: the silent member's own
        # watchdog / stack dump (its DP prefix), the waiting members' SGLang watchdogs, and
        # which replicas went on printing batches after the timeouts
        own = stuck.filter(pl.col("proc").is_in([r * world + w for r in range(replicas)
                                                 for w in silent]))
        near = _near(stuck, first).filter(
            pl.col("proc").is_in([r * world + w for r in range(replicas) for w in timed])
            & _contains_any(SGLANG_WATCHDOG_STEMS))
        said = {int(p) // world for p in own["proc"].to_list() + near["proc"].to_list()}
        healthy = _went_on(ctx, first, replicas, world)
        places = said - healthy if said else set(range(replicas)) - healthy
        op = next((r["op"] for r in rows if r["op"]), None)
        work = f"{op + ' ' if op else ''}SeqNum {seq}"
        procs: list[int] = []
        waiting: list[int] = []
        if len(places) == 1 and (said or healthy):
            replica = places.pop()
            procs = sorted(replica * world + w for w in silent)
            waiting = sorted(replica * world + w for w in timed)
            where = _group_text(topology, group, members, replica)
            head = (f"{_culprits_text(ctx, procs)} never reached {work}" if procs else
                    f"no culprit: every member of {where} timed out on {work}")
            reasons = "; ".join(_replica_reasons(own, near, healthy, replica, world))
            summary = (f"{head}; {len(waiting)} member(s) of {where} timed out waiting"
                       f"{' for it' if len(procs) == 1 else ''}; the hang is in replica "
                       f"{replica}, decided by: {reasons} ({_REPLICA_BLIND})")
        else:
            summary = _no_replica(group, members, silent, work, said)
        cited = pl.concat([own.select("file_id", "line"), near.select("file_id", "line"),
                           _places(rows)])
        findings.append(Finding("collective-hang", "error", summary, ctx.who(procs), group=group,
                                group_members=list(members), seq=seq, op=op,
                                first_ts=_iso(first), evidence=ctx.cite(cited, 12),
                                waiting=ctx.who(waiting), rows=_frame(ctx, rows)))
    return findings


_REPLICA_BLIND = "torch's lines do not say which native-DP replica they come from"


def _no_replica(group: str, members: tuple[int, ...], silent: set[int], work: str,
                said: set[int]) -> str:
    """The summary of a replica-blind hang whose replica cannot be told."""
    which = (f"the other lines point to replicas {ranges(said)}" if len(said) > 1
             else "no other line of that time names it")
    where = f"{group} group {ranges(members)}"
    if silent:
        return (f"no culprit: world rank(s) {ranges(silent)} of {where} never reached {work}, "
                f"but which native-DP replica hangs cannot be told: {which} ({_REPLICA_BLIND})")
    return (f"no culprit: every member of {where} timed out on {work}, and which native-DP "
            f"replica hangs cannot be told: {which} ({_REPLICA_BLIND})")


def _replica_reasons(own: pl.DataFrame, near: pl.DataFrame, healthy: set[int], replica: int,
                     world: int) -> list[str]:
    """What placed a replica-blind hang in `replica`."""
    reasons = []
    if own.height:
        reasons.append("the silent member's own watchdog / stack dump (its DP prefix)")
    if near.height:
        ranks = {int(p) % world for p in near["proc"].to_list()}
        reasons.append(f"SGLang's watchdog fired on replica {replica}'s world rank(s) "
                       f"{ranges(ranks)} at the same time")
    if healthy:
        reasons.append(f"replica(s) {ranges(healthy)} went on printing batches")
    return reasons


_NEAR = timedelta(minutes=10)


def _near(rows: pl.DataFrame, when: datetime | None) -> pl.DataFrame:
    """`rows` within ten minutes of `when` (none without a time)."""
    if when is None:
        return rows.clear()
    return rows.filter(pl.col("ts_full").is_between(shifted(when, -_NEAR), shifted(when, _NEAR)))


def _went_on(ctx: Context, when: datetime | None, replicas: int, world: int) -> set[int]:
    """Replicas some of whose schedulers printed a batch line after `when`."""
    if when is None or ctx.progress.height == 0:
        return set()
    later = ctx.progress.filter(pl.col("ts_full") > when)["proc"].to_list()
    return {int(p) // world for p in later if int(p) // world < replicas}


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
    tops = stack_tops(ctx, procs)
    groups, odd = stack_groups(tops)
    by_stack = not culprits and bool(odd) and not unseen
    if by_stack:  # every member timed out, one's py-spy stack is elsewhere
        culprits, waiting = set(odd), waiting - set(odd)
    first = min((r["ts_full"] for r in rows if r["ts_full"]), default=None)
    last = max((r["ts_full"] for r in rows if r["ts_full"]), default=None)
    op = ops[0] if ops else None
    work = f"{op + ' ' if op else ''}SeqNum {waited}"
    where = _group_text(topology, group, members, replica)
    if by_stack:
        summary = (f"{_short(ctx.people[odd[0]])} is not where the others are: every member "
                   f"of {where} timed out waiting on {work}, and its py-spy stack differs "
                   "(decided by the py-spy stacks)")
    elif culprits:
        how = "never reached" if silent and not behind else "is behind on"
        summary = (f"{_culprits_text(ctx, sorted(culprits))} {how} {work}; {len(waiting)} "
                   f"member(s) of {where} timed out waiting for "
                   f"{'it' if len(culprits) == 1 else 'them'}"
                   + ("; decided by which members' torch watchdog reported the timeout"
                      if how == "never reached" else "; decided by the SeqNum each member "
                      "enqueued"))
        if {procs[p] for p in culprits} & crashed:
            summary += " (the culprit crashed: see the crash finding)"
        if unseen:
            summary += (f"; {_ranks(procs, unseen)} left no log, so "
                        f"{'its' if len(unseen) == 1 else 'their'} part is unknown")
    else:
        summary = (f"no culprit: every member of {where} in the logs timed out waiting on "
                   f"{work}; the missing participant is outside these logs"
                   + (f" (look here next: the logs of {_ranks(procs, unseen)})"
                      if unseen else ""))
    if len(tops) == 1:  # (one member dumped its stack: where it was)
        [(proc, frame)] = tops.items()
        summary += f"; world rank {procs[proc]}'s py-spy stack: in {frame}"
    elif tops:
        summary += f"; py-spy stacks: {groups}"
    if dumped:
        summary += (f"; {_ranks(procs, dumped)} only reported a timeout without its SeqNum (a "
                    "debug dump, or torch taking the process down), so their progress is "
                    "unknown")
    evidence_rows = _places(rows)
    culprit_lines = ctx.events.filter(pl.col("proc").is_in(sorted(culprits))
                                    & _contains_any(SGLANG_WATCHDOG_STEMS + ("Pyspy dump",)))
    evidence = ctx.cite(pl.concat([culprit_lines.select("file_id", "line"), evidence_rows]), 12)
    return Finding("collective-hang", "error", summary, ctx.who(culprits), group=group,
                   group_members=list(members), seq=waited, op=op, first_ts=_iso(first),
                   last_ts=_iso(last), evidence=evidence, waiting=ctx.who(waiting),
                   progress=progress, unknown=[_person(ctx, p) for p in sorted(unseen)],
                   rows=_frame(ctx, rows))


def _group_text(topology: Topology, group: str, members: tuple[int, ...], replica: int) -> str:
    """`tp group 0–15`, with native-DP replicas `tp group 0–3 (replica 1)`."""
    text = f"{group} group {ranges(members)}"
    return text + (f" (replica {replica})" if topology.sizes.replicas > 1 else "")


def _ranks(procs: dict[int, int], which: set[int]) -> str:
    """`world rank 12` / `world ranks 2, 3, 6` of the processes `which` (world ranks by
    `procs`)."""
    ranks = sorted(procs[p] for p in which)
    return ("world rank " if len(ranks) == 1 else "world ranks ") + ranges(ranks)


def _culprits_text(ctx: Context, culprits: list[int]) -> str:
    """One culprit with its coordinates (`world rank 9 (TP9, DP4, node 1 GPU 1)`), several
    as ranks (`world ranks 1, 3, 5`)."""
    people = ctx.who(culprits)
    if len(people) == 1:
        return _short(people[0])
    return world_ranks(people)


def _frame(ctx: Context, rows: list[dict[str, Any]]) -> pl.DataFrame:
    """Event rows held as dicts, as a frame (for folding a finding into another)."""
    return ctx.events.join(_places(rows).unique(), on=["file_id", "line"])


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
