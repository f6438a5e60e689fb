"""`missing-process`: processes the topology expects that left no line.

Reads: the topology and the processes seen. Cannot decide: whether a missing process ran at all
(its log may simply not have been collected)."""

from __future__ import annotations

from logcorr.diagnose.context import (
    Context,
    Finding,
    _person,
)
from logcorr.diagnose.ranges import world_ranks
from logcorr.topology import Topology


def missing_findings(ctx: Context) -> list[Finding]:
    if ctx.topology is None:
        return []
    seen = set(ctx.people)
    missing = [i for i in range(len(ctx.topology.processes)) if i not in seen]
    if not missing or not seen:
        return []
    nodes_seen = {ctx.topology.processes[p].node_rank for p in seen}
    by_node: dict[int, list[int]] = {}
    for index in missing:
        by_node.setdefault(ctx.topology.processes[index].node_rank, []).append(index)
    findings = []
    for node, procs in sorted(by_node.items()):
        whole = node not in nodes_seen
        people = [_person(ctx, p) for p in procs]
        summary = (f"node {node}: none of its {len(procs)} scheduler(s) left a line; its log "
                   "is missing entirely" if whole else
                   f"{len(procs)} scheduler(s) on node {node} left no line: "
                   f"{_ranks_text(ctx.topology, procs)}")
        findings.append(Finding("missing-process", "warning", summary, people))
    return findings


def _ranks_text(topology: Topology, procs: list[int]) -> str:
    """`world ranks 0, 1` / `world ranks 8–15`, or with native-DP replicas (where world ranks
    repeat) `replica 0 world rank 1; replica 1 world ranks 0, 1`."""
    return world_ranks(({"replica": topology.processes[p].replica,
                         "world_rank": topology.processes[p].world_rank} for p in procs),
                       replicas=topology.sizes.replicas > 1)
