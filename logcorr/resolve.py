"""Parsed lines x Topology -> the process of every line, with the evidence used.

Evidence is combined, never guessed (strongest first):

| evidence      | what it rests on                                                             |
|---------------|------------------------------------------------------------------------------|
| prefix        | the line's SGLang rank tokens match exactly one process of the topology      |
| nccl-device   | NCCL `host:pid:tid [cudaDev]` on the process's main thread: host -> node,    |
|               | cudaDev -> gpu_id -> the one process on that (node, gpu_id)                  |
| gpu-prefix    | SGLang 0.2.x `[gpu=N]`: gpu_id N on the line's node (host -> node, or the    |
|               | only node) -> the one process there                                          |
| pid           | a (host, pid) that another line tied to one process (py-spy's `Pyspy dump    |
|               | for PID n` on a prefixed line, `Process n: sglang::scheduler_TP3`, NCCL)      |
| torch-rank    | torch's `[rankN]:` is the WORLD rank; unique only without native-DP replicas |
| group-rank    | `[PG … (tp:device) Rank r]` -> member r of the group's only instance;        |
|               | `[Gloo] Rank r is connected to n peer ranks` -> member r of the n+1 instance |
|               | holding the line's stream's processes                                        |
| continuation  | an untagged line of the grammar of the one record of that grammar open in    |
|               | its stream whose process is known (see `_grammar_records`)                   |
| file          | every identified line of a per-process file names the same process           |

Direct evidence on one line that disagrees leaves the line unattributed and is reported as a
contradiction, as is a prefix no process of the topology prints (a `TP20` under tp_size=16).
Without a topology, each distinct prefix is its own process with only the ranks it prints.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import polars as pl

from logcorr.formats.misc import CANN_CHAINS
from logcorr.formats.python import OPENS
from logcorr.model import COORDINATES
from logcorr.topology import Topology

PREFIX_COLUMNS: dict[str, str] = {
    "p_dp": "DP", "p_pp": "PP", "p_attn_cp": "ATTN_CP", "p_moe_dp": "MOE_DP", "p_tp": "TP",
    "p_ep": "EP",
}
# Without a topology, the ranks a prefix prints are all that is known of its process.
_TOKEN_COORDINATES = {"p_dp": "dp_rank", "p_pp": "pp_rank", "p_attn_cp": "attn_cp_rank",
                      "p_moe_dp": "moe_dp_rank", "p_tp": "tp_rank", "p_ep": "moe_ep_rank"}
_ROLE_TITLES = {"sglang::data_parallel_controller": "dp_controller",
                "sglang::detokenizer": "detokenizer", "sglang::tokenizer_worker": "tokenizer_worker"}
_PROC = pl.UInt32()


# --------------------------------------------------------------------------- process table


def process_table(topology: Topology | None, parsed: pl.DataFrame) -> pl.DataFrame:
    """proc id -> coordinates and the prefix tokens it prints (null when not printed)."""
    if topology is not None:
        rows = []
        for index, process in enumerate(topology.processes):
            row: dict[str, object] = {"proc": index}
            row.update({name: getattr(process, name) for name in COORDINATES})
            printed = process.prefix_values()
            row.update({col: printed.get(tok) for col, tok in PREFIX_COLUMNS.items()})
            rows.append(row)
        return pl.DataFrame(rows, schema=_process_schema(), orient="row"
                            ) if rows else _empty_processes()
    combos = _prefix_combos(parsed)
    if "proctitle" in parsed.columns:  # a process known only by its title is a process too
        titles = parsed.get_column("proctitle").drop_nulls().unique()
        if titles.len():
            combos = pl.concat([combos, _prefix_combos(_title_tokens(titles))]).unique().sort(
                list(PREFIX_COLUMNS), nulls_last=False)
    combos = combos.with_columns(pl.int_range(pl.len(), dtype=_PROC).alias("proc"))
    return combos.with_columns(
        *(pl.col(col).alias(coord) for col, coord in _TOKEN_COORDINATES.items()),
        *(pl.lit(None, pl.Int32).alias(c) for c in COORDINATES if c not in
          _TOKEN_COORDINATES.values()),
    ).select(list(_process_schema()))


def _process_schema() -> dict[str, pl.DataType]:
    schema: dict[str, pl.DataType] = {"proc": _PROC}
    schema.update({name: pl.Int32() for name in COORDINATES})
    schema.update({col: pl.Int32() for col in PREFIX_COLUMNS})
    return schema


def _empty_processes() -> pl.DataFrame:
    return pl.DataFrame(schema=_process_schema())


def _prefix_combos(frame: pl.DataFrame) -> pl.DataFrame:
    cols = list(PREFIX_COLUMNS)
    has_any = pl.any_horizontal(pl.col(c).is_not_null() for c in cols)
    return frame.filter(has_any).select(cols).unique().sort(cols, nulls_last=False)


def _without_dp(topology: Topology | None) -> bool:
    return (topology is not None and topology.sizes.replicas == 1
            and topology.sizes.attn_dp == 1)


def _router_dp(topology: Topology | None, combos: pl.DataFrame) -> bool:
    """SGLang prints a DP token under a config without DP only when SGLANG_DP_RANK is set
    (one server per DP rank, launched for a router). When the whole set prints one DP value,
    the logs are one such server and the token is a label; several values are several servers,
    which one topology cannot describe (left to the prefix contradiction)."""
    if not _without_dp(topology) or combos.height == 0:
        return False
    return combos.get_column("p_dp").drop_nulls().n_unique() == 1


def _match_combos(topology: Topology | None, processes: pl.DataFrame,
                  combos: pl.DataFrame, ignore_dp: bool = False) -> pl.DataFrame:
    """Each distinct printed token combination -> the one process it names, or null
    (`ignore_dp`: the DP token is a router label, see `_router_dp`).

    Runs once per distinct combination (a few hundred at most), not per line.
    """
    procs: list[int | None] = []
    for combo in combos.iter_rows(named=True):
        criteria = {PREFIX_COLUMNS[c]: v for c, v in combo.items()
                    if v is not None and not (ignore_dp and c == "p_dp")}
        if topology is None:
            match = processes.filter(*(pl.col(c).eq_missing(combo[c]) for c in PREFIX_COLUMNS))
            procs.append(int(match["proc"][0]) if match.height == 1 else None)
            continue
        found = topology.select(criteria)
        procs.append(topology.processes.index(found[0]) if len(found) == 1 else None)
    return combos.with_columns(pl.Series("combo_proc", procs, dtype=_PROC))


def _title_tokens(titles: pl.Series) -> pl.DataFrame:
    """`sglang::scheduler_DP0_TP0_EP0` -> the prefix token columns. Tokens are joined by `_`,
    which `ATTN_CP` and `MOE_DP` also hold: those are closed up first, so the `_DP1` inside
    `MOE_DP1` is not read as a DP rank."""
    frame = titles.to_frame("proctitle")
    closed = pl.col("proctitle").str.replace_all("ATTN_CP", "ATTNCP", literal=True).str.replace_all(
        "MOE_DP", "MOEDP", literal=True)
    return frame.with_columns(
        closed.str.extract(rf"(?:^|_){token.replace('_', '')}(\d+)(?:_|$)")
        .cast(pl.Int32, strict=False).alias(col)
        for col, token in PREFIX_COLUMNS.items()
    )


def _attach(frame: pl.DataFrame, table: pl.DataFrame, on: list[str],
            keys: dict[str, pl.Expr] | None = None, nulls_equal: bool = False) -> pl.DataFrame:
    """`frame` plus the other columns of `table` (unique on `on`): a left join of the key
    columns only, so the frame's many other columns are not copied. `keys` computes key
    columns that `frame` does not hold."""
    computed = keys or {}
    left = frame.select(computed[c].alias(c) if c in computed else pl.col(c) for c in on)
    joined = left.join(table, on=on, how="left", maintain_order="left", nulls_equal=nulls_equal)
    return frame.with_columns(joined.drop(on))


# --------------------------------------------------------------------------- main entry
#
# Attribution runs in two steps so that a log set never has to be in memory at once:
#
# 1. `local_columns` (per chunk of lines): what a line says by itself - its role from message
#    stems, whether it is an NCCL main-thread line, whether it opens an exception record; and
#    `key_rows`, its distinct KEY_COLUMNS. Every whole-set rule (a PID tied to a process in one
#    file applies in all; a host's node; a communicator's members) depends on a line only
#    through those columns, so
# 2. `resolve_keys` runs the rules once on the distinct key rows of the whole set (a few
#    thousand, whatever the number of lines), and `attribute` (per chunk again) joins the
#    answer back on KEY_COLUMNS and adds what depends on the line's neighbours: continuation lines
#    and files that belong to one process.

KEY_COLUMNS: tuple[str, ...] = (
    "file_id", *PREFIX_COLUMNS, "proctitle", "host", "source", "_main", "device_id", "link_pid",
    "p_pid", "pid", "comm_id", "comm_rank", "comm_nranks", "torch_rank", "pg_desc", "pg_rank",
    "gloo_rank", "gloo_size",
    "role", "server_args", "stream",
)


@dataclass
class Attribution:
    """What the whole set says about each distinct key row (see KEY_COLUMNS)."""

    table: pl.DataFrame  # KEY_COLUMNS -> proc, evidence, conflict, role, eff_host
    processes: pl.DataFrame  # proc -> coordinates (the topology's, or what prefixes print)
    file_procs: pl.DataFrame  # file_id -> file_proc: a file that belongs to one process
    contradictions: list[dict[str, object]] = field(default_factory=list)
    host_nodes: dict[str, int] = field(default_factory=dict)
    # file_proc, pg_rank: every group-local rank each process has (None: no topology)
    local_ranks: pl.DataFrame | None = None
    shared_files: list[int] = field(default_factory=list)  # files naming processes, no one's own


def local_columns(parsed: pl.DataFrame) -> pl.DataFrame:
    """Add what each line says by itself: `role` from message stems, `_main` (an NCCL line of
    the process's main thread) and `_exc` (opens an exception record)."""
    frame = _stem_roles(parsed)
    starts = pl.col("starts_record").fill_null(False)
    exc = pl.when(starts).then(pl.col("text")).str.contains(_EXCEPTION_HEADER).fill_null(False)
    return frame.with_columns(
        ((pl.col("source") == "nccl") & (pl.col("tid") == pl.col("pid"))).fill_null(False)
        .alias("_main"),
        exc.alias("_exc"))


def key_rows(frame: pl.DataFrame) -> pl.DataFrame:
    """The distinct key rows of a chunk (after `local_columns`), with their line counts and
    first line."""
    # (a column null throughout splits no group: grouping by the others costs a third less)
    live = [c for c in KEY_COLUMNS if frame.get_column(c).null_count() < frame.height]
    if not live:
        live = ["file_id"]
    return (frame.group_by(live).agg(pl.len().alias("_n"), pl.col("line").min())
            .with_columns(pl.lit(None, frame.schema[c]).alias(c)
                          for c in KEY_COLUMNS if c not in live)
            .select(*KEY_COLUMNS, "_n", "line"))


def merge_key_rows(parts: list[pl.DataFrame]) -> pl.DataFrame:
    """Key rows of several chunks as one table, in (file, first line) order."""
    return (pl.concat(parts).group_by(KEY_COLUMNS)
            .agg(pl.col("_n").sum(), pl.col("line").min()).sort("file_id", "line"))


def resolve_keys(keys: pl.DataFrame, topology: Topology | None,
                 file_nodes: dict[int, int] | None = None) -> Attribution:
    """Attribute each distinct key row (from `merge_key_rows`) to a process.

    `file_nodes` maps a file to the node_rank its server_args line names.
    """
    keys = keys.with_row_index("_k")
    frame = keys
    processes = process_table(topology, frame)
    contradictions: list[dict[str, object]] = []
    frame = _by_prefix(frame, topology, processes, contradictions)
    frame = _file_hosts(frame)
    host_nodes = _host_nodes(frame, topology, processes, file_nodes or {}, contradictions)
    frame = _by_device(frame, topology, processes, host_nodes)
    frame = _by_pid(frame, topology, processes, contradictions)
    frame = _by_communicator(frame, topology)
    frame = _by_torch_rank(frame, topology, contradictions)
    frame = _by_only_scheduler(frame, topology)
    frame = _combine_direct(frame, contradictions)
    frame = _by_gloo(frame, topology)
    frame = _title_roles(frame)
    # the rules rewrite some key columns (role); the table keeps the key as the lines have it
    # (`_key`: the core's number of the key row, when it numbered them)
    numbered = ["_key"] if "_key" in keys.columns else []
    table = keys.select("_k", *KEY_COLUMNS, *numbered).join(
        frame.select("_k", "proc", "evidence", "conflict", pl.col("role").alias("_role"),
                     "eff_host"), on="_k").drop("_k")
    files = _files(frame)
    file_procs = _file_procs(files)
    return Attribution(table, processes, file_procs, contradictions, host_nodes,
                       _local_ranks(topology), _shared_files(files, file_procs))


def attribute(chunk: pl.DataFrame, attribution: Attribution, crowded: pl.DataFrame,
              ghost: pl.DataFrame | None = None) -> pl.DataFrame:
    """The process of every row of `chunk` (after `local_columns`, in file order).

    `ghost` is the header row of the record still open at the end of the previous chunk (with
    its `record` number): it is put in front so continuation lines see their header, and is
    dropped again. `crowded` lists the seconds of a file and stream (`crowded_headers`) in
    which exception headers of several processes stand: their tracebacks may interleave.
    """
    frame = chunk.with_columns(pl.lit(False).alias("_ghost"), pl.lit(None, pl.UInt32)
                               .alias("_true_record"))
    if ghost is not None:
        state = [c for c in _STATE if c in ghost.columns]
        frame = pl.concat([ghost.select(*chunk.columns, *state).with_columns(
            pl.lit(True).alias("_ghost"), ghost["record"].cast(pl.UInt32).alias("_true_record")),
            frame], how="diagonal_relaxed")
    joined = _key_join(frame, attribution.table)
    frame = frame.with_columns(joined.drop(KEY_COLUMNS)).with_columns(
        pl.col("_role").alias("role")).drop("_role")
    frame = _by_continuation(frame, crowded, attribution.shared_files)
    frame = _by_file(frame, attribution.file_procs, attribution.local_ranks)
    frame = _explain_unattributed(frame)
    return frame


def _key_join(frame: pl.DataFrame, table: pl.DataFrame) -> pl.DataFrame:
    """`frame`'s key columns left-joined to the whole-set table (a key row matches one row of
    it at most, nulls matching nulls). A key column null throughout the chunk matches only the
    table's rows null there: the join runs on the other columns, against those rows (20 -> 8
    ms on a 41k-row chunk)."""
    keys = frame.select(KEY_COLUMNS)
    dead = [c for c in KEY_COLUMNS if keys.get_column(c).null_count() == keys.height]
    if not dead or len(dead) == len(KEY_COLUMNS):
        return keys.join(table, on=KEY_COLUMNS, how="left", maintain_order="left",
                         nulls_equal=True)
    live = [c for c in KEY_COLUMNS if c not in dead]
    right = table.filter(pl.all_horizontal(pl.col(c).is_null() for c in dead)).drop(dead)
    return keys.join(right, on=live, how="left", maintain_order="left", nulls_equal=True)


def next_ghost(chunk: pl.DataFrame, ghost: pl.DataFrame | None, attributed: pl.DataFrame
               ) -> pl.DataFrame | None:
    """The raw rows (of `chunk`, or of `ghost` itself) heading the records still open at the
    end of `attributed` (the result of `attribute(chunk, …, ghost)`), with their record
    numbers, in record order: the header of the last file's open record and, per output stream
    of that file (wrapper stream or none), its latest header, the block its lines stand in and
    its latest raw record of each grammar; with the state of each stream (`_STATE`: open raw
    records, whether they interleave) and of each record (its process so far)."""
    if attributed.height == 0:
        return ghost
    files = attributed.get_column("file_id")
    # (the last file's rows: the rows are in file order, so a slice, not a filtered copy)
    start = 0 if files[0] == files[-1] else int(files.search_sorted(files[-1], side="left"))
    mine = (attributed.select(pl.int_range(pl.len(), dtype=pl.UInt32).alias("_at"), "file_id",
                              "stream", "starts_record", "_bh", "_act", "_catf",
                              *(f"_last_{g}" for g in _RAW_GRAMMARS),
                              *(f"_c_{g}" for g in (*_RAW_GRAMMARS, "at")),
                              *(f"_x_{g}" for g in _RAW_GRAMMARS))
            .slice(start))
    heads = {int(attributed.get_column("_file_head")[-1])}
    started = pl.col("starts_record").fill_null(False)
    if mine.get_column("stream").null_count() == mine.height:  # one stream: its last rows
        ends = mine.tail(1)
        heads |= set(mine.get_column("_at").filter(mine.select(started).to_series())
                     .tail(1).to_list())
    else:
        ends = mine.group_by("stream").agg(pl.all().last())
        heads |= set(mine.filter(started).group_by("stream").agg(pl.col("_at").max())
                     .get_column("_at").to_list())
    for column in ("_bh", *(f"_last_{g}" for g in _RAW_GRAMMARS)):
        heads |= {int(v) for v in ends.get_column(column).drop_nulls().to_list()}
    at = pl.Series("_at", sorted(heads), dtype=pl.UInt32)
    raw = chunk if ghost is None else pl.concat([ghost.select(chunk.columns), chunk])
    rows = raw.select(chunk.columns)[at].with_columns(
        attributed.get_column("record").gather(at).cast(pl.UInt32).alias("record"),
        at, attributed.get_column("stream").gather(at).alias("_stream"),
        attributed.get_column("_dem").gather(at).alias("_s_dem"),
        attributed.get_column("_copen").gather(at).alias("_s_copen"))
    # each carried record's process so far
    known = (attributed.select("_K", "_kid", "_kidc").with_row_index("_r")
             .filter(pl.col("_K").is_in(at.implode())).group_by("_K")
             .agg(pl.col("_kid").last().alias("_s_id"), pl.col("_kidc").last().alias("_s_idc")))
    rows = rows.join(known, left_on="_at", right_on="_K", how="left", maintain_order="left")
    # each stream's state, on its first carried row; the block's on the block's header
    first = rows.group_by("_stream").agg(pl.col("_at").min())
    seeds = ends.select(
        pl.col("stream").alias("_stream"),
        *(pl.col(f"_c_{g}").cast(pl.Int32).alias(f"_s_{g}") for g in _RAW_GRAMMARS),
        *((pl.col(f"_x_{g}") & (pl.col(f"_c_{g}") > 0)).alias(f"_s_x{g}") for g in _RAW_GRAMMARS),
        pl.col("_c_at").cast(pl.Int32).alias("_s_at"), pl.col("_catf").alias("_s_prev")).join(
        first, on="_stream", nulls_equal=True)
    rows = rows.join(seeds.drop("_stream"), on="_at", how="left", maintain_order="left")
    blocks = ends.select(pl.col("_bh").alias("_at"), pl.col("_act").alias("_s_act")).drop_nulls(
        "_at")
    rows = rows.join(blocks, on="_at", how="left", maintain_order="left")
    return rows.drop("_at", "_stream").with_columns(
        pl.col(name).cast(dtype) for name, dtype in _STATE.items())


def _by_prefix(frame: pl.DataFrame, topology: Topology | None, processes: pl.DataFrame,
               contradictions: list[dict[str, object]]) -> pl.DataFrame:
    """`prefix_proc` from the SGLang rank tokens; `title_proc` from printed process titles."""
    cols = list(PREFIX_COLUMNS)
    found = _prefix_combos(frame)
    label = _router_dp(topology, found)
    combos = _match_combos(topology, processes, found, ignore_dp=label)
    frame = _attach(frame, combos, cols, nulls_equal=True).rename({"combo_proc": "prefix_proc"})
    has_tokens = pl.any_horizontal(pl.col(c).is_not_null() for c in cols)
    outside = has_tokens & pl.col("prefix_proc").is_null()
    if frame.select(outside.any()).item():
        bad = frame.filter(outside)
        first = bad.row(0, named=True)
        detail = (f"{_lines(bad)} line(s) carry rank tokens no process of the topology "
                  f"prints, e.g. {_token_text(first)}")
        if _without_dp(topology) and first["p_dp"] is not None:
            detail += ("; a DP token without DP in the config comes from SGLANG_DP_RANK (one "
                       "server per DP rank, launched for a router): these logs mix several "
                       "such servers, so analyse each server's logs on their own")
        contradictions.append({
            "kind": "prefix-outside-topology", "count": _lines(bad), "detail": detail,
            "file_id": first["file_id"], "line": first["line"]})
    titles = frame.filter(pl.col("proctitle").is_not_null()).select("proctitle").unique()
    if titles.height:
        tokens = _title_tokens(titles["proctitle"])
        matched = _match_combos(topology, processes, tokens.select(cols).unique(),
                                ignore_dp=label)
        tokens = tokens.join(matched, on=cols, how="left", maintain_order="left", nulls_equal=True)
        tokens = tokens.filter(pl.any_horizontal(pl.col(c).is_not_null() for c in cols))
        frame = _attach(frame, tokens.select("proctitle", pl.col("combo_proc").alias("title_proc")),
                        ["proctitle"])
    else:
        frame = frame.with_columns(pl.lit(None, _PROC).alias("title_proc"))
    return frame


def _lines(keys: pl.DataFrame) -> int:
    """The number of lines behind some key rows."""
    return int(keys["_n"].sum())


def _token_text(row: dict[str, object]) -> str:
    return " ".join(f"{tok}{row[col]}" for col, tok in PREFIX_COLUMNS.items()
                    if row[col] is not None)


def _file_hosts(frame: pl.DataFrame) -> pl.DataFrame:
    """`eff_host`: the line's host, else the one host its file's lines name (if only one)."""
    per_file = (frame.filter(pl.col("host").is_not_null()).group_by("file_id")
                .agg(pl.col("host").unique().alias("hosts"))
                .filter(pl.col("hosts").list.len() == 1)
                .select("file_id", pl.col("hosts").list.first().alias("file_host")))
    frame = _attach(frame, per_file, ["file_id"])
    return frame.with_columns(pl.coalesce("host", "file_host").alias("eff_host"))


def _host_nodes(frame: pl.DataFrame, topology: Topology | None, processes: pl.DataFrame,
                file_nodes: dict[int, int], contradictions: list[dict[str, object]]
                ) -> dict[str, int]:
    """host -> node_rank, from files that name one host and one node (prefix ranks or the
    server_args node_rank line); a one-node deployment with one host needs no more."""
    if topology is None:
        return {}
    hosts = frame.filter(pl.col("eff_host").is_not_null())["eff_host"].unique().to_list()
    if topology.sizes.nnodes == 1:
        return {hosts[0]: 0} if len(hosts) == 1 else {}
    nodes = processes.select(pl.col("proc"), pl.col("node_rank").alias("node"))
    known = (frame.filter(pl.col("file_host").is_not_null())
             .select("file_id", "file_host", pl.coalesce("prefix_proc", "title_proc").alias("proc"))
             .drop_nulls().unique().join(nodes, on="proc").select("file_host", "node"))
    declared = pl.DataFrame({"file_id": list(file_nodes), "node": list(file_nodes.values())},
                            schema={"file_id": pl.UInt32, "node": pl.Int32})
    hosts_of_files = frame.select("file_id", "file_host").drop_nulls().unique()
    declared = hosts_of_files.join(declared, on="file_id").select("file_host", "node")
    per_host = (pl.concat([known, declared]).group_by("file_host")
                .agg(pl.col("node").unique().sort()).sort("file_host"))
    mapping: dict[str, int] = {}
    for host, nodes_seen in per_host.iter_rows():
        if len(nodes_seen) == 1:
            mapping[host] = int(nodes_seen[0])
        else:
            contradictions.append({"kind": "host-several-nodes", "count": len(nodes_seen),
                                   "detail": f"host {host} appears in files of nodes "
                                             f"{nodes_seen}; its NCCL lines are not attributed "
                                             "by device", "file_id": None, "line": None})
    return mapping


def _by_device(frame: pl.DataFrame, topology: Topology | None, processes: pl.DataFrame,
               host_nodes: dict[str, int]) -> pl.DataFrame:
    """`device_proc`: NCCL main-thread lines (tid == pid) -> (node, gpu_id) -> process;
    `gpu_proc`: SGLang 0.2.x `[gpu=N]` lines the same way (on one node, the node is known
    without a host)."""
    gpu_line = (pl.col("source") == "sglang") & pl.col("device_id").is_not_null()
    one_node = topology is not None and topology.sizes.nnodes == 1
    if topology is None or not (host_nodes or one_node):
        return frame.with_columns(pl.lit(None, _PROC).alias("device_proc"),
                                  pl.lit(None, _PROC).alias("gpu_proc"))
    node_map = pl.DataFrame({"eff_host": list(host_nodes), "dev_node": list(host_nodes.values())},
                            schema={"eff_host": pl.String, "dev_node": pl.Int32})
    slots = (processes.group_by("node_rank", "gpu_id").agg(pl.col("proc").first(), pl.len())
             .filter(pl.col("len") == 1)  # SGLang can put two processes on one gpu_id
             .select(pl.col("node_rank").alias("dev_node"), pl.col("gpu_id").alias("device_id"),
                     pl.col("proc").alias("device_proc")))
    frame = _attach(frame, node_map, ["eff_host"])
    if one_node:
        frame = frame.with_columns(pl.when(gpu_line).then(pl.lit(0, pl.Int32))
                                   .otherwise(pl.col("dev_node")).alias("dev_node"))
    frame = _attach(frame, slots, ["dev_node", "device_id"])
    return frame.with_columns(
        pl.when(pl.col("_main")).then(pl.col("device_proc")).otherwise(None)
        .alias("device_proc"),
        pl.when(gpu_line).then(pl.col("device_proc")).otherwise(None).alias("gpu_proc"),
    ).drop("dev_node")


def _by_pid(frame: pl.DataFrame, topology: Topology | None, processes: pl.DataFrame,
            contradictions: list[dict[str, object]]) -> pl.DataFrame:
    """`pid_proc`: (host, pid) pairs tied to one process by other lines, applied to all lines
    with that pid. A pid tied to two processes ties nothing."""
    host_key = pl.col("eff_host").fill_null("")
    known = pl.coalesce("prefix_proc", "title_proc", "device_proc")
    linked_pid = pl.coalesce("link_pid", "p_pid", "pid")
    links = (frame.select(host_key.alias("host_key"), linked_pid.cast(pl.Int64).alias("pid"),
                          known.alias("proc"))
             .drop_nulls().unique())
    counts = links.group_by("host_key", "pid").agg(pl.col("proc").first(), pl.len())
    for host, pid, _, n in counts.filter(pl.col("len") > 1).iter_rows():
        contradictions.append({"kind": "pid-several-processes", "count": n,
                               "detail": f"PID {pid}{' on ' + host if host else ''} is tied to "
                                         f"{n} different processes; its lines are left "
                                         "unattributed by PID", "file_id": None, "line": None})
    links = counts.filter(pl.col("len") == 1).select("host_key", "pid",
                                                pl.col("proc").alias("pid_proc"))
    single_host = topology is None or topology.sizes.nnodes == 1
    frame = _attach(frame, links, ["host_key", "pid"], keys={"host_key": host_key})
    if single_host:  # PIDs are unique on one host: a PID learned anywhere applies everywhere
        unique = links.group_by("pid").agg(pl.col("pid_proc").unique())
        unique = unique.filter(pl.col("pid_proc").list.len() == 1).select(
            "pid", pl.col("pid_proc").list.first().alias("pid_any"))
        frame = _attach(frame, unique, ["pid"]).with_columns(
            pl.coalesce("pid_proc", "pid_any").alias("pid_proc")).drop("pid_any")
    return frame


def _by_communicator(frame: pl.DataFrame, topology: Topology | None) -> pl.DataFrame:
    """`comm_proc`: NCCL communicator lines (`rank r nranks n … commId X`) of processes not yet
    known. The members already known pin which group instance the communicator is; its rank r
    is then member r of that instance. One group instance must fit, or nothing is concluded."""
    none = pl.lit(None, _PROC).alias("comm_proc")
    if topology is None:
        return frame.with_columns(none)
    known = pl.coalesce("prefix_proc", "title_proc", "device_proc", "pid_proc")
    comms = (frame.filter(pl.col("comm_id").is_not_null() & pl.col("comm_rank").is_not_null()
                          & pl.col("pid").is_not_null())
             .select("comm_id", "comm_rank", "comm_nranks", pl.col("eff_host").fill_null("")
                     .alias("host_key"), "pid", known.alias("known")).unique())
    links: list[tuple[str, int, int]] = []
    for (comm_id,), members in comms.group_by("comm_id"):
        links.extend(_communicator_links(topology, members))
    if not links:
        return frame.with_columns(none)
    table = pl.DataFrame(links, schema={"host_key": pl.String, "pid": pl.Int64,
                                        "comm_proc": _PROC}, orient="row").unique()
    table = table.filter(pl.len().over("host_key", "pid") == 1)
    frame = _attach(frame, table, ["host_key", "pid"],
                    keys={"host_key": pl.col("eff_host").fill_null("")})
    return frame.with_columns(pl.when(known.is_null()).then(pl.col("comm_proc"))
                              .alias("comm_proc"))


def _communicator_links(topology: Topology, members: pl.DataFrame) -> list[tuple[str, int, int]]:
    """(host, pid, proc) for the unknown members of one communicator, when exactly one group
    instance (in one replica) agrees with every known member's position."""
    nranks = members["comm_nranks"].drop_nulls()
    if nranks.len() == 0:
        return []
    width = int(nranks[0])
    anchors = {int(r): int(p) for r, p in members.select("comm_rank", "known").drop_nulls()
               .unique().iter_rows()}
    lists = {m for g in topology.groups.values() if g.alias_of is None
             for m in g.members if len(m) == width}
    fits = {(replica, m) for m in lists for replica in range(topology.sizes.replicas)
            if all(r < width and replica * topology.sizes.world + m[r] == p
                   for r, p in anchors.items())}
    if len(fits) != 1:
        return []
    replica, instance = next(iter(fits))
    return [(host, int(pid), replica * topology.sizes.world + instance[int(rank)])
            for rank, host, pid, proc in members.select("comm_rank", "host_key", "pid", "known")
            .iter_rows() if proc is None and 0 <= rank < width]


def _by_gloo(frame: pl.DataFrame, topology: Topology | None) -> pl.DataFrame:
    """`[Gloo] Rank r is connected to n peer ranks`: member r of the group instance whose Gloo
    communicator has n+1 members and holds every process identified in the line's output
    stream (file, wrapper stream) - when all such instances (of any group, any replica) agree
    on member r. Otherwise the line stays unattributed."""
    gloo = pl.col("gloo_rank").is_not_null() & pl.col("gloo_size").is_not_null()
    if topology is None or not frame.select(gloo.any()).item():
        return frame
    world = topology.sizes.world
    instances = {(replica, members) for group in topology.groups.values()
                 for members in group.members for replica in range(topology.sizes.replicas)}
    seen = (frame.filter(pl.col("proc").is_not_null()).group_by("file_id", "stream")
            .agg(pl.col("proc").unique()))
    candidates = {(f, s): set(p) for f, s, p in seen.iter_rows()}
    answers: list[tuple[int, str | None, int, int, int | None]] = []
    for file_id, stream, rank, size in (frame.filter(gloo & pl.col("proc").is_null()
                                                     & ~pl.col("conflict"))
                                        .select("file_id", "stream", "gloo_rank", "gloo_size")
                                        .unique().iter_rows()):
        known = candidates.get((file_id, stream), set())
        found = {replica * world + members[rank] for replica, members in instances
                 if len(members) == size and 0 <= rank < size
                 and known <= {replica * world + m for m in members}}
        answers.append((file_id, stream, rank, size, found.pop() if len(found) == 1 else None))
    table = pl.DataFrame(answers, orient="row", schema={
        "file_id": pl.UInt32, "stream": pl.String, "gloo_rank": pl.Int32, "gloo_size": pl.Int32,
        "_gloo": _PROC})
    frame = _attach(frame, table, ["file_id", "stream", "gloo_rank", "gloo_size"],
                    nulls_equal=True)
    resolved = pl.col("_gloo").is_not_null() & pl.col("proc").is_null()
    return frame.with_columns(
        pl.when(resolved).then(pl.col("_gloo")).otherwise(pl.col("proc")).alias("proc"),
        pl.when(resolved).then(pl.lit("group-rank")).otherwise(pl.col("evidence"))
        .alias("evidence"),
    ).drop("_gloo")


_ROLE_STEMS = (("DataParallelController hit an exception", "dp_controller"),
               ("DetokenizerManager hit an exception", "detokenizer"),
               ("TokenizerManager hit an exception", "main"),
               ("] DataParallelController watchdog timeout", "dp_controller"),
               ("] DetokenizerManager watchdog timeout", "detokenizer"),
               ("] TokenizerManager watchdog timeout", "main"),
               # messages only a scheduler writes, on a line without rank tokens (a TP1
               # scheduler prints none; with one scheduler in the topology they name it)
               *((stem, "scheduler") for stem in (
                   "] Scheduler hit an exception", "] TpModelWorkerClient hit an exception",
                   # SGLang 0.2.x-0.3.x TP workers (ModelTpServer, tp_worker.run_tp_server)
                   "Exception in ModelTpServer", "Exception in run_tp_server",
                   "] Load weight begin", "] Load weight end", "] KV Cache is allocated",
                   "] Memory pool end", "] Capture cuda graph begin", "] Capture cuda graph end",
                   "] Decode batch", "] Prefill batch", "] max_total_num_tokens=",
                   "] Init torch distributed begin", "] Init torch distributed ends",
                   "] Scheduler watchdog timeout", "] Watchdog timeout (self.watchdog_timeout")))
# (not py-spy dumps: every process's watchdog dumps itself in 0.5.23, and the main process
# dumps the schedulers before a crash)


def _stem_roles(frame: pl.DataFrame) -> pl.DataFrame:
    """Processes known by their own messages on SGLang lines without rank tokens
    (`TokenizerManager hit an exception` -> main, `Load weight begin` -> scheduler)."""
    unknown = pl.col("role").is_null()
    # one multi-pattern search for all stems; each stem only on the (few) rows that hold one
    hinted = frame.select(pl.when(unknown).then(pl.col("text")).str.contains_any(
        [stem for stem, _ in _ROLE_STEMS])).to_series().fill_null(False)
    if not hinted.any():
        return frame
    text = pl.when(pl.lit(hinted)).then(pl.col("text"))  # null elsewhere
    role: pl.Expr = pl.lit(None, pl.String)
    for stem, name in reversed(_ROLE_STEMS):  # one chain: the first stem that holds wins
        role = pl.when(text.str.contains(stem, literal=True)).then(pl.lit(name)).otherwise(role)
    return frame.with_columns(pl.coalesce(pl.col("role"), role).alias("role"))


def _title_roles(frame: pl.DataFrame) -> pl.DataFrame:
    """Non-scheduler processes known by a py-spy process title, and the lines of their PID."""
    role: pl.Expr = pl.lit(None, pl.String)
    for title, name in reversed(_ROLE_TITLES.items()):
        role = pl.when(pl.col("proctitle").str.starts_with(title)).then(pl.lit(name)
                                                                       ).otherwise(role)
    frame = frame.with_columns(pl.coalesce(pl.col("role"), role).alias("role"))
    titled = (frame.filter(pl.col("link_pid").is_not_null() & pl.col("proc").is_null()
                           & pl.col("role").is_not_null() & pl.col("proctitle").is_not_null())
              .select(pl.col("eff_host").fill_null("").alias("host_key"),
                      pl.col("link_pid").alias("pid"), pl.col("role").alias("pid_role"))
              .unique().filter(pl.len().over("host_key", "pid") == 1))
    if titled.height == 0:
        return frame
    frame = _attach(frame, titled, ["host_key", "pid"],
                    keys={"host_key": pl.col("eff_host").fill_null("")})
    return frame.with_columns(pl.when(pl.col("proc").is_null()).then(
        pl.coalesce("role", "pid_role")).otherwise(pl.col("role")).alias("role")
    ).drop("pid_role")


def _by_torch_rank(frame: pl.DataFrame, topology: Topology | None,
                   contradictions: list[dict[str, object]]) -> pl.DataFrame:
    """`torch_proc` from `[rankN]:` (or a PG-local rank in a one-instance group) when the
    deployment has one replica, so the WORLD rank names one process."""
    none = pl.lit(None, _PROC)
    if topology is None or topology.sizes.replicas != 1:
        return frame.with_columns(none.alias("torch_proc"), none.alias("group_proc"))
    world = topology.sizes.world
    in_world = pl.col("torch_rank").is_between(0, world - 1)
    outside = frame.filter(pl.col("torch_rank").is_not_null() & ~in_world)
    if outside.height:
        contradictions.append({"kind": "rank-outside-topology", "count": _lines(outside),
                               "detail": f"{_lines(outside)} line(s) name a torch rank outside "
                                         f"the world of {world}", "file_id":
                                         outside["file_id"][0], "line": outside["line"][0]})
    frame = frame.with_columns(pl.when(in_world).then(pl.col("torch_rank")).otherwise(None)
                               .cast(_PROC).alias("torch_proc"))
    return frame.with_columns(_group_rank_expr(topology).alias("group_proc"))


def _group_rank_expr(topology: Topology) -> pl.Expr:
    """PG description `tp:device` (or `default_pg`) + group-local rank -> world rank, for
    groups with a single instance; a rank outside that instance stays null."""
    expr = pl.lit(None, _PROC)
    group_of_desc = pl.col("pg_desc").str.extract(r"^([A-Za-z_]+)")
    for name, group in topology.groups.items():
        if len(group.members) != 1:
            continue
        members = dict(enumerate(group.members[0]))
        desc = "default_pg" if name == "world" else name
        world_rank = pl.col("pg_rank").replace_strict(members, default=None, return_dtype=_PROC)
        expr = pl.when((group_of_desc == desc) & expr.is_null()).then(world_rank).otherwise(expr)
    return expr.cast(_PROC)


_DIRECT = (("prefix", "prefix_proc"), ("only-scheduler", "only_proc"), ("nccl-device", "device_proc"),
           ("gpu-prefix", "gpu_proc"), ("pid", "title_proc"),
           ("pid", "pid_proc"), ("torch-rank", "torch_proc"), ("group-rank", "group_proc"),
           ("group-rank", "comm_proc"))


def _by_only_scheduler(frame: pl.DataFrame, topology: Topology | None) -> pl.DataFrame:
    """`only_proc`: with one scheduler in the whole topology (TP1, no DP, no PP), SGLang prints
    no rank tokens; a line whose message only a scheduler writes (`Scheduler hit an exception`)
    and that has no tokens is that scheduler's."""
    only = topology is not None and len(topology.processes) == 1
    tokens = pl.any_horizontal(pl.col(c).is_not_null() for c in PREFIX_COLUMNS)
    return frame.with_columns(
        pl.when(pl.lit(only) & (pl.col("role") == "scheduler") & ~tokens)
        .then(pl.lit(0, _PROC)).otherwise(pl.lit(None, _PROC)).alias("only_proc"))


def _combine_direct(frame: pl.DataFrame, contradictions: list[dict[str, object]]) -> pl.DataFrame:
    """One process per row from the line's own evidence; disagreement -> none, reported."""
    cols = [col for _, col in _DIRECT]
    first = pl.coalesce(cols)
    agree = pl.all_horizontal((pl.col(c).is_null() | (pl.col(c) == first)) for c in cols)
    evidence = pl.lit(None, pl.String)
    for name, col in reversed(_DIRECT):
        evidence = pl.when(pl.col(col).is_not_null()).then(pl.lit(name)).otherwise(evidence)
    frame = frame.with_columns(
        pl.when(agree).then(first).otherwise(None).alias("proc"),
        pl.when(agree).then(evidence).otherwise(None).alias("evidence"),
        (~agree).fill_null(False).alias("conflict"),
    )
    conflicts = frame.filter(pl.col("conflict"))
    if conflicts.height:
        contradictions.append({"kind": "evidence-disagrees", "count": _lines(conflicts),
                               "detail": f"{_lines(conflicts)} line(s) carry evidence naming "
                                         "different processes (e.g. prefix vs PID); left "
                                         "unattributed", "file_id": conflicts["file_id"][0],
                               "line": conflicts["line"][0]})
    return frame


_EXCEPTION_HEADER = r"hit an exception|Traceback \(most recent call last\)|Fatal Python error"


def _records(starts: pl.Expr) -> tuple[pl.Expr, pl.Expr]:
    """`record` (per file, the number of headers so far) and `_head_row` (the row index of the
    first row of the line's record). Rows are in file order, so a record is a run starting at
    a header or at the file's first line: a cumulative sum and a forward fill, no windows.

    starts_record:  F  T  F  T  | (next file) T  F
    record:         0  1  1  2  |             1  1
    _head_row:      0  1  1  3  |             4  4
    """
    first = (pl.col("file_id") != pl.col("file_id").shift(1)).fill_null(True)
    counted = starts.cast(pl.UInt32).cum_sum()
    before_file = pl.when(first).then(counted - starts.cast(pl.UInt32)).forward_fill()
    head_row = pl.when(starts | first).then(pl.int_range(pl.len(), dtype=pl.UInt32))
    return ((counted - before_file).alias("record"), head_row.forward_fill().alias("_head_row"))


_SECOND = pl.col("ts").dt.truncate("1s").alias("_second")
_CROWDED_ON = ["file_id", "stream", "_second"]


def exception_seconds(parsed: pl.DataFrame) -> pl.DataFrame:
    """The distinct (second, KEY_COLUMNS) of the exception headers (rows with `_exc`) of
    parsed rows: a second of a file with many tracebacks of one process is one row."""
    return (parsed.filter(pl.col("_exc") & pl.col("ts").is_not_null())
            .select(_SECOND, *KEY_COLUMNS).unique())


def crowded_headers(seconds: pl.DataFrame, attribution: Attribution) -> pl.DataFrame:
    """The (file_id, stream, second) in which exception headers of more than one process (or
    of an unknown one) stand: each one's traceback may interleave with another's
    (`seconds`: `exception_seconds` of every chunk)."""
    if seconds.height == 0:
        return pl.DataFrame(schema={"file_id": pl.UInt32, "stream": pl.String,
                                    "_second": pl.Datetime("us")})
    procs = seconds.select(KEY_COLUMNS).join(
        attribution.table.select(*KEY_COLUMNS, "proc"), on=KEY_COLUMNS, how="left",
        maintain_order="left", nulls_equal=True)
    return (seconds.with_columns(procs["proc"]).unique([*_CROWDED_ON, "proc"])
            .filter(pl.len().over(_CROWDED_ON) > 1).select(_CROWDED_ON).unique())


def _mark_crowded(frame: pl.DataFrame, crowded: pl.DataFrame) -> pl.Series:
    """The exception headers of `frame` in a crowded second (`crowded_headers`)."""
    marks = pl.repeat(False, frame.height, eager=True).alias("_crowded")
    if crowded.height == 0:
        return marks
    headers = (frame.select("file_id", "stream", "ts", "_exc").with_row_index("_at")
               .filter(pl.col("_exc")).with_columns(_SECOND))
    hits = headers.join(crowded, on=_CROWDED_ON, how="semi", nulls_equal=True)
    return marks.scatter(hits.get_column("_at"), True)


def _by_continuation(frame: pl.DataFrame, crowded: pl.DataFrame, shared: list[int] | None = None
                     ) -> pl.DataFrame:
    """Rows that continue a record (no header of their own) take the process of the record
    whose grammar they fit (see `_grammar_records`) - never across another output stream, a
    glued line or a progress bar. In a file several processes write to (`shared`), a plain line
    after a one-line message is no record's: it is a `print` of any of them (8 schedulers each
    printing `Cache shape torch.Size(…)` after their own `Load weight begin`)."""
    starts = pl.col("starts_record").fill_null(False)
    record, head_row = _records(starts)
    frame = frame.with_columns(record, head_row, _mark_crowded(frame, crowded))
    # ghost rows in front carry the true record numbers of the records they head
    shift = (pl.col("_true_record").cast(pl.Int64) - pl.col("record").cast(pl.Int64)
             ).forward_fill().fill_null(0)
    in_ghost_file = pl.col("file_id") == pl.col("file_id").first()
    frame = frame.with_columns(pl.when(in_ghost_file).then(pl.col("record").cast(pl.Int64) + shift)
                               .otherwise(pl.col("record")).cast(pl.UInt32).alias("record"),
                               pl.col("_head_row").alias("_file_head"))
    if frame.get_column("stream").null_count() < frame.height:
        frame = _stream_records(frame, starts)
    # a record glued into the middle of another's line (part > 0) takes the next lines only
    # when it announces them (`…: Traceback (most recent call last):`): a hard-wrapped tail
    # after it may be the first part's as well
    glued = pl.repeat(False, frame.height, eager=True)
    parts = frame.get_column("part")
    if parts.max() > 0:  # type: ignore[operator]
        at = (parts > 0).arg_true()  # (their text is read on those few rows only)
        open_ = frame.get_column("text").gather(at).str.strip_chars_end().str.ends_with(":")
        glued = glued.scatter(at.filter(~open_), True)
    printed = _printed(frame, shared or [])
    frame = _grammar_records(frame.with_columns(pl.lit(glued).alias("_glued")),
                             set(shared or []))
    header_glued = pl.col("_glued").gather(pl.col("_head_row"))
    # the blank line NCCL prints before a WARN is the WARN's writer's (`_before_warn`: set by
    # the caller, which knows the next chunk's first line)
    before_warn = (pl.col("_before_warn").fill_null(False) if "_before_warn" in frame.columns
                   else pl.lit(False))
    has_record = pl.col("_K").is_not_null()
    record_proc = pl.col("_kid")
    record_role = pl.col("_krole")
    inherit = (pl.col("proc").is_null() & ~starts & has_record & ~pl.col("conflict")
               & ~before_warn)
    return frame.with_columns(
        pl.when(inherit).then(record_proc).otherwise(pl.col("proc")).alias("proc"),
        pl.when(inherit & record_proc.is_not_null()).then(pl.lit("continuation"))
        .otherwise(pl.col("evidence")).alias("evidence"),
        pl.when(inherit & pl.col("role").is_null()).then(record_role).otherwise(pl.col("role"))
        .alias("role"),
        pl.when(has_record & ~starts).then(pl.col("record").gather(pl.col("_K").fill_null(0)))
        .otherwise(pl.col("record")).alias("record"),
        (~starts & pl.col("_amb") & pl.col("proc").is_null()).alias("interleaved"),
        (pl.col("proc").is_null() & ~starts & pl.lit(printed)).alias("_printed"),
        (pl.col("proc").is_null() & ~starts & header_glued & ~has_record).alias("_after_glued"),
    ).drop("_crowded", "_glued")


# --------------------------------------------------------------------------- record grammars
#
# An untagged line continues a record only when it fits the record's grammar, and only when
# which record is known. Records are of two kinds:
#
# * a *block*: a logging record (SGLang, torch c10, glog, …) written in one piece, so the lines
#   right after its header are its own: a header with an exception (`… hit an exception:
#   Traceback …`) takes traceback lines, one announcing what follows (`Pyspy dump for PID n:`)
#   takes any dump, a c10 header with an exception takes C++ frames; plain lines follow the
#   three. A one-line message takes nothing (but plain lines in a file that is not shared).
# * a *raw record*: text a process writes a line at a time to stderr, with no header of its
#   own - a Python traceback from `sys.excepthook` (`Traceback (most recent call last):` …
#   `XxxError: …`), a faulthandler dump (`Fatal Python error: …` … `Extension modules: …`), a
#   C++ abort (`terminate called after throwing …`, `what():`, `frame #N:`), a py-spy dump
#   (`Process N: …`). When several processes abort at once, their raw records interleave line
#   by line with each other and with other processes' blocks.
#
# Per output stream (file, wrapper stream) and grammar, the raw records open at each line are
# counted (opened by their first line, closed by their last where the grammar has one). A line
# of a grammar goes to the block it stands in when the block takes that grammar and no raw
# record of it is open; else to the one raw record of that grammar that is open, when it has been
# the only one since it opened. Otherwise it is unattributed ("interleaved records"). A record's
# process is its header's, or the one an identified line inside it names (`what(): [PG … Rank
# r]`, `Process N: sglang::scheduler_TP3`), from that line on. All of it is carried from chunk
# to chunk by `next_ghost` (the `_s_*` state columns of its rows).

_RAW_GRAMMARS = ("tb", "fh", "spy", "cpp")
_RAW_SOURCES = {"traceback": "tb", "faulthandler": "fh", "pyspy": "spy", "cpp": "cpp"}
_REOPEN = ("During handling of the above exception", "The above exception was the direct cause")
_TB_END = r"^[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Warning|Fault|Failure)(?:: |:$|$)"
_STATE = {**{f"_s_{g}": pl.Int32() for g in _RAW_GRAMMARS},
          **{f"_s_x{g}": pl.Boolean() for g in _RAW_GRAMMARS},
          "_s_at": pl.Int32(), "_s_act": pl.Boolean(), "_s_id": _PROC, "_s_idc": pl.Boolean(),
          "_s_dem": pl.Boolean(), "_s_copen": pl.Boolean(), "_s_prev": pl.String()}
_P = "_pid"


def _per_stream(frame: pl.DataFrame) -> Callable[[pl.Expr], pl.Expr]:
    """`expr.over(_P)`: a window per output stream - or, when the chunk holds one stream
    only (a file read alone, as most chunks are), the plain expression: the same values,
    without the window's group-by (a third of the attribution pass's time)."""
    if frame.get_column(_P).n_unique() <= 1:
        return lambda expr: expr
    return lambda expr: expr.over(_P)


def _grammar_records(frame: pl.DataFrame, shared: set[int]) -> pl.DataFrame:
    """`_K` (the row heading the record each row belongs to, or null), `_kid` (that record's
    process so far), `_amb` (the row may be one of several open records') and the state
    `next_ghost` carries.

    Most rows are one-line records followed in their stream by another one (a prefixed SGLang
    line, an NCCL INFO line): such a row opens, closes and takes nothing, and no row refers to
    it, so the grammar runs on the other rows only (`_plain_heads`) - every count, latest
    header and latest opener it computes is the same there - and the rows left out take their
    stream's state from the next row it kept (the last one-line record of their run), and
    themselves as their record."""
    for name, dtype in _STATE.items():
        if name not in frame.columns:
            frame = frame.with_columns(pl.lit(None, dtype).alias(name))
    skip = _plain_heads(frame)
    # (only the columns the grammar reads: each step's cost grows with the frame's width)
    read = [c for c in (*_GRAMMAR_READS, *_STATE) if c in frame.columns]
    if not skip.any():
        done = _grammar_rows(frame.select(read), shared)
        return frame.with_columns(done.select(c for c in done.columns if c not in read))
    keep = ~skip
    done = _grammar_rows(frame.select(read).with_row_index("_o").filter(keep), shared)
    added = [c for c in done.columns if c not in read and c != "_o"]
    # (row numbers of the kept rows -> row numbers of the chunk)
    done = done.with_columns(pl.col("_o").gather(pl.col(c)).alias(c)
                             for c in ("_i", "_K", "_bh", *(f"_last_{g}" for g in _RAW_GRAMMARS)))
    # each row's source among the kept rows: itself, or the next kept row of its stream
    kept_before = keep.cast(pl.UInt32).cum_sum()
    at = pl.select(pl.when(keep).then(kept_before - 1).otherwise(kept_before)).to_series()
    if not _one_stream(frame):
        part = _stream_part(frame)
        at = frame.select(part.alias("_part")).with_columns(keep.alias("_keep"), at.alias("_at")) \
            .select(pl.when(pl.col("_keep")).then(pl.col("_at")).backward_fill()
                    .over("_part")).to_series()
    frame = frame.with_columns(done.select(added)[at])
    own = pl.lit(skip)
    i = pl.int_range(pl.len(), dtype=pl.UInt32)
    return frame.with_columns(
        pl.when(own).then(i).otherwise(pl.col("_i")).alias("_i"),
        pl.when(own).then(i).otherwise(pl.col("_K")).alias("_K"),
        pl.when(own).then(i).otherwise(pl.col("_bh")).alias("_bh"),
        pl.when(own).then(pl.col("proc")).otherwise(pl.col("_kid")).alias("_kid"),
        pl.when(own).then(False).otherwise(pl.col("_kidc")).alias("_kidc"),
        pl.when(own).then(pl.col("role")).otherwise(pl.col("_krole")).alias("_krole"),
        pl.when(own).then(False).otherwise(pl.col("_amb")).alias("_amb"))


_GRAMMAR_READS = ("file_id", "line", "stream", "source", "text", "msg", "starts_record", "_exc",
                  "_ghost", "_glued", "_crowded", "proc", "role")


def _one_stream(frame: pl.DataFrame) -> bool:
    """The chunk holds one output stream: one file, no wrapper streams."""
    return (frame.get_column("stream").null_count() == frame.height
            and frame.get_column("file_id").n_unique() <= 1)


def _stream_part(frame: pl.DataFrame) -> pl.Expr:
    """One integer per output stream (file, wrapper stream)."""
    return (pl.col("file_id").cast(pl.UInt64) if frame.get_column("stream").null_count()
            == frame.height else pl.struct("file_id", "stream").hash())


def _plain_heads(frame: pl.DataFrame) -> pl.Series:
    """Rows `_grammar_rows` needs not see: a record's header that is a one-line message (no
    raw record's line, no exception, nothing announced by a trailing `:`, no torch/glog line
    that may carry C++ frames, not blank, not `During handling …`), carried from no previous
    chunk, and followed in its stream by another such row (so it is neither the header the
    next lines stand under nor its stream's last row)."""
    wrapped = "msg" in frame.columns and frame.get_column("msg").null_count() < frame.height
    message = pl.coalesce("msg", "text") if wrapped else pl.col("text")
    m = pl.col("_m")  # (the coalesce is as dear as a string test: made once)
    stripped = pl.col("_stripped")  # (read by two tests: made once)
    plain = (pl.col("starts_record").fill_null(False) & ~pl.col("_ghost")
             & ~pl.col("_exc").fill_null(False)
             & ~pl.col("source").is_in([*_RAW_SOURCES, "torch", "glog"]).fill_null(False)
             & ~_ends_with_colon(m, stripped).fill_null(True)
             & ~pl.any_horizontal(m.str.starts_with(s) for s in _REOPEN).fill_null(True)
             & (stripped.str.len_bytes() > 0).fill_null(False))  # (not blank: `\S`)
    p = pl.col("_plain")  # (made a column: the shift below would test every string again)
    follows = p.shift(-1) if _one_stream(frame) else p.shift(-1).over(_stream_part(frame))
    return (frame.select("starts_record", "_ghost", "_exc", "source", "file_id", "stream",
                         message.alias("_m"))
            .with_columns(m.str.strip_chars_end().alias("_stripped"))
            .select("file_id", "stream", plain.alias("_plain"))
            .select((p & follows.fill_null(False)).alias("_skip")).to_series())


def _grammar_rows(frame: pl.DataFrame, shared: set[int]) -> pl.DataFrame:
    """`_grammar_records` on the rows it keeps."""
    starts = pl.col("starts_record").fill_null(False)
    ghost = pl.col("_ghost")
    message = pl.coalesce("msg", "text") if "msg" in frame.columns else pl.col("text")
    i = pl.int_range(pl.len(), dtype=pl.UInt32)
    # one integer per output stream (file, wrapper stream): windows over it are cheap (and
    # none at all when the chunk holds one stream: `_per_stream`)
    frame = frame.with_columns(
        i.alias("_i"), message.alias("_m"), _stream_part(frame).alias("_pid"),
        pl.col("source").replace_strict(_RAW_SOURCES, default=None, return_dtype=pl.String)
        .alias("_raw"))
    w = _per_stream(frame)
    m = pl.col("_m")
    raw_kind = pl.col("_raw")
    # a py-spy dump or C++ abort right after a line announcing it is written with that line
    # (`Pyspy dump for PID n:` then `Process n: sglang::detokenizer`): a block of its own
    prev_ann = (w(pl.col("_ann").shift(1)).fill_null(False)
                & (w(pl.col("line").shift(1)) + 1 == pl.col("line")).fill_null(False))
    frame = frame.with_columns(
        (starts & raw_kind.is_null() & _ends_with_colon(m) & ~pl.col("_exc")).alias("_ann"))
    frame = frame.with_columns(
        pl.coalesce("_s_dem", starts & raw_kind.is_in(["spy", "cpp"]) & prev_ann).alias("_dem"))
    # `Traceback (most recent call last):` or `Fatal Python error:` after a line ending with `:`
    # is no header of its own to the parser (`During handling …:` announces the next part of
    # the same traceback). In a stream several processes write, that line may be another
    # process's (`Thread 0x… (most recent call first):`): the opener still opens a raw record
    # unless the last non-blank line before it in the stream is one that announces it.
    blank = m.str.contains(r"^\s*$")
    reopen = pl.any_horizontal(m.str.starts_with(s) for s in _REOPEN)
    category = (pl.when(ghost | blank).then(None).when(reopen).then(pl.lit("reopen"))
                .when(pl.col("_ann")).then(pl.lit("ann")).otherwise(pl.lit("x")))
    frame = frame.with_columns(w(pl.coalesce(category, "_s_prev").forward_fill())
                               .alias("_catf"))
    # (`During handling …:` announces a traceback, not a faulthandler dump)
    before = w(pl.col("_catf").shift(1))
    announced = ((before == "ann") | ((before == "reopen") & (raw_kind == "tb"))).fill_null(False)
    frame = frame.with_columns(pl.coalesce(
        "_s_copen", _where(~starts & raw_kind.is_in(["tb", "fh"]), m).str.contains(OPENS)
        .fill_null(False) & ~announced).alias("_copen"))
    head = starts | pl.col("_copen")
    # (a c10 header with an exception takes C++ frames; torch_npu's warning holding CANN's
    # error report, `… Warning: EZ9999: Inner Error!`, the report's lines)
    c10 = _where(pl.col("source").is_in(["torch", "glog"]), m)
    torch_exc = (c10.str.contains("(?i)exception") | c10.str.contains(CANN_CHAINS)
                 ).fill_null(False)
    kind = (pl.when(~head).then(None)
            .when(pl.col("_dem")).then(pl.lit("ann"))
            .when(raw_kind.is_not_null()).then(pl.lit("raw"))
            .when(pl.col("_exc")).then(pl.lit("exc"))
            .when(pl.col("_ann")).then(pl.lit("ann"))
            .when(torch_exc).then(pl.lit("cppexc"))
            .otherwise(pl.lit("one")))
    gram = (pl.when(blank).then(pl.lit("blank"))
            .otherwise(raw_kind.fill_null(pl.col("source").replace_strict(
                {"tqdm": "tqdm", "cann": "cann"}, default="plain", return_dtype=pl.String))))
    frame = frame.with_columns(
        kind.alias("_kind"), pl.when(head & ~pl.col("_dem")).then(raw_kind).alias("_opens"),
        w(pl.when(head).then(pl.col("_i")).forward_fill()).alias("_bh"),
        gram.alias("_gram"))
    # (what later steps read more than once is made a column: one big expression costs more
    # to plan than to run on the few rows kept)
    bh_kind = pl.col("_kind").gather(pl.col("_bh").fill_null(0))
    frame = frame.with_columns(pl.when(pl.col("_bh").is_not_null()).then(bh_kind).alias("_bhk"))
    bh_kind = pl.col("_bhk")
    frame = frame.with_columns(
        (bh_kind.is_in(["exc", "ann"]) if g == "tb" else bh_kind.is_in(["ann", "cppexc"])
         if g == "cpp" else bh_kind == "ann").alias(f"_tk_{g}") for g in _RAW_GRAMMARS)
    takes = {g: pl.col(f"_tk_{g}") for g in _RAW_GRAMMARS}
    live = ~ghost
    gram_ = pl.col("_gram")
    reopen = (gram_ == "tb") & reopen
    tb_end = _where(gram_ == "tb", m).str.contains(_TB_END).fill_null(False) & ~starts
    fh_end = (gram_ == "fh") & m.str.starts_with("Extension modules:")
    ends = {"tb": tb_end, "fh": fh_end}
    # (the latest raw record of each grammar opened in the stream)
    frame = frame.with_columns(
        w(pl.when(pl.col("_opens") == g).then(pl.col("_i")).forward_fill())
        .alias(f"_last_{g}") for g in _RAW_GRAMMARS)
    # a raw traceback is never surely over: after its `XxxError: …` line its process may still
    # write the message's next lines or `During handling …` and a chained traceback, anywhere
    # later in the stream. Once one was written, traceback, plain and blank lines in a block
    # may be its.
    tb_seen = pl.col("_last_tb").is_not_null()
    frame = frame.with_columns(tb_end.alias("_tbe"), reopen.alias("_reo"))
    tb_end, reopen = pl.col("_tbe"), pl.col("_reo")
    columns = []
    for g in _RAW_GRAMMARS:
        opened = (pl.col("_opens") == g).fill_null(False)
        if g == "tb":
            opened = opened | (reopen & (~takes["tb"].fill_null(False) | tb_seen))
        closed = ends[g] & ~takes[g].fill_null(False) if g in ends else pl.lit(False)
        up = pl.col(f"_s_{g}").fill_null(0) + (live & opened).cast(pl.Int32)
        columns += [up.alias(f"_up_{g}"), (up - (live & closed).cast(pl.Int32)).alias(f"_d_{g}")]
    exc_opened = ((pl.col("_kind") == "exc").fill_null(False)
                  | (reopen & (bh_kind == "exc").fill_null(False)))
    exc_up = pl.col("_s_at").fill_null(0) + (live & exc_opened).cast(pl.Int32)
    exc_closed = tb_end & (bh_kind == "exc").fill_null(False)
    columns += [exc_up.alias("_up_at"), (exc_up - (live & exc_closed).cast(pl.Int32))
                .alias("_d_at")]
    frame = frame.with_columns(columns)
    frame = _counts(frame, w)
    raw_open = pl.sum_horizontal(pl.col(f"_n_{g}") for g in _RAW_GRAMMARS)
    # raw records active in the block so far (their tails may stand in it)
    active = (raw_open > 0) | pl.col("_s_act").fill_null(False)
    frame = frame.with_columns(w(pl.when(active).then(pl.col("_i")).forward_fill())
                               .alias("_lastact"))
    frame = frame.with_columns((pl.col("_lastact") >= pl.col("_bh")).fill_null(False)
                               .alias("_act"))
    # an exception block opened while another exception record was open, in a second when
    # another process opened one too (`crowded_headers`), may hold that one's lines
    frame = frame.with_columns(
        (pl.col("_crowded") & (pl.col("_n_at") >= 2)).gather(pl.col("_bh").fill_null(0))
        .alias("_exk"))
    exc_crowded = pl.col("_exk")
    frame = frame.with_columns(
        *(((pl.col(f"_n_{g}") == 0) & (~tb_seen if g == "tb" else pl.lit(True)) & pl.when(
            bh_kind == "exc").then(~exc_crowded)
            .when(bh_kind == "ann").then(pl.col("_n_at") == 0).otherwise(True))
          .alias(f"_bok_{g}") for g in _RAW_GRAMMARS),
        *(((pl.col(f"_n_{g}") == 1) & ~pl.col(f"_x_{g}") & pl.col(f"_last_{g}").is_not_null())
          .alias(f"_rok_{g}") for g in _RAW_GRAMMARS))
    assigned: pl.Expr = pl.lit(None, pl.UInt32)
    ambiguous: pl.Expr = pl.lit(False)
    for g in _RAW_GRAMMARS:
        mine = gram_ == g
        in_block = takes[g].fill_null(False)
        block_ok = pl.col(f"_bok_{g}")
        raw_ok = pl.col(f"_rok_{g}")
        assigned = (pl.when(mine & in_block & block_ok).then(pl.col("_bh"))
                    .when(mine & ~in_block & raw_ok).then(pl.col(f"_last_{g}"))
                    .otherwise(assigned))
        ambiguous = ambiguous | (mine & pl.when(in_block).then(~block_ok)
                                 .otherwise((pl.col(f"_n_{g}") >= 1) & ~raw_ok))
    plain_block = bh_kind.is_in(["exc", "ann", "cppexc"]).fill_null(False)
    quiet = (raw_open == 0) & ~pl.col("_act")
    plain_ok = (quiet & ~tb_seen & pl.when(bh_kind == "exc").then(~exc_crowded).otherwise(True))
    single = ~pl.col("file_id").is_in(list(shared)) & pl.col("stream").is_null()
    full = pl.col("text").str.len_chars().is_in(_WIDTHS)
    frame = frame.with_columns(
        w(pl.int_range(pl.len(), dtype=pl.UInt32)).alias("_pr"),
        w(pl.when(~full).then(pl.col("_i").cast(pl.Int64)).forward_fill().shift(1))
        .alias("_lastshort"))
    # a one-line message takes plain lines in a file only one process writes, or the tail a
    # terminal's hard wrap cut off it (it filled a terminal's width: `_hard_wrapped`)
    frame = frame.with_columns(
        ((bh_kind == "one").fill_null(False) & (single | _hard_wrapped()) & quiet).alias("_ook"),
        plain_ok.alias("_pok"),
        (~pl.col("_glued").gather(pl.col("_bh").fill_null(0)) | (pl.col("_bh").is_null()))
        .alias("_tkn"))
    one_ok, plain_ok = pl.col("_ook"), pl.col("_pok")
    plain = gram_ == "plain"
    # a blank line is nobody's where several processes write, but inside a block written in
    # one piece (a logged traceback, an announced dump) while no raw record is open
    blank = (gram_ == "blank") & bh_kind.is_in(["exc", "ann"]).fill_null(False)
    assigned = (pl.when(plain & ((plain_block & plain_ok) | one_ok)).then(pl.col("_bh"))
                .when(blank & plain_ok).then(pl.col("_bh"))
                .when(gram_ == "cann").then(pl.col("_bh"))
                .otherwise(assigned))
    ambiguous = ambiguous | ((plain & plain_block) | blank) & ~plain_ok
    # the record's own header row; glued headers and progress bars take nothing
    taken = pl.col("_tkn")
    assigned = (pl.when(head).then(pl.col("_i"))
                .when(pl.col("source") == "tqdm").then(None)
                .when(taken).then(assigned))
    frame = frame.with_columns(assigned.alias("_K"), ambiguous.fill_null(False).alias("_amb"))
    return _identity(frame).drop(
        "_m", "_pr", "_lastshort", "_lastact", "_bhk", "_tbe", "_reo", "_raw", "_exk", "_ook", "_pok", "_tkn",
        *(f"_{p}_{g}" for p in ("tk", "bok", "rok") for g in _RAW_GRAMMARS))


# terminal widths a hard wrap cuts lines at
_WIDTHS = (80, 100, 120, 132, 140, 150, 160, 180, 200, 220, 240, 250, 256, 300)


def _where(condition: pl.Expr, text: pl.Expr) -> pl.Expr:
    """`text` where `condition` holds, else null: a pattern is then run on those rows only."""
    return pl.when(condition.fill_null(False)).then(text)


def _ends_with_colon(text: pl.Expr, stripped: pl.Expr | None = None) -> pl.Expr:
    """The text ends with `:`, or with `:` then whitespace ending in a space, tab or CR
    (`stripped`: the text without its trailing whitespace, when made already): what the
    pattern `:` then whitespace to the end says of a line ending in a blank, in two passes
    over the text."""
    stripped = text.str.strip_chars_end() if stripped is None else stripped
    return stripped.str.ends_with(":") & text.str.tail(1).is_in([":", " ", "\t", "\r"])


def _hard_wrapped() -> pl.Expr:
    """The row and every row of its block before it, from the header on, are consecutive lines
    and all but the row fill a terminal width, and the row starts inside a word (not with a
    capital or a space: `p:device) Rank 0] Watchdog …`): the row is the tail of a hard-wrapped
    header, not a line another process began."""
    inside = ~_where(pl.col("_gram") == "plain", pl.col("text")).str.contains(
        r"^(?:[A-Z\s]|$)").fill_null(True)
    bh = pl.col("_bh").fill_null(0)
    steps = pl.col("_pr").cast(pl.Int64) - pl.col("_pr").gather(bh).cast(pl.Int64)
    lines = pl.col("line").cast(pl.Int64) - pl.col("line").gather(bh).cast(pl.Int64)
    return ((pl.col("_lastshort").fill_null(-1) < pl.col("_bh").cast(pl.Int64))
            & (lines == steps) & pl.col("_bh").is_not_null() & inside)


def _counts(frame: pl.DataFrame, w: Callable[[pl.Expr], pl.Expr]) -> pl.DataFrame:
    """For each raw grammar g (and `at`: exception blocks): `_n_g`, the records open at the
    row (counting those it opens), `_c_g` after it, and `_x_g`, whether two were open at once
    since the last moment none was (or the carried state says so)."""
    every = (*_RAW_GRAMMARS, "at")
    # (a grammar nothing opens, closes or carries in the chunk - most, most of the time - has
    # no record open anywhere: no windows)
    quiet = [g for g in every if frame.get_column(f"_up_{g}").max() == 0
             and frame.get_column(f"_d_{g}").min() == 0
             and (g == "at" or not frame.get_column(f"_s_x{g}").fill_null(False).any())]
    frame = frame.with_columns(
        *(pl.lit(0, pl.Int32).alias(f"_{p}_{g}") for g in quiet for p in ("n", "c")),
        *(pl.lit(False).alias(f"_x_{g}") for g in quiet)).drop(
        *(f"_{p}_{g}" for p in ("d", "up") for g in quiet))
    names = tuple(g for g in every if g not in quiet)
    if not names:
        return frame
    frame = frame.with_columns(w(pl.col(f"_d_{g}").cum_sum()).alias(f"_t_{g}")
                               for g in names)
    frame = frame.with_columns((pl.col(f"_t_{g}") - w(pl.col(f"_t_{g}").cum_min())
                                .clip(upper_bound=0)).alias(f"_c_{g}") for g in names)
    frame = frame.with_columns(
        (w(pl.col(f"_c_{g}").shift(1)).fill_null(0)
         + pl.col(f"_up_{g}").clip(lower_bound=0)).alias(f"_n_{g}") for g in names)
    i = pl.col("_i")
    seeds = {g: pl.col(f"_s_x{g}").fill_null(False) if g != "at" else pl.lit(False)
             for g in names}
    frame = frame.with_columns(
        *(w(pl.when((pl.col(f"_n_{g}") >= 2) | seeds[g]).then(i).forward_fill())
          .alias(f"_two_{g}") for g in names),
        *(w(pl.when(pl.col(f"_c_{g}") == 0).then(i).forward_fill())
          .alias(f"_zero_{g}") for g in names))
    frame = frame.with_columns(w(pl.col(f"_zero_{g}").shift(1)).alias(f"_zero_{g}")
                               for g in names)
    return frame.with_columns(
        (pl.col(f"_two_{g}").is_not_null() & (pl.col(f"_zero_{g}").is_null()
                                              | (pl.col(f"_two_{g}") > pl.col(f"_zero_{g}"))))
        .alias(f"_x_{g}") for g in names).drop(
        *(f"_{p}_{g}" for p in ("t", "two", "zero", "d", "up") for g in names))


def _identity(frame: pl.DataFrame) -> pl.DataFrame:
    """`_kid`: the process of each row's record (`_K`) so far - the first one its rows name
    (the header's, or a line's inside it), none once two disagree - and `_kidc`, that they
    disagree."""
    # (only records that have lines besides their header need it: few rows)
    heads = pl.col("_K") == pl.col("_i")
    wanted = frame.filter(pl.col("_K").is_not_null() & ~heads).get_column("_K").unique()
    rows = frame.select(pl.col("_K").is_in(wanted.implode()).fill_null(False)).to_series()
    # (a header alone: its own process, or the one carried for it)
    conflict = pl.col("_s_idc").fill_null(False)
    frame = frame.with_columns(
        pl.when(heads & ~conflict).then(pl.coalesce("_s_id", "proc")).alias("_kid"),
        (heads & conflict).fill_null(False).alias("_kidc"),
        pl.when(heads).then(pl.col("role")).alias("_krole"))
    if rows.sum() == 0:
        return frame
    at = rows.arg_true()
    part = _record_identity(frame.select("_K", "_s_id", "_s_idc", "proc", "role").filter(rows))
    return frame.with_columns(
        frame.get_column(name).scatter(at, part.get_column(name))
        for name in ("_kid", "_kidc", "_krole"))


def _record_identity(frame: pl.DataFrame) -> pl.DataFrame:
    value = pl.when(pl.col("_K").is_not_null()).then(pl.coalesce("_s_id", "proc"))
    frame = frame.with_columns(value.alias("_v"))
    frame = frame.with_columns(
        pl.col("_v").is_not_null().cast(pl.UInt32).cum_sum().over("_K").alias("_seen"))
    frame = frame.with_columns(pl.when(pl.col("_v").is_not_null() & (pl.col("_seen") == 1))
                               .then(pl.col("_v")).forward_fill().over("_K").alias("_first"))
    disagree = ((pl.col("_v").is_not_null() & (pl.col("_v") != pl.col("_first")))
                | pl.col("_s_idc").fill_null(False))
    frame = frame.with_columns(disagree.cast(pl.Int8).cum_max().over("_K").cast(pl.Boolean)
                               .alias("_kidc"))
    # (its role: the latest one its rows name - a dump's title after its announcement)
    return frame.with_columns(pl.when(~pl.col("_kidc")).then(pl.col("_first")).alias("_kid"),
                              pl.when(pl.col("_K").is_not_null()).then(pl.col("role"))
                              .forward_fill().over("_K").alias("_krole")
                              ).drop("_v", "_seen", "_first")


def _other_stream() -> pl.Expr:
    """The line is in another wrapper stream (pod, Ray worker, …) than its record's header."""
    return (pl.col("stream") != pl.col("stream").gather(pl.col("_head_row"))).fill_null(False)


def _stream_records(frame: pl.DataFrame, starts: pl.Expr) -> pl.DataFrame:
    """Lines a wrapper puts in output streams (pods, Ray workers) interleave records: a line
    whose record header is of another stream belongs to the latest header of its own stream in
    the file (carried across chunks by `next_ghost`)."""
    at = pl.int_range(pl.len(), dtype=pl.UInt32)  # (outside the window: row numbers of the chunk)
    frame = frame.with_columns(pl.when(starts).then(at).alias("_own"))
    own = pl.col("_own").forward_fill().over("file_id", "stream")
    moved = pl.when(_other_stream() & own.is_not_null()).then(own).otherwise(pl.col("_head_row"))
    return frame.with_columns(moved.alias("_head_row")).with_columns(
        pl.col("record").gather(pl.col("_head_row"))).drop("_own")


def _printed(frame: pl.DataFrame, shared: list[int]) -> pl.Series:
    """Lines (blank ones too) of a `shared` file that continue no record of their own and whose
    record header is a one-line SGLang message: not an exception, not ending with `:` (which
    announces what follows: `Pyspy dump for PID n:`). A print, a CUDA error or a
    faulthandler dump after a uvicorn access line is no more the main process's than any
    other writer's. Their text is read on those few rows only."""
    plain = (~pl.col("starts_record").fill_null(False) & pl.col("file_id").is_in(shared)
             & (pl.col("source") != "tqdm").fill_null(True))
    rows = frame.select(plain.fill_null(False)).to_series().arg_true()
    marks = pl.Series("_printed", [False]).new_from_index(0, frame.height)
    if rows.len() == 0:
        return marks
    heads = frame.get_column("_head_row").gather(rows)  # (Series work: no query plans)
    hit = ((frame.get_column("source").gather(heads) == "sglang")
           & ~frame.get_column("_exc").gather(heads).fill_null(False)
           & ~_message(frame, heads).str.strip_chars_end().str.ends_with(":"))
    return marks.scatter(rows.filter(hit.fill_null(False)), True)


def _message(frame: pl.DataFrame, rows: pl.Series) -> pl.Series:
    """The message of the rows at `rows`: the line under a peeled wrapper, else its text."""
    text = frame.get_column("text").gather(rows)
    return frame.get_column("msg").gather(rows).fill_null(text) if "msg" in frame.columns \
        else text


def _files(keys: pl.DataFrame) -> pl.DataFrame:
    """Per file: `procs`, the processes its identified lines name, and `mixed`, whether it
    holds launcher output (a server_args or main-process line) or wrapper streams (a Ray
    actor's or a pod's output, where several processes print)."""
    return keys.group_by("file_id").agg(
        pl.col("proc").filter(pl.col("evidence").is_not_null()).unique().drop_nulls()
        .alias("procs"),
        (pl.col("server_args").fill_null(False) | (pl.col("role") == "main").fill_null(False)
         | pl.col("stream").is_not_null()).any().alias("mixed"))


def _file_procs(files: pl.DataFrame) -> pl.DataFrame:
    """file_id -> file_proc for a file (`_files`) whose identified lines all name one process
    and which is not mixed - when the set is laid out one process per file: at least two
    files each name one process (two processes in all) and no file names several. SGLang
    writes all its processes to one stream, so a lone file that names one process is more
    likely a console with one talkative rank (a paste, a tail) than that process's own log -
    also with one scheduler: its console holds the main process's and the detokenizer's
    output too (a detokenizer's Ctrl-C traceback is not the scheduler's)."""
    one = files.filter((pl.col("procs").list.len() == 1) & ~pl.col("mixed")).select(
        "file_id", pl.col("procs").list.first().alias("file_proc"))
    laid_out = (one.get_column("file_proc").n_unique() >= 2
                and files.filter(pl.col("procs").list.len() > 1).height == 0)
    return one if laid_out else one.clear()


def _shared_files(files: pl.DataFrame, file_procs: pl.DataFrame) -> list[int]:
    """Files (`_files`) that name a process but are no process's own (`_file_procs`): several
    processes, a process and the launcher's output, or a console where one process's lines
    stand among others' (a shell transcript, a paste)."""
    own = file_procs.get_column("file_id").to_list()
    return (files.filter((pl.col("procs").list.len() >= 1) & ~pl.col("file_id").is_in(own))
            .get_column("file_id").sort().to_list())


def _local_ranks(topology: Topology | None) -> pl.DataFrame | None:
    """(file_proc, pg_rank) for every rank a process has in some group (its index in each
    member list), the world included."""
    if topology is None:
        return None
    local: dict[int, set[int]] = {}
    for group in topology.groups.values():
        for members in group.members:
            for rank, world in enumerate(members):
                local.setdefault(world, set()).add(rank)
    pairs = sorted((index, rank) for index, process in enumerate(topology.processes)
                   for rank in local.get(process.world_rank, set()) | {process.world_rank})
    return pl.DataFrame(pairs, schema={"file_proc": _PROC, "pg_rank": pl.Int32()},
                        orient="row")


def _by_file(frame: pl.DataFrame, file_procs: pl.DataFrame,
             local_ranks: pl.DataFrame | None = None) -> pl.DataFrame:
    """A file that belongs to one process (`_file_procs`) lends it to its other lines - but
    not to a record with a line whose group rank (`[PG 3 Rank 1]`) that process has in no
    group: such a record is another process's, in a file that only looked like one process's
    (a console paste, a shared log with one identified writer)."""
    frame = frame.with_columns(frame.select("file_id").join(
        file_procs, on="file_id", how="left", maintain_order="left").get_column("file_proc"))
    ambiguous_header = ((pl.col("source") == "sglang") & pl.col("starts_record").fill_null(False)
                        & pl.all_horizontal(pl.col(c).is_null() for c in PREFIX_COLUMNS))
    lend = (pl.col("proc").is_null() & pl.col("file_proc").is_not_null() & ~pl.col("conflict")
            & pl.col("role").is_null() & ~ambiguous_header)
    # a continuation of an ambiguous header stays with its header
    header_ambiguous = ambiguous_header.gather(pl.col("_head_row"))
    lend = lend & ~(header_ambiguous & ~pl.col("starts_record").fill_null(False))
    frame = frame.with_columns(_foreign=_foreign_records(frame, local_ranks))
    return frame.with_columns(
        pl.when(lend & ~pl.col("_foreign")).then(pl.col("file_proc")).otherwise(pl.col("proc"))
        .alias("proc"),
        pl.when(lend & ~pl.col("_foreign")).then(pl.lit("file")).otherwise(pl.col("evidence"))
        .alias("evidence"),
        (lend & pl.col("_foreign")).alias("_foreign"),
    ).drop("file_proc")


def _foreign_records(frame: pl.DataFrame, local_ranks: pl.DataFrame | None) -> pl.Series:
    """Rows whose record holds an unattributed line with a group rank its file's process has
    in no group (see `_by_file`)."""
    candidate = (pl.col("proc").is_null() & pl.col("file_proc").is_not_null()
                 & pl.col("pg_rank").is_not_null())
    none = pl.repeat(False, frame.height, eager=True)
    if local_ranks is None or not frame.select(candidate.any()).item():
        return none
    known = frame.select("file_proc", "pg_rank").join(
        local_ranks.with_columns(_has=pl.lit(True)), on=["file_proc", "pg_rank"], how="left",
        maintain_order="left").get_column("_has")
    alien = frame.select("_head_row", (candidate & pl.lit(known).is_null()).alias("_alien"))
    return alien.select(pl.col("_alien").any().over("_head_row")).to_series()


def _explain_unattributed(frame: pl.DataFrame) -> pl.DataFrame:
    """`why`: a short reason for every row left without a process."""
    has_tokens = pl.any_horizontal(pl.col(c).is_not_null() for c in PREFIX_COLUMNS)
    why = (pl.when(pl.col("proc").is_not_null()).then(None)
           .when(pl.col("conflict")).then(pl.lit("evidence disagrees"))
           .when(pl.col("interleaved")).then(pl.lit("interleaved records"))
           .when(pl.col("_printed").fill_null(False))
           .then(pl.lit("plain line in a shared file"))
           .when(pl.col("_after_glued").fill_null(False))
           .then(pl.lit("after a glued line"))
           .when(pl.col("_foreign").fill_null(False))
           .then(pl.lit("group rank not the file's process"))
           .when(has_tokens).then(pl.lit("prefix outside topology"))
           .when(pl.col("role").is_not_null() & (pl.col("role") != "scheduler"))
           .then(pl.lit("not a scheduler"))
           .when(pl.col("torch_rank").is_not_null()).then(pl.lit("torch rank ambiguous"))
           .when(pl.col("pid").is_not_null()).then(pl.lit("pid not linked to a process"))
           .when(pl.col("source") == "sglang").then(pl.lit("no rank prefix"))
           .otherwise(pl.lit("no identifying field")))
    return frame.with_columns(why.alias("why")).drop("_foreign", "_printed", "_after_glued",
                                                      strict=False)
