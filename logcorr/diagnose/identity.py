"""Which process a fatal row names when the attribution gave it none.

A parent's line names the child it saw die by PID (`Subprocess scheduler_2 (pid=41233) crashed
…`, `Scheduler or DataParallelController 7002 terminated with -9`). A torch or SGLang line
names its own process by a rank tag: torch's `[rank6]:` prefix (the world rank), the default
group's `[PG ID 0 PG GUID 0(default_pg) Rank 6]` (the world rank again), SGLang's prefix
`[… DP3 TP6 EP6]`. A hard wrap, a glued progress bar or a wrapper in front can keep the line
from being attributed; the tag is still in its text. Tags are read from the row and, for the
few rows that may be a root, from the pieces of its record up to the next one (a hard-wrapped
line is one record). A tag names a process only when every tag of the line agrees on one, it
fits one process (native-DP replicas repeat world ranks: the line's host must pick the
replica) and that process's host is the line's.

Cannot decide: a rank tag of a group other than the default one (`[PG ID 2 … (tp:device)
Rank 3]` is a rank within that group), `[Rank 3]` without a group, or any tag without a
launch config.
"""

from __future__ import annotations

from typing import Any

import polars as pl
import regex

from logcorr.diagnose.context import Context

# the child the main process / DP controller / launcher saw die, by its PID
_DEAD_PID = r"(?:\(pid=|DataParallelController )(\d+)\)? (?:crashed|terminated)"
_RANK = regex.compile(r"\[rank(\d+)\]:")
_DEFAULT_PG = regex.compile(r"PG GUID \d+\(default_pg\) Rank (\d+)\]")
_PREFIX = regex.compile(r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)? "
                        r"((?:[A-Z_]+\d+ )*[A-Z_]+\d+)\]")
# the rows whose records are read for their tags (a root is among the first ones)
RECORD_ROWS = 64
# the narrowest column a hard wrap is taken to cut lines at
WRAP_MIN = 24


def name_rows(ctx: Context, rows: pl.DataFrame, read_records: bool = False) -> pl.DataFrame:
    """`rows` (event rows) with `proc` filled where it was null and the line names its
    process: by the PID a parent's line gives, else by the rank tags of the line (and, with
    `read_records`, of its record's pieces)."""
    return _named_by_tag(ctx, _named_by_pid(ctx, rows), read_records)


def _named_by_pid(ctx: Context, fatal: pl.DataFrame) -> pl.DataFrame:
    """Unnamed `Subprocess scheduler_2 (pid=41233) crashed …` / `… DataParallelController 7002
    terminated with -9` lines take the process whose PID that is (when one process has it)."""
    by_pid: dict[int, list[int]] = {}
    for proc, person in ctx.people.items():
        if person.get("pid") is not None:
            by_pid.setdefault(int(person["pid"]), []).append(proc)
    unique = {pid: procs[0] for pid, procs in by_pid.items() if len(procs) == 1}
    if not unique or fatal.height == 0:
        return fatal
    table = pl.DataFrame({"_pid": list(unique), "_proc": list(unique.values())},
                         schema={"_pid": pl.Int64, "_proc": pl.UInt32})
    found = fatal.with_columns(pl.col("text").str.extract(_DEAD_PID, 1).cast(pl.Int64,
                                                                               strict=False)
                               .alias("_pid")).join(table, on="_pid", how="left",
                                                    maintain_order="left")
    return found.with_columns(pl.coalesce("proc", "_proc").alias("proc")).drop("_pid", "_proc")


def _named_by_tag(ctx: Context, rows: pl.DataFrame, read_records: bool) -> pl.DataFrame:
    """Unnamed rows whose text (or record) carries rank tags that agree on one process."""
    if ctx.topology is None or rows.height == 0 or rows["proc"].null_count() == 0:
        return rows
    unnamed = rows.with_row_index("_i").filter(pl.col("proc").is_null())
    pieces = _record_pieces(ctx, unnamed.head(RECORD_ROWS)) if read_records else {}
    hosts = _node_hosts(ctx)
    found: dict[int, int] = {}
    for row in unnamed.iter_rows(named=True):
        whole, given = pieces.get((row["file_id"], row["record"], row["line"]), ("", set()))
        text = f"{row['text']}{row.get('_next') or ''}\n{whole}"
        proc = tagged(ctx, text, row.get("eff_host") or row.get("host"), hosts)
        if proc is not None and given <= {proc}:  # (no piece the attribution gave another)
            found[int(row["_i"])] = proc
    if not found:
        return rows
    table = pl.DataFrame({"_i": list(found), "_tag": list(found.values())},
                         schema={"_i": pl.UInt32, "_tag": pl.UInt32})
    return (rows.with_row_index("_i").join(table, on="_i", how="left", maintain_order="left")
            .with_columns(pl.coalesce("proc", "_tag").alias("proc")).drop("_i", "_tag"))


def tagged(ctx: Context, text: str, host: str | None,
           hosts: dict[int, str] | None = None) -> int | None:
    """The one process the rank tags in `text` name, None when they name none, disagree, or
    fit more than one (or a process on another host than `host`).

    A worked example, TP8 with two native-DP replicas on nodes 0 and 1: `[rank6]:` fits
    world rank 6 of replica 0 (process 6, node 0) and of replica 1 (process 14, node 1); on a
    line of host gpu-node-1 it is process 14."""
    topology = ctx.topology
    if topology is None:
        return None
    world, replicas = topology.sizes.world, topology.sizes.replicas
    hosts = _node_hosts(ctx) if hosts is None else hosts
    fits: set[int] | None = None
    for pattern in (_RANK, _DEFAULT_PG):
        for found in pattern.finditer(text):
            rank = int(found.group(1))
            if rank >= world:
                return None
            ranks = {r * world + rank for r in range(replicas)}
            fits = ranks if fits is None else fits & ranks
    for found in _PREFIX.finditer(text):
        same = {i for i, p in enumerate(topology.processes) if p.prefix.strip() == found.group(1)}
        fits = same if fits is None else fits & same
    if not fits:
        return None
    if len(fits) > 1 and host:  # (native-DP replicas: the one on the line's host)
        fits = {p for p in fits if hosts.get(topology.processes[p].node_rank) == host}
    if len(fits) != 1:
        return None
    proc = fits.pop()
    known = ctx.people.get(proc, {}).get("host")
    return None if known and host and known != host else proc


def _node_hosts(ctx: Context) -> dict[int, str]:
    """node rank -> the host its processes' lines show (when they agree)."""
    seen: dict[int, set[str]] = {}
    for person in ctx.people.values():
        if person.get("node_rank") is not None and person.get("host"):
            seen.setdefault(int(person["node_rank"]), set()).add(str(person["host"]))
    return {node: hosts.pop() for node, hosts in seen.items() if len(hosts) == 1}


def _record_pieces(ctx: Context, rows: pl.DataFrame
                   ) -> dict[tuple[Any, Any, Any], tuple[str, set[int]]]:
    """(file_id, record, line) of each row -> the raw text of the hard-wrapped line it is a
    piece of (`wrapped_line`), and the processes the attribution gave any of those pieces."""
    keys = rows.filter(pl.col("record").is_not_null()).select("file_id", "record").unique()
    if keys.height == 0:
        return {}
    wanted = (pl.col("file_id").is_in(keys["file_id"].unique().implode())
              & pl.col("record").is_in(keys["record"].unique().implode()))
    found = (ctx.rows_of(keys["file_id"].unique().to_list()).filter(wanted)
             .select(pl.col("file_id").cast(pl.UInt32), pl.col("record").cast(pl.UInt32),
                             pl.col("line").cast(pl.UInt32), pl.col("part").cast(pl.UInt16),
                             pl.col("proc").cast(pl.UInt32), "text")
             .join(keys.lazy(), on=["file_id", "record"])
             .group_by("file_id", "record", "line").agg(pl.col("text").sort_by("part").str.join(""),
                                                       pl.col("proc").drop_nulls().first())
             .sort("file_id", "record", "line").collect())
    pieces: dict[tuple[Any, Any], list[tuple[int, str, int | None]]] = {}
    for file_id, record, line, text, proc in found.iter_rows():
        pieces.setdefault((file_id, record), []).append((int(line), str(text), proc))
    out = {}
    for file_id, record, line in rows.select("file_id", "record", "line").iter_rows():
        mine = pieces.get((file_id, record), [])
        index = next((i for i, (n, _, _) in enumerate(mine) if n == line), None)
        if index is not None:
            first, last = wrapped_line([len(t) for _, t, _ in mine], index)
            out[(file_id, record, line)] = ("".join(t for _, t, _ in mine[first:last + 1]),
                                            {int(p) for _, _, p in mine[first:last + 1]
                                             if p is not None})
    return out


def wrapped_line(widths: list[int], index: int) -> tuple[int, int]:
    """(first, last) of the pieces that a hard wrap at a fixed column cut the line holding
    piece `index` into (`widths`: the pieces' lengths in file order): a run of pieces as long
    as the column (at least WRAP_MIN) and the piece that ends the line.

    >>> wrapped_line([12, 40, 40, 16, 30], 2)   # pieces 1-3: one line wrapped at 40
    (1, 3)
    >>> wrapped_line([12, 40, 40, 16, 30], 3)
    (1, 3)
    >>> wrapped_line([40, 40, 16], 0)
    (0, 2)
    >>> wrapped_line([12, 20, 18], 2)           # no wrap: the piece alone
    (2, 2)
    """
    if index > 0 and widths[index - 1] >= max(widths[index], WRAP_MIN):
        width = widths[index - 1]  # (a piece inside the run, or the one that ends it)
    elif index + 1 < len(widths) and widths[index + 1] <= widths[index] >= WRAP_MIN:
        width = widths[index]  # (the head of a wrapped line)
    else:
        return index, index
    first = last = index
    while first > 0 and widths[first - 1] == width:
        first -= 1
    while last + 1 < len(widths) and widths[last] == width >= widths[last + 1]:
        last += 1
    return first, last
