"""Rules: (tagged timeline, topology) -> findings that name the process that went wrong.

A watchdog timeout is a symptom: every healthy member of a hung collective times out and
shouts, while the one that caused it is often the quietest. So the rules compare members of one
group instance and look for the odd one out:

| kind              | rests on                                                                    |
|-------------------|-----------------------------------------------------------------------------|
| crash             | a process's first exception / fatal error; the earliest is the root, the     |
|                   | SIGQUIT / kill cascade after it is attached, not reported as more roots     |
| collective-hang   | torch watchdog timeouts of one group instance: members behind the SeqNum the |
|                   | others wait on, or silent, are culprits; the ones that timed out are waiting |
| watchdog-timeout  | SGLang's own watchdog fired: those processes hung; the kill after it is      |
|                   | attached                                                                    |
| init-hang         | a startup phase begun and never ended (NCCL `Init START` without COMPLETE,  |
|                   | `Init … begin` without its end, weights never loaded) while others went on  |
| missing-process   | processes of the topology that left no line at all                          |
| stalled           | a process whose last line is far earlier than its TP peers', no timeout      |
| inconsistent      | the config and the logs disagree                                            |
| clock-skew        | one collective timing out at different times on different hosts             |

One module per finding kind, over the shared `context` (the rows the rules read, who each
process is, the message stems): `crash`, `hang`, `watchdog`, `init`, `missing`, `transfer`,
`stalled` (with `unresponsive`), `clock`. `diagnose` runs them in order and sorts the findings.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import polars as pl

from logcorr.diagnose.clock import clock_findings
from logcorr.diagnose.context import (
    ALL_STEMS,
    CASCADE_STEMS,
    CRASH_STEMS,
    PROGRESS_STEMS,
    SEVERITIES,
    SGLANG_WATCHDOG_STEMS,
    TIMEOUT_STEMS,
    Context,
    Finding,
    event_rows,
    lines_in,
    merge_people,
    thin_events,
)
from logcorr.diagnose.crash import crash_findings
from logcorr.diagnose.hang import hang_findings
from logcorr.diagnose.init import init_findings
from logcorr.diagnose.missing import missing_findings
from logcorr.diagnose.stalled import (
    stalled_findings,
    unresponsive_findings,
)
from logcorr.diagnose.transfer import transfer_findings
from logcorr.diagnose.watchdog import watchdog_findings

__all__ = ["ALL_STEMS", "CASCADE_STEMS", "CRASH_STEMS", "PROGRESS_STEMS", "SEVERITIES",
           "SGLANG_WATCHDOG_STEMS", "TIMEOUT_STEMS", "Context", "Finding", "clock_findings",
           "crash_findings", "diagnose", "event_rows", "hang_findings", "init_findings",
           "lines_in", "merge_people", "missing_findings", "stalled_findings", "thin_events",
           "transfer_findings", "unresponsive_findings", "watchdog_findings"]


def diagnose(ctx: Context, contradictions: list[dict[str, object]]) -> list[Finding]:
    """All findings, errors first, then by time."""
    findings: list[Finding] = []
    crashes = crash_findings(ctx)
    findings += crashes
    crashed = {p["world_rank"] for f in crashes for p in f.processes}
    findings += hang_findings(ctx, crashed)
    findings += watchdog_findings(ctx, findings)
    findings += unresponsive_findings(ctx, findings)
    findings += transfer_findings(ctx)
    findings += init_findings(ctx)
    findings += missing_findings(ctx)
    findings += stalled_findings(ctx, findings)
    findings += clock_findings(ctx)
    findings += [Finding("inconsistent", "warning", str(c["detail"]),
                         evidence=[{"file": c["file"], "line": c["line"]}] if c.get("file") else [])
                 for c in contradictions]
    findings = _one_verdict(findings)
    _name_streams(ctx, findings)
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    return sorted(findings, key=lambda f: (rank[f.severity], f.first_ts or "~", f.kind))


Key = tuple[Any, Any]


def _keys(people: list[dict[str, Any]]) -> set[Key]:
    return {(p.get("replica"), p.get("world_rank")) for p in people
            if p.get("world_rank") is not None}


def _involved(finding: Finding) -> set[Key]:
    """The processes a hang finding speaks of: culprits, waiting, unknown and the other members
    of its group instance."""
    keys = _keys(finding.processes + finding.waiting + finding.unknown)
    replicas = {r for r, _ in keys}
    if finding.group_members:
        keys |= {(r, m) for r in replicas for m in finding.group_members}
    return keys


def _when(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def _follows(later: Finding, root: Finding) -> bool:
    """`later` began no earlier than `root` (both have a time)."""
    a, b = _when(later.first_ts), _when(root.first_ts)
    return a is not None and b is not None and a >= b


def _one_verdict(findings: list[Finding]) -> list[Finding]:
    """One incident, one verdict: what followed from a root is attached to it as a consequence
    rather than reported as another root. After a collective hang: the SGLang watchdogs of its
    members, and the crashes of its members that came after it (torch's abort after the
    timeout); after an SGLang watchdog: its processes' later crashes; after a crash: a hang
    whose culprits are the crashed process(es)."""
    errors = [f for f in findings if f.severity == "error"]
    attached: set[int] = set()

    def attach(child: Finding, root: Finding) -> None:
        root.consequences.append(child.as_consequence())
        root.consequences.extend(child.consequences)
        attached.add(id(child))

    hangs = [f for f in errors if f.kind == "collective-hang"]
    crashes = [f for f in errors if f.kind == "crash"]
    for crash in crashes:
        culprits = _keys(crash.processes)
        for hang in hangs:
            if (culprits and _keys(hang.processes) and _keys(hang.processes) <= culprits
                    and _follows(hang, crash) and id(hang) not in attached):
                attach(hang, crash)
    roots = [h for h in hangs if id(h) not in attached]
    for watchdog in (f for f in errors if f.kind == "watchdog-timeout"):
        people = _keys(watchdog.processes + watchdog.waiting)
        root = next((h for h in roots if people and people <= _involved(h)), None)
        # (the member the others waited for had crashed before their watchdogs fired)
        root = root or next((c for c in crashes if _keys(watchdog.processes)
                             and _keys(watchdog.processes) <= _keys(c.processes)
                             and _follows(watchdog, c)), None)
        if root is not None:
            attach(watchdog, root)
        else:
            roots.append(watchdog)
    for crash in crashes:
        if id(crash) in attached:
            continue
        people = _keys(crash.processes) or _keys(crash.waiting)
        root = next((r for r in roots if people and people <= _involved(r)
                     and _follows(crash, r)), None)
        if root is not None:
            attach(crash, root)
    return [f for f in findings if id(f) not in attached]


def _name_streams(ctx: Context, findings: list[Finding]) -> None:
    """A finding that names no process but whose evidence lines came through a wrapper stream
    (`stream`: Ray's `(WorkerDict pid=859188)`) says which stream."""
    if "stream" not in ctx.events.columns:
        return
    named = ctx.events.filter(pl.col("stream").is_not_null())
    if named.height == 0:
        return
    ids = {name: file_id for file_id, name in ctx.files.items()}
    for finding in findings:
        if finding.processes or not finding.evidence:
            continue
        places = [(ids.get(c["file"]), c["line"]) for c in finding.evidence]
        streams = named.join(pl.DataFrame(places, schema={"file_id": pl.UInt32,
                                                          "line": pl.UInt32}, orient="row"),
                             on=["file_id", "line"]).sort("order")["stream"].unique(
            maintain_order=True).to_list()
        if streams:
            finding.summary = (f"in the stream{'s' if len(streams) > 1 else ''} "
                               f"{', '.join(streams[:3])}: {finding.summary}")
