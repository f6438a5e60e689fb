"""`watchdog-timeout`: SGLang's own watchdog fired.

Reads: `Scheduler watchdog timeout (self.watchdog_timeout=…)` and the same for the detokenizer,
tokenizer manager and DP controller, the `… debug info:` dump printed first, `self.soft=True`.
Cannot decide: why a loop made no progress; a process whose line names no process."""

from __future__ import annotations

from typing import Any

import polars as pl
import regex

from logcorr.diagnose.context import (
    SGLANG_WATCHDOG_STEMS,
    Context,
    Finding,
    _cascade_after,
    _contains_any,
    _person,
    _short,
    _span,
    _unnamed,
    stack_groups,
    stack_tops,
)
from logcorr.diagnose.ranges import ranges, world_ranks

_WATCHDOG_TIMEOUT = regex.compile(r"watchdog_timeout=([\d.]+)")


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
    # (the timeout lines say the limit and whether it is soft; a `debug info:` dump does not)
    stated = fired.filter(pl.col("text").str.to_lowercase().str.contains(
        "watchdog timeout (", literal=True))
    timeout = stated_timeout(stated)
    # a soft watchdog (`self.soft=True`) only dumps state; the process may go on
    soft = stated.height > 0 and bool(stated.select(
        pl.col("text").str.contains("self.soft=True", literal=True).all()).item())
    limit = f"watchdog_timeout={timeout:g} s" if timeout else "the watchdog timeout"
    who = _who(people, first.get("role"))
    summary = (f"SGLang's soft watchdog fired on {who}: a slow step (its loop made no progress "
               f"for longer than {limit}; a soft watchdog only dumps state, and the process may "
               "have gone on)" if soft else
               f"{who} hung: SGLang's watchdog fired (its loop made no progress for longer "
               f"than {limit})")
    suspects = people
    waiting: list[dict[str, Any]] = []
    unknown: list[dict[str, Any]] = []
    odd = None if soft else _odd_one_out(ctx, [int(p) for p in firsts["proc"]], limit)
    if odd is not None:
        suspects, waiting, unknown, summary = odd
    evidence = ctx.cite(pl.concat([fired.select("file_id", "line"),
                                   cascade.select("file_id", "line")]), limit=12)
    first_ts, last_ts = _span(fired.get_column("ts_full"))
    return [Finding("watchdog-timeout", "warning" if soft else "error", summary, suspects,
                    first_ts=first_ts, last_ts=last_ts, evidence=evidence, waiting=waiting,
                    unknown=unknown, rows=fired)]


def stated_timeout(rows: pl.DataFrame) -> float | None:
    """The `--watchdog-timeout` (seconds) the first of `rows` that states one gives."""
    found = next((m for t in rows["text"].to_list()
                  if (m := _WATCHDOG_TIMEOUT.search(str(t)))), None)
    return float(found.group(1)) if found else None


def _who(people: list[dict[str, Any]], role: str | None) -> str:
    """The processes whose watchdog fired: one with its coordinates, several as ranks, none
    named by their role."""
    if len(people) == 1:
        return _short(people[0])
    return world_ranks(people) if people else _unnamed(role)


Odd = tuple[list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]], str]


def _odd_one_out(ctx: Context, fired: list[int], limit: str) -> Odd | None:
    """Within the one TP group instance whose schedulers' watchdogs fired, compare the
    members: those whose watchdog did not fire while more of the others' did are the suspects
    (they did not arrive where the others waited), and failing that a py-spy dump whose top
    frame differs from all the others'. Members without any line are unknown: nothing says
    whether theirs fired. (suspects, waiting, unknown, the summary, verdict first) - None
    when the firing processes are not schedulers of one group instance, or every member
    fired."""
    topology = ctx.topology
    if topology is None:
        return None
    world = topology.sizes.world
    instances = {(p // world, topology.group_instance("tp", p % world)) for p in fired
                 if p < len(topology.processes)}
    if len(instances) != 1:
        return None
    replica, members = instances.pop()
    if len(members) < 2:
        return None
    procs = [replica * world + w for w in members]
    unknown = ctx.absent(procs)
    quiet = [p for p in procs if p not in fired and p in ctx.people]
    where = f"tp group {ranges(members)}" + (f" (replica {replica})"
                                             if topology.sizes.replicas > 1 else "")
    said = (f"SGLang's watchdog fired on {len(fired)} of the {len(procs)} members"
            f"{', ' + _names(ctx, quiet, 'not on ') if quiet else ''}: no progress for longer "
            f"than {limit}")
    waited = f"{len(fired)} member(s) of {where} waited for"
    if quiet and len(quiet) < len(fired) and not unknown:
        suspects = ctx.who(quiet)
        summary = (f"{_who(suspects, None)} stopped making progress; {waited} "
                   f"{'it' if len(quiet) == 1 else 'them'} ({said}); decided by which "
                   f"members' watchdog fired{_earliest(ctx, procs, quiet)}")
        return suspects, ctx.who(fired), [], summary
    tops = stack_tops(ctx, procs)
    groups, odd = stack_groups(tops)
    if odd and not quiet and not unknown:
        summary = (f"{_short(ctx.people[odd[0]])} stopped making progress; {waited} it "
                   f"({said}); decided by the py-spy stacks: its top frame differs from all "
                   f"the others' ({groups})")
        return ctx.who(odd), ctx.who(p for p in fired if p not in odd), [], summary
    if not quiet and not unknown:
        return None  # every member with a log hung: the finding names them
    summary = (f"no culprit: SGLang's watchdog fired on {len(fired)} of the {len(procs)} "
               f"members of {where} ({world_ranks(ctx.who(fired))}): no progress for longer "
               f"than {limit}")
    if tops:
        summary += f"; their py-spy stacks: {groups}"
    if quiet:
        summary += f"; {len(quiet)} member(s) with logs did not fire, too many to single one out"
    if unknown:
        summary += (f"; {_names(ctx, unknown, '')} left no log, so whether theirs fired is "
                    "unknown (look here next: their logs)")
    return [], ctx.who(fired), [_person(ctx, p) for p in unknown], summary


def _names(ctx: Context, procs: list[int], lead: str) -> str:
    """`not on world rank 5` / `world ranks 4–7`: processes by their world ranks."""
    return lead + world_ranks([_person(ctx, p) for p in procs])


def _earliest(ctx: Context, procs: list[int], quiet: list[int]) -> str:
    """`; its last line is the earliest of the group, at …` when the suspects' last lines all
    come before every other member's."""
    last = {int(p): t for p, t in ctx.last.filter(pl.col("proc").is_in(procs))
            .select("proc", "ts_full").iter_rows() if t is not None}
    mine = [last[p] for p in quiet if p in last]
    others = [t for p, t in last.items() if p not in quiet]
    if len(mine) == len(quiet) and others and max(mine) < min(others):
        return (f"; {'its' if len(quiet) == 1 else 'their'} last line is the earliest of the "
                f"group, at {max(mine).isoformat()}")
    return ""
