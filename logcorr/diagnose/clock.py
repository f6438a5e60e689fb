"""`clock-skew`: the same collective timing out at different times on different hosts.

Reads: torch's timeout lines with SeqNum, host and time. Cannot decide: which host's clock is
right; offers `--clock-offset` values relative to the earliest. The skew it measures also
widens the window within which lines of different hosts cannot be ordered (`order_window`)."""

from __future__ import annotations

import statistics
from datetime import timedelta

import polars as pl

from logcorr.diagnose.context import (
    SKEW_SECONDS,
    TIMEOUT_STEMS,
    Context,
    Finding,
    _contains_any,
)


def host_offsets(ctx: Context) -> dict[str, float]:
    """host -> seconds its clock runs after the earliest host's, from the median time at
    which each host's watchdogs fired on the same SeqNum of the same group."""
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
    return {h: statistics.median(v) for h, v in per_host.items()}


def order_window(ctx: Context) -> timedelta:
    """How far apart two stamped lines of different hosts must be for their order to be
    told: SKEW_SECONDS (whole-second stamps, clocks in sync) plus the largest skew the
    timeouts show."""
    skew = max((abs(o) for o in host_offsets(ctx).values()), default=0.0)
    return timedelta(seconds=SKEW_SECONDS + skew)


def clock_findings(ctx: Context) -> list[Finding]:
    """Hosts whose watchdogs fire on the same SeqNum at different times: their clocks differ."""
    offsets = host_offsets(ctx)
    skewed = {h: o for h, o in offsets.items() if abs(o) > SKEW_SECONDS}
    if not skewed:
        return []
    flags = " ".join(f"--clock-offset {h}={-o:g}" for h, o in sorted(skewed.items()))
    return [Finding("clock-skew", "info",
                    "the same collective timed out at different times on different hosts: "
                    + ", ".join(f"{h} {o:+.1f} s" for h, o in sorted(offsets.items()))
                    + f"; to align, pass {flags}")]
