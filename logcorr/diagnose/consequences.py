"""What followed from a root, folded into one record per kind of observation.

A hang's teardown can be hundreds of lines (an abort on every member, an exit code per child);
the report keeps one record per kind: how many lines, the first and last time, which
processes (world ranks, replicas, nodes) and a few sample lines. A row's kind is what its
text says it is (an abort, an exit code, the kill cascade, a watchdog, a collective timeout),
else the kind of the finding it came with (a later `crash`, an `init-hang` phase).

    {"kind", "summary", "count" (lines), "processes" (how many are named), "world_ranks",
     "replicas", "nodes", "unnamed" (lines that name no process), "first_ts", "last_ts",
     "samples": [{"file", "line", "text"}]}
"""

from __future__ import annotations

from typing import Any

import polars as pl
import regex

from logcorr.diagnose.context import (
    ABORT_STEMS,
    CASCADE_STEMS,
    LAUNCHER_EXIT_STEMS,
    REAPED_STEMS,
    SGLANG_WATCHDOG_STEMS,
    TIMEOUT_STEMS,
    Context,
    _contains_any,
    _person,
    _span,
    lines_in,
)
from logcorr.diagnose.ranges import ranges, world_ranks

KINDS = ("collective-hang", "watchdog-timeout", "crash", "init-hang", "abort", "exit-code",
         "kill-cascade")
_WORDS = {
    "collective-hang": "torch's watchdog timed out in a collective",
    "watchdog-timeout": "SGLang's watchdog fired",
    "crash": "failed after it",
    "init-hang": "stopped in a startup phase",
    "abort": "taken down by an abort (torch after the timeout, `Fatal Python error: Aborted`)",
    "exit-code": "a parent saw its child scheduler exit",
    "kill-cascade": "the SIGQUIT / kill cascade",
}
COLUMNS = ("order", "file_id", "line", "proc", "ts_full", "eff_host", "text", "_n")
SAMPLES = 3
_EXIT = regex.compile(r"(?:exit code|terminated with|exitcode:) (-?\d+)")
_SIGNALS = {"-6": "SIGABRT", "-9": "SIGKILL", "-11": "SIGSEGV", "-15": "SIGTERM"}


def observed_kind() -> pl.Expr:
    """The kind a row's own text says it is, null when it says none of these."""
    return (pl.when(_contains_any(REAPED_STEMS + LAUNCHER_EXIT_STEMS)).then(pl.lit("exit-code"))
            .when(_contains_any(ABORT_STEMS)).then(pl.lit("abort"))
            .when(_contains_any(CASCADE_STEMS)).then(pl.lit("kill-cascade"))
            .when(_contains_any(SGLANG_WATCHDOG_STEMS)).then(pl.lit("watchdog-timeout"))
            .when(_contains_any(TIMEOUT_STEMS)).then(pl.lit("collective-hang"))
            .otherwise(pl.lit(None, pl.String)))


def records(ctx: Context, parts: list[tuple[str, pl.DataFrame]]) -> list[dict[str, Any]]:
    """One record per kind from `parts` ((kind of the finding they came with, event rows)),
    each row counted once, in the order of KINDS."""
    frames = [rows.select(*COLUMNS).with_columns(_kind=pl.lit(kind))
              for kind, rows in parts if rows.height]
    if not frames:
        return []
    rows = (pl.concat(frames, how="vertical_relaxed").sort("order")
            .unique(["file_id", "line"], keep="first", maintain_order=True)
            .with_columns(_kind=pl.coalesce(observed_kind(), pl.col("_kind"))))
    return [_record(ctx, kind, group) for kind in KINDS
            if (group := rows.filter(pl.col("_kind") == kind)).height]


def _record(ctx: Context, kind: str, rows: pl.DataFrame) -> dict[str, Any]:
    """The record of one kind: counts, spread, times, samples and its one-line summary."""
    procs = sorted({int(p) for p in rows["proc"].drop_nulls().to_list()})
    people = [_person(ctx, p) for p in procs]
    nodes = sorted({int(p["node_rank"]) for p in people if p.get("node_rank") is not None}
                   | _nodes_of_hosts(ctx, rows.filter(pl.col("proc").is_null())))
    unnamed = lines_in(rows.filter(pl.col("proc").is_null()))
    first_ts, last_ts = _span(rows["ts_full"])
    record = {"kind": kind, "count": lines_in(rows), "processes": len(procs),
              "world_ranks": sorted({int(p["world_rank"]) for p in people
                                     if p.get("world_rank") is not None}),
              "replicas": sorted({int(p["replica"]) for p in people
                                  if p.get("replica") is not None}),
              "nodes": nodes, "unnamed": unnamed, "first_ts": first_ts, "last_ts": last_ts,
              "samples": _samples(ctx, rows)}
    record["summary"] = _summary(ctx, kind, record, people, rows)
    return record


def _summary(ctx: Context, kind: str, record: dict[str, Any], people: list[dict[str, Any]],
             rows: pl.DataFrame) -> str:
    """`SGLang's watchdog fired: 8 processes (world ranks 0–7; node 0), 8 line(s), 10:06:05
    to 10:06:05`."""
    who = []
    if people:
        several = ctx.topology is not None and ctx.topology.sizes.replicas > 1
        who.append(f"{len(people)} process(es) ({world_ranks(people, several)})")
    if record["unnamed"]:
        who.append(f"{record['unnamed']} line(s) that name no process")
    where = f"node(s) {ranges(record['nodes'])}" if record["nodes"] else ""
    words = _WORDS[kind]
    if kind == "exit-code" and rows.select(_contains_any(LAUNCHER_EXIT_STEMS).all()).item():
        words = "a launcher saw its child exit"  # (srun, torchrun: no scheduler's parent)
    text = f"{words}: " + " and ".join(who or ["no process named"])
    text += f", on {where}" if where else ""
    if kind == "exit-code":
        text += f"; exit codes {_exit_codes(rows)}"
    if record["first_ts"]:
        text += (f"; {record['first_ts']}" + (f" to {record['last_ts']}"
                                               if record["last_ts"] != record["first_ts"] else ""))
    return text


def _exit_codes(rows: pl.DataFrame) -> str:
    """`-6 (SIGABRT): 15, -9 (SIGKILL): 1`: the exit codes the parents' lines give, how
    often."""
    counts: dict[str, int] = {}
    for text, repeats in rows.select("text", "_n").iter_rows():
        found = _EXIT.search(str(text))
        if found:
            counts[found.group(1)] = counts.get(found.group(1), 0) + int(repeats)
    return ", ".join(f"{code}" + (f" ({_SIGNALS[code]})" if code in _SIGNALS else "")
                     + f": {n}" for code, n in sorted(counts.items(), key=lambda kv: -kv[1])
                     ) or "not given"


def _samples(ctx: Context, rows: pl.DataFrame) -> list[dict[str, Any]]:
    """The first rows that say different things (digits aside), at most SAMPLES of them."""
    shaped = rows.with_columns(_shape=pl.col("text").str.replace_all(r"\d+", "#"))
    picked = shaped.unique("_shape", keep="first", maintain_order=True).head(SAMPLES)
    return [{"file": ctx.files.get(f, "?"), "line": int(n), "text": str(t)[:300]}
            for f, n, t in picked.select("file_id", "line", "text").iter_rows()]


def _nodes_of_hosts(ctx: Context, rows: pl.DataFrame) -> set[int]:
    """The nodes of the hosts of rows that name no process (a host whose processes' lines
    all say one node)."""
    nodes: dict[str, set[int]] = {}
    for person in ctx.people.values():
        if person.get("host") and person.get("node_rank") is not None:
            nodes.setdefault(str(person["host"]), set()).add(int(person["node_rank"]))
    hosts = set(rows["eff_host"].drop_nulls().to_list())
    return {next(iter(nodes[h])) for h in hosts if len(nodes.get(h, ())) == 1}
