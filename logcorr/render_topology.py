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


def process_table(topology: Topology, processes: tuple[Process, ...] | list[Process]) -> Table:
    table = Table(title="Scheduler processes", title_justify="left")
    with_replica = topology.sizes.replicas > 1
    if with_replica:
        table.add_column("replica", justify="right", no_wrap=True)
    for title, _ in _COLUMNS:
        table.add_column(title, justify="right", no_wrap=True)
    table.add_column("prefix", no_wrap=True)
    for process in processes:
        row = [str(process.replica)] if with_replica else []
        row += [_value(getattr(process, attr)) for _, attr in _COLUMNS]
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
    """attn_dp x attn_tp and moe_dp/ep x moe_tp grids of TP ranks, when they say something."""
    s = topology.sizes
    tables = []
    if s.attn_dp > 1 or s.attn_cp > 1:
        tables.append(_grid("Attention layout: TP ranks by (attn_dp, attn_cp) x attn_tp",
                            [f"dp{d} cp{c}" for d in range(s.attn_dp) for c in range(s.attn_cp)],
                            [f"attn_tp {t}" for t in range(s.attn_tp)], s.attn_tp))
    if s.moe_ep > 1 or s.moe_dp > 1:
        tables.append(_grid("MoE layout: TP ranks by (moe_dp, moe_ep) x moe_tp",
                            [f"moe_dp{d} ep{e}" for d in range(s.moe_dp) for e in range(s.moe_ep)],
                            [f"moe_tp {t}" for t in range(s.moe_tp)], s.moe_tp))
    return tables


def _grid(title: str, rows: list[str], columns: list[str], width: int) -> Table:
    table = Table(title=title, title_justify="left")
    table.add_column("")
    for column in columns:
        table.add_column(column, justify="right")
    for index, label in enumerate(rows):
        table.add_row(label, *(f"TP{index * width + t}" for t in range(width)))
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
