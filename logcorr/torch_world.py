"""One torch world without a launch config: torch's ranks are world ranks unless the logs say
otherwise (a whole-set rule over the distinct key rows, see `resolve`).

A torch job (torchrun, srun, an RL framework's workers) prints each process's world rank:
`[rank3]:` before its lines, `[PG ID 0 PG GUID 0(default_pg) Rank 3]` in its c10d lines. Without
a launch config, the reason not to read them as world ranks is SGLang's native-DP replicas
(each replica is a torch world of its own: rank 3 twice). Their evidence in the logs is a
prefix whose TP rank comes with two DP ranks (`DP0 TP3` and `DP1 TP3`: TP restarts in each
replica; under attention DP each TP rank has one DP rank). Without that evidence one world is
assumed, the header says so, and

| what the logs show                                                       | torch rank N   |
|--------------------------------------------------------------------------|----------------|
| its lines come from one process: no two of them differ in host, PID or   | world rank N   |
| output stream (an srun task, a Ray actor, a pod), or not at the same time |                |
| two processes claim it at the same time (their stamped lines overlap, or | withdrawn, as  |
| a claim has no stamped line): on two hosts, PIDs or output streams       | a contradiction|
| SGLang pipeline stages (`PP1 TP3`: world rank = PP rank x TP size + TP)   | not assumed    |
| native-DP replicas (`DP0 TP3`, `DP1 TP3`)                                 | not assumed    |

A process SGLang's prefix names without a PP token is the world rank of its TP token (`TP3`
is world rank 3: the world is TP x PP, PP 1): the torch rank joins it, so a per-rank file of
both stays one process's. An `srun --label` task (`17: `) is a rank only when the logs show
one task per rank: every task whose lines name a rank name one, and no rank is named by two
tasks; its lines that name no rank are then that rank's (evidence `srun-task`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from logcorr.diagnose.ranges import ranges
from logcorr.topology import Topology

PROC = pl.UInt32()
_TASK = r"^task=\d+$"  # an srun --label stream by itself (not `task=3 default0`: torchrun's)


@dataclass
class TorchWorld:
    """The torch world assumed: the world ranks the logs name (but the withdrawn ones), and
    the srun tasks that are ranks (stream -> world rank)."""

    ranks: list[int]
    withdrawn: list[int] = field(default_factory=list)
    tasks: dict[str, int] = field(default_factory=dict)


def claimed_rank() -> pl.Expr:
    """The world rank a key row's line names: `[rankN]:`, else the default group's `Rank N`."""
    default_pg = pl.col("pg_desc").str.starts_with("default_pg").fill_null(False)
    return pl.coalesce(pl.col("torch_rank"),
                       pl.when(default_pg).then(pl.col("pg_rank")))


def default_pg_rank() -> pl.Expr:
    """The default group's `Rank N` of a key row (a world rank), null otherwise."""
    default_pg = pl.col("pg_desc").str.starts_with("default_pg").fill_null(False)
    return pl.when(default_pg).then(pl.col("pg_rank")).otherwise(None)


def assume(keys: pl.DataFrame, topology: Topology | None, combos: pl.DataFrame,
           spans: pl.DataFrame | None, notes: list[dict[str, object]]) -> TorchWorld | None:
    """The torch world of a set without a launch config (`keys`: key rows with `eff_host`;
    `combos`: the distinct prefix token rows; `spans`: `_key`, `_first`, `_last` of the key
    rows' stamped torch lines), or None when it is not assumed. The note and the
    contradiction (withdrawn ranks) are added to `notes` (a note is marked `note`: the
    header shows it, it is no contradiction)."""
    if topology is not None or not keys.height:
        return None
    claims = keys.with_columns(claimed_rank().alias("_rank")).filter(
        pl.col("_rank").is_not_null() & (pl.col("_rank") >= 0))
    if claims.height == 0 or _replicas(combos) or _stages(combos):
        return None
    withdrawn = _contested(claims, spans, notes)
    ranks = sorted(set(claims["_rank"].unique().to_list()) - set(withdrawn))
    seen = len(ranks) + len(withdrawn)
    detail = ("no launch config and no SGLang evidence of native-DP replicas: torch's ranks "
              "(`[rankN]:`, the default group's `Rank N`) are read as the world ranks of one "
              f"torch world ({seen} rank(s) seen; evidence torch-rank)")
    if withdrawn:
        detail += f"; but not ranks {ranges(withdrawn)} (see the contradiction)"
    notes.append({"kind": "torch-world-assumed", "count": seen, "detail": detail,
                  "file_id": None, "line": None, "note": True})
    return TorchWorld(ranks, withdrawn, _tasks(claims, withdrawn))


def with_world(table: pl.DataFrame, world: TorchWorld) -> pl.DataFrame:
    """The processes of a set without a topology with their world ranks: a prefix process
    without a PP token is the world rank of its TP token (SGLang's world is TP x PP) and takes
    that torch rank; a torch rank no such process holds is a process of its own. A rank two
    prefix processes could hold joins neither.

    >>> table = pl.DataFrame({"proc": [0], "p_pp": [None], "p_tp": [3], "tp_rank": [3],
    ...                       "world_rank": [None]}, schema={"proc": PROC, "p_pp": pl.Int32,
    ...                       "p_tp": pl.Int32, "tp_rank": pl.Int32, "world_rank": pl.Int32})
    >>> with_world(table, TorchWorld([3, 5])).select("proc", "tp_rank", "world_rank").rows()
    [(0, 3, 3), (1, None, 5)]
    """
    holders = (table.filter(pl.col("p_pp").is_null() & pl.col("p_tp").is_not_null())
               .group_by("p_tp").agg(pl.col("proc")))
    held = {int(tp): procs[0] for tp, procs in holders.iter_rows() if len(procs) == 1}
    shared = {int(tp) for tp, procs in holders.iter_rows() if len(procs) > 1}
    joined = pl.DataFrame({"proc": list(held.values()), "_world": list(held)},
                          schema={"proc": PROC, "_world": pl.Int32})
    table = (table.join(joined, on="proc", how="left", maintain_order="left")
             .with_columns(pl.coalesce("_world", "world_rank").alias("world_rank"))
             .drop("_world"))
    alone = [rank for rank in world.ranks if rank not in held and rank not in shared]
    rows = pl.DataFrame({"proc": range(table.height, table.height + len(alone)),
                         "world_rank": alone}, schema={"proc": PROC, "world_rank": pl.Int32})
    return pl.concat([table, rows], how="diagonal_relaxed").select(
        pl.col(name).cast(dtype) for name, dtype in table.schema.items())


def world_procs(frame: pl.DataFrame, processes: pl.DataFrame, world: TorchWorld
                ) -> pl.DataFrame:
    """`torch_proc` / `group_proc`: the process of the world rank a line names (`[rankN]:`,
    the default group's `Rank N`), for the ranks of the torch world not withdrawn."""
    held = (processes.filter(pl.col("world_rank").is_in(world.ranks))
            .group_by("world_rank").agg(pl.col("proc"))
            .filter(pl.col("proc").list.len() == 1))
    ranks = {int(r): int(p[0]) for r, p in held.iter_rows()}

    def mapped(rank: pl.Expr) -> pl.Expr:
        return rank.replace_strict(ranks, default=None, return_dtype=PROC)
    # (the default group's rank is the world rank too: evidence torch-rank; a line whose two
    # ranks disagree names no process, as any disagreeing evidence)
    return frame.with_columns(mapped(claimed_rank()).alias("torch_proc"),
                              mapped(default_pg_rank()).alias("group_proc"))


def task_procs(frame: pl.DataFrame, processes: pl.DataFrame, world: TorchWorld | None
               ) -> pl.DataFrame:
    """`srun-task`: a line of an `srun --label` task that is a rank (`TorchWorld.tasks`: one
    rank per task, one task per rank), when nothing else on it names a process."""
    if world is None or not world.tasks:
        return frame
    rank_proc = dict(processes.filter(pl.col("world_rank").is_not_null())
                     .select("world_rank", "proc").iter_rows())
    tasks = {stream: rank_proc[rank] for stream, rank in world.tasks.items()
             if rank in rank_proc}
    task_proc = pl.col("stream").replace_strict(tasks, default=None, return_dtype=PROC)
    take = pl.col("proc").is_null() & ~pl.col("conflict") & task_proc.is_not_null()
    return frame.with_columns(
        pl.when(take).then(task_proc).otherwise(pl.col("proc")).alias("proc"),
        pl.when(take).then(pl.lit("srun-task")).otherwise(pl.col("evidence")).alias("evidence"))


def _replicas(combos: pl.DataFrame) -> bool:
    """SGLang's native-DP replicas: a TP rank (in a PP stage) printed with two DP ranks."""
    with_dp = combos.filter(pl.col("p_dp").is_not_null())
    if with_dp.height == 0:
        return False
    per = with_dp.group_by("p_pp", "p_tp").agg(pl.col("p_dp").n_unique().alias("n"))
    return bool((per["n"] > 1).any())


def _stages(combos: pl.DataFrame) -> bool:
    """SGLang pipeline stages: a stage's world ranks need the TP size, which only a launch
    config gives."""
    return bool(combos.height) and combos["p_pp"].drop_nulls().len() > 0


_WHO = ("eff_host", "pid", "stream")


def _contested(claims: pl.DataFrame, spans: pl.DataFrame | None,
               notes: list[dict[str, object]]) -> list[int]:
    """The ranks two processes claim at the same time: two claims (host, PID, stream of the
    lines naming the rank) that differ where both are known, whose stamped lines overlap in
    time (a claim without a stamped line may overlap anything). Reported as a contradiction.

    >>> rows = pl.DataFrame({"_rank": [0, 0, 1], "eff_host": ["a", "b", "a"],
    ...                      "pid": [None, None, None], "stream": [None, None, None],
    ...                      "_key": [0, 1, 2], "_n": [3, 3, 3]})
    >>> _contested(rows, None, [])
    [0]
    """
    if spans is not None and "_key" in claims.columns:
        claims = claims.join(spans, on="_key", how="left")
    else:
        claims = claims.with_columns(_first=pl.lit(None, pl.Int64), _last=pl.lit(None, pl.Int64))
    who = (claims.group_by("_rank", *_WHO)
           .agg(pl.col("_first").min(), pl.col("_last").max(), pl.col("_n").sum())
           .filter(pl.len().over("_rank") > 1))  # (one claim per rank: nothing to compare)
    contested: dict[int, list[tuple[object, ...]]] = {}
    for (rank,), group in who.group_by("_rank"):
        rows = group.rows(named=True)
        pairs = [(a, b) for i, a in enumerate(rows) for b in rows[i + 1:]
                 if _differ(a, b) and _overlap(a, b)]
        if pairs:
            contested[int(rank)] = [tuple(a[k] for k in _WHO) for a, _ in pairs[:1]] + [
                tuple(b[k] for k in _WHO) for _, b in pairs[:1]]
    if not contested:
        return []
    ranks = sorted(contested)
    example = contested[ranks[0]]
    lines = int(claims.filter(pl.col("_rank").is_in(ranks))["_n"].sum())
    notes.append({
        "kind": "torch-rank-several-processes", "count": lines,
        "detail": (f"torch rank(s) {ranges(ranks)} are claimed at the same time by processes "
                   f"that differ in host, PID or output stream (rank {ranks[0]}: "
                   f"{_claim(example[0])} and {_claim(example[1])}): one torch world cannot "
                   "hold them (native-DP replicas, or two jobs' logs in one set), so their "
                   "lines are not attributed by torch rank"),
        "file_id": None, "line": None})
    return ranks


def _differ(a: dict[str, object], b: dict[str, object]) -> bool:
    return any(a[k] is not None and b[k] is not None and a[k] != b[k] for k in _WHO)


def _overlap(a: dict[str, object], b: dict[str, object]) -> bool:
    """Two claims' stamped lines overlap in time (a claim with no stamped line may overlap
    anything; its unstamped lines stand between its stamped ones)."""
    if a["_first"] is None or b["_first"] is None:
        return True
    return bool(a["_first"] <= b["_last"] and b["_first"] <= a["_last"])  # type: ignore[operator]


def _claim(who: tuple[object, ...]) -> str:
    said = [f"{name} {value}" for name, value in zip(("host", "PID", "stream"), who)
            if value is not None]
    return ", ".join(said) or "no host, PID or stream"


def _tasks(claims: pl.DataFrame, withdrawn: list[int]) -> dict[str, int]:
    """srun tasks that are ranks: one rank per task and one task per rank (else none)."""
    tasks = (claims.filter(pl.col("stream").str.contains(_TASK).fill_null(False)
                           & ~pl.col("_rank").is_in(withdrawn))
             .group_by("stream").agg(pl.col("_rank").unique()))
    if tasks.height == 0:
        return {}
    per_task = dict(tasks.iter_rows())
    flat = [rank for ranks in per_task.values() for rank in ranks]
    if any(len(ranks) != 1 for ranks in per_task.values()) or len(flat) != len(set(flat)):
        return {}
    return {str(stream): int(ranks[0]) for stream, ranks in per_task.items()}
