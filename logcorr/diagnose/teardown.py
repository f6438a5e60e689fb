"""Which fatal rows are the teardown of a hang rather than crashes of their own.

After a group's timeout its members are taken down: torch aborts a process whose collective
timed out (`terminate called …` whose `what()` is the timeout, then Python's `Fatal Python
error: Aborted`), its heartbeat monitor ends one whose watchdog thread is stuck (`Terminating
the process … due to ProcessGroupNCCL watchdog hang`), and the main process sees its children
exit (`Subprocess scheduler_2 (pid=…) crashed with exit code -6`: SIGABRT; `… terminated with
-9`) and kills the rest. Such a row is teardown when it comes after the first hang line (a
collective timeout or a hard SGLang watchdog):

| how the row relates to the first hang line                                | teardown?      |
|---------------------------------------------------------------------------|----------------|
| its own process or file printed a hang line before it                     | yes            |
| stamped later by more than the window (same host: any later second)      | yes            |
| no stamp of its own, and the timeline places it later                     | yes            |
| stamped within the window on either side (whole seconds, clock skew)      | yes, undecided |
| before it, by more than the window, or untimed and earlier                | no: a crash    |

An undecided row is said in the root's summary.

The window is `clock.order_window`: SKEW_SECONDS plus the skew the timeouts themselves show.
A row whose own text or `what()` is a CUDA fault is always a crash; `terminate called` whose
`what()` is the watchdog's timeout is always teardown (the timeout is its own).
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

from logcorr.diagnose.context import (
    ABORT_STEMS,
    CUDA_FAULT_STEMS,
    REAPED_STEMS,
    TIMEOUT_STEMS,
    Context,
    _contains_any,
    _hang_lines,
)


def mark_teardown(ctx: Context, fatal: pl.DataFrame, window: timedelta) -> pl.DataFrame:
    """`fatal` (fatal event rows) with `_teardown` (the row is the teardown of a hang, see the
    table above) and `_undecided` (teardown only because its order cannot be told)."""
    primary = _contains_any(CUDA_FAULT_STEMS) | pl.any_horizontal(
        pl.col("_next").fill_null("").str.contains(s, literal=True) for s in CUDA_FAULT_STEMS)
    own = _own_timeout(ctx.events, fatal)
    hang = _hang_lines(ctx.events)
    if hang.height == 0:
        return fatal.with_columns(_teardown=own & ~primary, _undecided=pl.lit(False))
    first = hang.sort("order").row(0, named=True)
    marked = (fatal.join(_earliest(hang, "proc", "_by_proc"), on="proc", how="left",
                         maintain_order="left")
              .join(_earliest(hang, "file_id", "_by_file"), on="file_id", how="left",
                    maintain_order="left"))
    decided = ((pl.col("_by_proc") < pl.col("order")).fill_null(False)
               | (pl.col("_by_file") < pl.col("order")).fill_null(False)
               | _clearly_after(first, window)
               | (pl.col("ts_full").is_null() & (pl.col("order") > first["order"])))
    near = _near(first, window)
    abortish = _contains_any(ABORT_STEMS + REAPED_STEMS)
    teardown = (own | abortish & (decided | near)) & ~primary
    return marked.with_columns(_teardown=teardown, _undecided=teardown & ~own & ~decided
                               ).drop("_by_proc", "_by_file")


def _own_timeout(events: pl.DataFrame, fatal: pl.DataFrame) -> pl.Expr:
    """Rows that are torch taking a process down for a collective timeout of its own: the
    row holds the timeout, or the next line (its `what()`) does."""
    timeouts = events.filter(_contains_any(TIMEOUT_STEMS)).select(
        "file_id", (pl.col("line") - 1).alias("line"), pl.lit(True).alias("_timeout")).unique()
    after = fatal.select("file_id", "line").join(
        timeouts, on=["file_id", "line"], how="left", maintain_order="left"
    ).get_column("_timeout").fill_null(False)
    return _contains_any(TIMEOUT_STEMS) | pl.lit(after)


def _earliest(hang: pl.DataFrame, key: str, name: str) -> pl.DataFrame:
    """`key` -> the timeline position of its first hang line, as `name`."""
    return (hang.filter(pl.col(key).is_not_null()).group_by(key)
            .agg(pl.col("order").min().alias(name)))


def _clearly_after(first: dict[str, object], window: timedelta) -> pl.Expr:
    """Stamped later than the first hang line: by more than `window`, or (on its host, one
    clock) by any amount."""
    if first["ts_full"] is None:
        return pl.lit(False)
    ts, t0 = pl.col("ts_full"), pl.lit(first["ts_full"])
    same_host = pl.col("eff_host") == pl.lit(first["eff_host"], pl.String)
    return ((ts > t0 + window) | same_host & (ts > t0)).fill_null(False)


def _near(first: dict[str, object], window: timedelta) -> pl.Expr:
    """Stamped within `window` of the first hang line, on either side."""
    if first["ts_full"] is None:
        return pl.lit(False)
    gap = (pl.col("ts_full") - pl.lit(first["ts_full"])).abs()
    return (gap <= window).fill_null(False)
