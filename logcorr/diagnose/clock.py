"""`clock-skew`: the same collective timing out at different times on different hosts.

Reads: torch's timeout lines with SeqNum, host and time. Cannot decide: which host's clock is
right; offers `--clock-offset` values relative to the earliest."""

from __future__ import annotations

import statistics

import polars as pl

from logcorr.diagnose.context import (
    SKEW_SECONDS,
    TIMEOUT_STEMS,
    Context,
    Finding,
    _contains_any,
)


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
