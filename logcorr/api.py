"""`analyze(...)`: the one place the stages are chained.

paths -> ingest (physical lines) -> formats (fields per line) -> launch config (given, or the
server_args line in the logs) -> topology -> resolve (process per line) -> timeline (order)
-> the tagged timeline of the output contract (model.TIMELINE_SCHEMA).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import polars as pl

from logcorr.config import (
    LaunchConfig,
    config_from_fields,
    fields_from_server_args_line,
    load_config,
    with_overrides,
)
from logcorr.diagnose import Context, Finding, diagnose, people_table
from logcorr.errors import ConfigError
from logcorr.formats import parse
from logcorr.ingest import Source, discover, read_lines
from logcorr.model import COORDINATES, TIMELINE_SCHEMA
from logcorr.resolve import Resolution, resolve
from logcorr.selector import Selector
from logcorr.timeline import complete_timestamps, order_lines, ts_text
from logcorr.topology import PREFIX_TOKENS, Topology, build_topology, sizes_of

Progress = Callable[[str, int, int], None]
# What ordering, the output contract and the diagnosis read; the resolver's intermediate
# columns are dropped before the sort so they are not carried through it.
_DETAIL_COLUMNS = frozenset({
    *TIMELINE_SCHEMA, "file_id", "ts_has_date", "ts_has_year", "eff_host", "proc", "record",
    "why", "torch_rank", "pg_desc", "pg_rank", "seq", "op", "last_enqueued", "last_completed",
    "comm_id", "comm_nranks", "nccl_phase", "link_pid", "proctitle", "server_args",
    "starts_record",
})
STAGES = ("reading", "parsing", "attributing", "aligning", "diagnosing", "done")


def _stepper(progress: Progress | None) -> Callable[[str], None]:
    def step(stage: str) -> None:
        if progress is not None:
            progress(stage, STAGES.index(stage), len(STAGES) - 1)
    return step


@dataclass
class Analysis:
    """Everything `analyze` found: the tagged timeline and what the header reports."""

    timeline: pl.DataFrame  # TIMELINE_SCHEMA columns, in timeline order
    detail: pl.DataFrame  # the same rows with every parsed field and the resolver's columns
    topology: Topology | None
    topology_source: str | None  # "--config FILE", "server_args line in FILE", or None
    sources: list[Source]
    warnings: list[str] = field(default_factory=list)
    contradictions: list[dict[str, object]] = field(default_factory=list)
    host_nodes: dict[str, int] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)

    def coverage(self) -> dict[str, int]:
        expected = len(self.topology.processes) if self.topology is not None else 0
        seen = self.detail["proc"].drop_nulls().n_unique()
        return {"expected_processes": expected, "processes_seen": seen,
                "files": len(self.sources), "lines": self.timeline.height,
                "lines_attributed": int(self.timeline["evidence"].is_not_null().sum())}

    def report(self) -> dict[str, object]:
        """The `--report` document: findings and coverage."""
        return {"findings": [f.to_json() for f in self.findings], "coverage": self.coverage()}

    def evidence_counts(self) -> dict[str, int]:
        counts = self.timeline.group_by("evidence").len().iter_rows()
        return {str(evidence): int(n) for evidence, n in counts if evidence is not None}

    def unattributed_reasons(self) -> dict[str, int]:
        rows = self.detail.filter(pl.col("why").is_not_null()).group_by("why").len().iter_rows()
        return {str(why): int(n) for why, n in rows}


def analyze(
    paths: Sequence[str | Path],
    *,
    config: str | Path | LaunchConfig | None = None,
    sglang_version: str | None = None,
    clock_offsets: dict[str, float] | None = None,
    validate: bool = True,
    progress: Progress | None = None,
) -> Analysis:
    """Parse, attribute and align every line under `paths`.

    `progress(stage, done, total)` is called as each of the STAGES starts.
    """
    step = _stepper(progress)
    step("reading")
    sources, warnings = discover(paths)
    lines, read_warnings = read_lines(sources)
    warnings += read_warnings
    step("parsing")
    parsed = parse(lines)
    declared, notes = _server_args_lines(parsed, sources, sglang_version)
    topology, topology_source = _topology(config, declared, sglang_version, validate, notes)
    file_nodes = _file_nodes(declared, topology, notes)
    step("attributing")
    resolution = resolve(parsed, topology, file_nodes=file_nodes)
    resolution.contradictions.extend(notes)
    resolution.contradictions.extend(_node_mismatches(resolution, file_nodes))
    step("aligning")
    kept = resolution.lines.select(c for c in resolution.lines.columns if c in _DETAIL_COLUMNS)
    detail = order_lines(complete_timestamps(kept), clock_offsets)
    timeline = _contract(detail, resolution, sources, file_nodes)
    contradictions = [_name_file(c, sources) for c in resolution.contradictions]
    step("diagnosing")
    context = Context(detail, topology, {s.file_id: s.display for s in sources},
                      people_table(timeline, detail))
    findings = diagnose(context, contradictions)
    step("done")
    return Analysis(timeline, detail, topology, topology_source, sources, warnings,
                    contradictions, resolution.host_nodes, findings)


@dataclass(frozen=True)
class _Declared:
    """A server_args line found in the logs, read into a launch config."""

    file_id: int
    line: int
    where: str
    config: LaunchConfig


def _server_args_lines(parsed: pl.DataFrame, sources: list[Source], version: str | None
                       ) -> tuple[list[_Declared], list[dict[str, object]]]:
    """Every readable server_args line; an unreadable one is a contradiction, not an error."""
    declared: list[_Declared] = []
    notes: list[dict[str, object]] = []
    rows = parsed.filter(pl.col("server_args").fill_null(False)).select("file_id", "line", "text")
    for file_id, line, text in rows.iter_rows():
        where = f"{sources[file_id].display}:{line}"
        try:
            values = fields_from_server_args_line(text)
            config = config_from_fields(values, source=f"server_args line in {where}",
                                        sglang_version=version)
        except ConfigError as error:
            notes.append(_note("server-args-unreadable", f"{error}; the line is ignored",
                               file_id, line))
            continue
        declared.append(_Declared(file_id, line, where, config))
    layouts = {tuple(asdict(sizes_of(d.config)).values()): d.where for d in declared}
    if len(layouts) > 1:
        notes.append(_note("server-args-differ", "server_args lines disagree on the layout: "
                           + "; ".join(sorted(layouts.values())) + " (the first one is used)"))
    return declared, notes


def _note(kind: str, detail: str, file_id: int | None = None, line: int | None = None
          ) -> dict[str, object]:
    return {"kind": kind, "count": 1, "detail": detail, "file_id": file_id, "line": line}


def _topology(config: str | Path | LaunchConfig | None, declared: list[_Declared],
              version: str | None, validate: bool, notes: list[dict[str, object]]
              ) -> tuple[Topology | None, str | None]:
    """The topology from --config (a bad one is an input error), else from the first
    server_args line in the logs (a bad one is a contradiction; analysis goes on without)."""
    if config is not None:
        launch = config if isinstance(config, LaunchConfig) else load_config(
            config, sglang_version=version, validate=validate)
        ours = asdict(sizes_of(launch))
        for found in declared:
            theirs = asdict(sizes_of(found.config))
            differs = [k for k in ours if ours[k] != theirs[k]]
            if differs:
                notes.append(_note("config-differs-from-logs", (
                    f"the server_args line in {found.where} gives "
                    + ", ".join(f"{k} {theirs[k]}" for k in differs) + " but the config gives "
                    + ", ".join(f"{k} {ours[k]}" for k in differs)), found.file_id, found.line))
        source = launch.source if isinstance(config, LaunchConfig) else f"--config {config}"
        return build_topology(launch, validate=validate), source
    if not declared:
        return None, None
    first = declared[0]
    try:
        topology = build_topology(with_overrides(first.config, node_rank=None),
                                  validate=validate)
    except ConfigError as error:
        notes.append(_note("server-args-rejected", f"{error}; analysed without a topology",
                           first.file_id, first.line))
        return None, None
    return topology, f"server_args line in {first.where.rsplit(':', 1)[0]}"


def _file_nodes(declared: list[_Declared], topology: Topology | None,
                notes: list[dict[str, object]]) -> dict[int, int]:
    """file_id -> node_rank its server_args lines name (when they agree and the node exists)."""
    nodes: dict[int, set[int]] = {}
    for found in declared:
        node = found.config.node_rank
        if node is None:
            continue
        if topology is not None and not 0 <= node < topology.sizes.nnodes:
            notes.append(_note("node-rank-outside-topology", (
                f"the server_args line in {found.where} says node_rank {node}, outside the "
                f"topology's {topology.sizes.nnodes} node(s)"), found.file_id, found.line))
            continue
        nodes.setdefault(found.file_id, set()).add(node)
    return {f: next(iter(n)) for f, n in nodes.items() if len(n) == 1}


def _node_mismatches(resolution: Resolution, file_nodes: dict[int, int]
                     ) -> list[dict[str, object]]:
    """Files whose server_args node_rank disagrees with the node of the processes in them."""
    if not file_nodes:
        return []
    nodes = resolution.processes.select("proc", "node_rank")
    rows = (resolution.lines.filter(pl.col("file_id").is_in(list(file_nodes))
                                    & pl.col("proc").is_not_null())
            .join(nodes, on="proc").select("file_id", "line", "node_rank"))
    notes: list[dict[str, object]] = []
    for (file_id,), group in rows.group_by("file_id", maintain_order=True):
        declared = file_nodes[int(file_id)]
        other = group.filter(pl.col("node_rank") != declared)
        if other.height:
            notes.append({"kind": "node-rank-mismatch", "count": other.height,
                          "file_id": int(file_id), "line": int(other["line"][0]),
                          "detail": f"the server_args line says node_rank {declared} but "
                          f"{other.height} line(s) come from processes the topology puts on "
                          f"node(s) {sorted(set(other['node_rank'].to_list()))}; their node and "
                          "GPU are left empty"})
    return notes


def _contract(detail: pl.DataFrame, resolution: Resolution, sources: list[Source],
              file_nodes: dict[int, int]) -> pl.DataFrame:
    """The output columns of the contract, in its order and types."""
    procs = resolution.processes.select("proc", *COORDINATES)
    names = pl.DataFrame({"file_id": [s.file_id for s in sources],
                          "file": [s.display for s in sources]},
                         schema={"file_id": pl.UInt32, "file": pl.String})
    node_of_file = pl.DataFrame({"file_id": list(file_nodes), "file_node": list(file_nodes.values())},
                                schema={"file_id": pl.UInt32, "file_node": pl.Int32})
    # joins on the key columns only; the wide detail frame is never copied
    frame = detail.select(*(c for c in TIMELINE_SCHEMA if c in detail.columns
                            and c not in COORDINATES and c not in ("ts", "role", "host")),
                          "proc", "role", "eff_host", "file_id")
    by_proc = frame.select("proc").join(procs, on="proc", how="left", maintain_order="left")
    by_file = (frame.select("file_id").join(names, on="file_id", how="left", maintain_order="left")
               .join(node_of_file, on="file_id", how="left", maintain_order="left"))
    frame = frame.with_columns(*by_proc.drop("proc"), *by_file.drop("file_id"),
                               ts_text(detail.get_column("ts_full")))
    # a line of a process the topology puts on another node than its file's server_args line
    # says: the node (and so the GPU) is contradicted, the process is not
    wrong_node = (pl.col("node_rank") != pl.col("file_node")).fill_null(False)
    frame = frame.with_columns(
        pl.when(pl.col("proc").is_not_null()).then(pl.lit("scheduler"))
        .otherwise(pl.col("role")).alias("role"),
        pl.when(wrong_node).then(None)
        .otherwise(pl.coalesce("node_rank", "file_node")).alias("node_rank"),
        pl.when(wrong_node).then(None).otherwise(pl.col("gpu_id")).alias("gpu_id"),
        pl.col("eff_host").alias("host"),
    )
    return frame.select(pl.col(name).cast(dtype) for name, dtype in TIMELINE_SCHEMA.items())


def _name_file(contradiction: dict[str, object], sources: list[Source]) -> dict[str, object]:
    file_id = contradiction.get("file_id")
    named = dict(contradiction)
    named["file"] = sources[file_id].display if isinstance(file_id, int) else None
    named.pop("file_id", None)
    return named


def select_rows(analysis: Analysis, selector: Selector) -> pl.DataFrame:
    """Timeline rows whose coordinates match `selector` (see logcorr.selector)."""
    frame = analysis.timeline
    condition = pl.lit(True)
    for column, value in selector.values.items():
        condition &= pl.col(column) == value
    for token, value in selector.tokens.items():
        condition &= pl.col(PREFIX_TOKENS[token]) == value
    if selector.role is not None:
        condition &= pl.col("role") == selector.role
    if selector.group is not None:
        condition &= _group_condition(analysis.topology, *selector.group)
    return frame.filter(condition.fill_null(False))


def _group_condition(topology: Topology | None, name: str, world_rank: int) -> pl.Expr:
    from logcorr.errors import InputError

    if topology is None:
        raise InputError("--select group=... needs the topology: pass --config or logs with a "
                         "server_args line")
    members = list(topology.group_instance(name, world_rank))
    return pl.col("world_rank").is_in(members)
