"""Rich renderables for `logcorr topology`: what to show, never how to print it."""

from __future__ import annotations

from rich.console import Group as RichGroup
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from logcorr.topology import Process, Topology

_COLUMNS: tuple[tuple[str, str], ...] = (
    ("node", "node_rank"), ("gpu", "gpu_id"), ("world", "world_rank"), ("pp", "pp_rank"),
    ("tp", "tp_rank"), ("dp", "dp_rank"), ("attn_dp", "attn_dp_rank"),
    ("attn_cp", "attn_cp_rank"), ("attn_tp", "attn_tp_rank"), ("moe_dp", "moe_dp_rank"),
    ("moe_ep", "moe_ep_rank"), ("moe_tp", "moe_tp_rank"),
)


def summary_line(topology: Topology) -> str:
    """One line: every width, e.g. `TP16 PP1 | attention DP8 x CP1 x TP2 | MoE DP1 x EP16 ...`."""
    s = topology.sizes
    replicas = f"{s.replicas} replica{'s' if s.replicas != 1 else ''}"
    return (f"TP{s.tp} PP{s.pp} | attention DP{s.attn_dp} x CP{s.attn_cp} x TP{s.attn_tp} | "
            f"MoE DP{s.moe_dp} x EP{s.moe_ep} x TP{s.moe_tp} | {replicas} | {s.nnodes} "
            f"node{'s' if s.nnodes != 1 else ''} | {len(topology.processes)} schedulers | "
            f"SGLang {topology.config.sglang_version} rules")


def render_topology(topology: Topology) -> RenderableType:
    """Summary, the per-process coordinate table, the groups, and the rank grids."""
    parts: list[RenderableType] = [Text(summary_line(topology), style="bold")]
    parts.append(process_table(topology, topology.processes))
    parts.append(groups_table(topology))
    parts.extend(grids(topology))
    return RichGroup(*parts)


def _shown_columns(topology: Topology) -> list[tuple[str, str]]:
    """Coordinate columns worth a column: a dimension of width 1 says nothing."""
    s = topology.sizes
    width = {"pp_rank": s.pp, "dp_rank": max(s.replicas, s.attn_dp), "attn_dp_rank": s.attn_dp,
             "attn_cp_rank": s.attn_cp, "attn_tp_rank": s.attn_tp if s.attn_tp != s.tp else 1,
             "moe_dp_rank": s.moe_dp, "moe_ep_rank": s.moe_ep,
             "moe_tp_rank": s.moe_tp if s.moe_tp != s.tp else 1}
    return [(title, attr) for title, attr in _COLUMNS if width.get(attr, 2) > 1]


def process_table(topology: Topology, processes: tuple[Process, ...] | list[Process]) -> Table:
    table = Table(title="Scheduler processes", title_justify="left")
    with_replica = topology.sizes.replicas > 1
    if with_replica:
        table.add_column("replica", justify="right", no_wrap=True)
    columns = _shown_columns(topology)
    for title, _ in columns:
        table.add_column(title, justify="right", no_wrap=True)
    table.add_column("prefix", no_wrap=True)
    for process in processes:
        row = [str(process.replica)] if with_replica else []
        row += [_value(getattr(process, attr)) for _, attr in columns]
        row.append(process.prefix.strip() or "(none)")
        table.add_row(*row)
    return table


def groups_table(topology: Topology, limit: int = 16) -> Table:
    table = Table(title="Process groups (world ranks within one replica)", title_justify="left")
    for column in ("group", "same communicator as", "instances", "width", "members"):
        table.add_column(column)
    for group in topology.groups.values():
        shown = " ".join(_members(m) for m in group.members[:limit])
        if len(group.members) > limit:
            shown += f" ... (+{len(group.members) - limit})"
        table.add_row(group.name, group.alias_of or "-", str(len(group.members)),
                      str(len(group.members[0])), Text(shown))
    return table


def grids(topology: Topology) -> list[Table]:
    """The seed note's grids: attention (dp[, cp]) x attn_tp and MoE moe_dp x moe_ep, each cell
    the TP ranks there (several when moe_tp > 1)."""
    s = topology.sizes
    tables = []
    if s.attn_dp > 1 or s.attn_cp > 1:
        rows = [(f"attn_dp {d}" + (f" cp {c}" if s.attn_cp > 1 else ""), d * s.attn_cp + c)
                for d in range(s.attn_dp) for c in range(s.attn_cp)]
        table = _grid("Attention layout (TP ranks)", [f"attn_tp {t}" for t in range(s.attn_tp)])
        for label, index in rows:
            table.add_row(label, *(f"TP{index * s.attn_tp + t}" for t in range(s.attn_tp)))
        tables.append(table)
    if s.moe_ep > 1 or s.moe_dp > 1:
        table = _grid("MoE layout (TP ranks; moe_tp varies fastest)",
                      [f"moe_ep {e}" for e in range(s.moe_ep)])
        for d in range(s.moe_dp):
            cells = []
            for e in range(s.moe_ep):
                first = (d * s.moe_ep + e) * s.moe_tp
                cells.append("TP" + ",".join(str(first + t) for t in range(s.moe_tp)))
            table.add_row(f"moe_dp {d}", *cells)
        tables.append(table)
    return tables


def _grid(title: str, columns: list[str]) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("")
    for column in columns:
        table.add_column(column, justify="right", no_wrap=True)
    return table


def render_rank(topology: Topology, processes: list[Process]) -> RenderableType:
    """For each selected process: its coordinates, and its place in every group."""
    parts: list[RenderableType] = [process_table(topology, processes)]
    for process in processes:
        table = Table(title=f"Groups of replica {process.replica} world rank "
                            f"{process.world_rank} ({process.proctitle})", title_justify="left")
        for column in ("group", "same communicator as", "its rank in group", "members"):
            table.add_column(column)
        for group in topology.groups.values():
            members = topology.group_instance(group.name, process.world_rank)
            table.add_row(group.name, group.alias_of or "-",
                          str(members.index(process.world_rank)), Text(_members(members)))
        parts.append(table)
    return RichGroup(*parts)


def _members(members: tuple[int, ...]) -> str:
    return "[" + " ".join(map(str, members)) + "]"


def _value(value: object) -> str:
    return "-" if value is None else str(value)
