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
|               | (without a launch config: one torch world, `torch_world`)                   |
| group-rank    | `[PG … (tp:device) Rank r]` -> member r of the group's only instance;        |
|               | `[Gloo] Rank r is connected to n peer ranks` -> member r of the n+1 instance |
|               | holding the line's stream's processes                                        |
| continuation  | an untagged line of the grammar of the one record of that grammar open in    |
|               | its stream whose process is known (the core's `grammar.rs`)                  |
| file          | every identified line of a per-process file names the same process           |
| srun-task     | an `srun --label` task whose lines name one torch rank, one task per rank    |

Direct evidence on one line that disagrees leaves the line unattributed and is reported as a
contradiction, as is a prefix no process of the topology prints (a `TP20` under tp_size=16).
Without a topology, each distinct prefix is its own process with only the ranks it prints, and
each torch rank a world rank of one torch world unless the logs say otherwise (`torch_world`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import polars as pl

from logcorr import torch_world
from logcorr.model import COORDINATES
from logcorr.topology import Topology
from logcorr.torch_world import TorchWorld

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


def process_table(topology: Topology | None, parsed: pl.DataFrame,
                  world: TorchWorld | None = None) -> pl.DataFrame:
    """proc id -> coordinates and the prefix tokens it prints (null when not printed); without
    a topology, the world ranks of the torch world assumed (`world`) too
    (`torch_world.with_world`)."""
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
    table = combos.with_columns(
        *(pl.col(col).alias(coord) for col, coord in _TOKEN_COORDINATES.items()),
        *(pl.lit(None, pl.Int32).alias(c) for c in COORDINATES if c not in
          _TOKEN_COORDINATES.values()),
    ).select(list(_process_schema()))
    return table if world is None else torch_world.with_world(table, world)


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
# 1. The core's first pass reads what each line says by itself, and its key row: its distinct
#    KEY_COLUMNS. Every whole-set rule (a PID tied to a process in one file applies in all; a
#    host's node; a communicator's members) depends on a line only through those columns, so
# 2. `resolve_keys` runs the rules once on the distinct key rows of the whole set (a few
#    thousand, whatever the number of lines), and the core's second pass joins the answer back
#    by the key row's number and adds what depends on the line's neighbours: continuation
#    lines (the record grammar) and files that belong to one process.

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
    # processes that are no SGLang scheduler (a torch job's ranks): their lines take no role
    plain: list[int] = field(default_factory=list)


def resolve_keys(keys: pl.DataFrame, topology: Topology | None,
                 file_nodes: dict[int, int] | None = None,
                 rank_spans: list[tuple[int, int, int]] | None = None) -> Attribution:
    """Attribute each distinct key row (from `merge_key_rows`) to a process.

    `file_nodes` maps a file to the node_rank its server_args line names; `rank_spans` gives
    (key row, first, last) stamp of the torch lines of a key row (`torch_world`).
    """
    keys = keys.with_row_index("_k")
    contradictions: list[dict[str, object]] = []
    frame = _file_hosts(keys)
    world = torch_world.assume(frame, topology, _prefix_combos(frame), _spans(rank_spans),
                               contradictions)
    processes = process_table(topology, frame, world)
    frame = _by_prefix(frame, topology, processes, contradictions)
    host_nodes = _host_nodes(frame, topology, processes, file_nodes or {}, contradictions)
    frame = _by_device(frame, topology, processes, host_nodes)
    frame = _by_torch_rank(frame, topology, contradictions, processes, world)
    frame = _by_pid(frame, topology, processes, contradictions, world)
    frame = _by_communicator(frame, topology)
    frame = _by_only_scheduler(frame, topology)
    frame = _combine_direct(frame, contradictions)
    frame = torch_world.task_procs(frame, processes, world)
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
                       _local_ranks(topology), _shared_files(files, file_procs),
                       _plain(processes, world))


def _spans(rank_spans: list[tuple[int, int, int]] | None) -> pl.DataFrame | None:
    if rank_spans is None:
        return None
    return pl.DataFrame(rank_spans, schema={"_key": pl.UInt32, "_first": pl.Int64,
                                            "_last": pl.Int64}, orient="row")


def _plain(processes: pl.DataFrame, world: TorchWorld | None) -> list[int]:
    """The processes of the torch world that SGLang's prefix does not name."""
    if world is None:
        return []
    tokens = pl.any_horizontal(pl.col(c).is_not_null() for c in PREFIX_COLUMNS)
    return processes.filter(~tokens).get_column("proc").to_list()


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
            contradictions: list[dict[str, object]], world: TorchWorld | None = None
            ) -> pl.DataFrame:
    """`pid_proc`: (host, pid) pairs tied to one process by other lines, applied to all lines
    with that pid. A pid tied to two processes ties nothing. In a torch world (`world`), a
    line of a known host naming a torch rank and a PID ties them too, on that host only."""
    host_key = pl.col("eff_host").fill_null("")
    known = pl.coalesce("prefix_proc", "title_proc", "device_proc")
    if world is not None:
        on_host = pl.col("eff_host").is_not_null()
        known = pl.coalesce(known, pl.when(on_host).then(pl.coalesce("torch_proc",
                                                                     "group_proc")))
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
    single_host = (topology is None and world is None) or (
        topology is not None and topology.sizes.nnodes == 1)
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
                   contradictions: list[dict[str, object]],
                   processes: pl.DataFrame | None = None,
                   world: TorchWorld | None = None) -> pl.DataFrame:
    """`torch_proc` from `[rankN]:` (or a PG-local rank in a one-instance group) when the
    deployment has one replica, so the WORLD rank names one process; without a topology, in
    the torch world assumed (`torch_world`), `[rankN]:` and the default group's `Rank N`."""
    none = pl.lit(None, _PROC)
    if topology is None and world is not None and processes is not None:
        return torch_world.world_procs(frame, processes, world)
    if topology is None or topology.sizes.replicas != 1:
        return frame.with_columns(none.alias("torch_proc"), none.alias("group_proc"))
    size = topology.sizes.world
    in_world = pl.col("torch_rank").is_between(0, size - 1)
    outside = frame.filter(pl.col("torch_rank").is_not_null() & ~in_world)
    if outside.height:
        contradictions.append({"kind": "rank-outside-topology", "count": _lines(outside),
                               "detail": f"{_lines(outside)} line(s) name a torch rank outside "
                                         f"the world of {size}", "file_id":
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


_CROWDED_ON = ["file_id", "stream", "_second"]


def crowded_headers(seconds: pl.DataFrame, attribution: Attribution) -> pl.DataFrame:
    """The (file_id, stream, second) in which exception headers of more than one process (or
    of an unknown one) stand: each one's traceback may interleave with another's
    (`seconds`: `_second`, `_key`, and the key row's `file_id` and `stream`, of every
    exception header; the key row tells its process)."""
    if seconds.height == 0:
        return pl.DataFrame(schema={"file_id": pl.UInt32, "stream": pl.String,
                                    "_second": pl.Datetime("us")})
    procs = attribution.table.select(pl.col("_key").cast(pl.UInt32), "proc")
    return (seconds.join(procs, on="_key", how="left").unique([*_CROWDED_ON, "proc"])
            .filter(pl.len().over(_CROWDED_ON) > 1).select(_CROWDED_ON).unique())


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
