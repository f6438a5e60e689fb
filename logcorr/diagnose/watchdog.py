"""`watchdog-timeout`: SGLang's own watchdog fired.

Reads: `Scheduler watchdog timeout (self.watchdog_timeout=…)` and the same for the detokenizer,
tokenizer manager and DP controller, the `… debug info:` dump printed first, `self.soft=True`.
Cannot decide: why a loop made no progress; a process whose line names no process."""

from __future__ import annotations

import polars as pl
import regex

from logcorr.diagnose.context import (
    _CASCADE_NOTE,
    SGLANG_WATCHDOG_STEMS,
    Context,
    Finding,
    _cascade_after,
    _contains_any,
    _short,
    _span,
    _unnamed,
)

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
