"""Rules: (tagged timeline, topology) -> findings that name the process that went wrong.

A watchdog timeout is a symptom: every healthy member of a hung collective times out and
shouts, while the one that caused it is often the quietest. So the rules compare members of one
group instance and look for the odd one out:

| kind              | rests on                                                                    |
|-------------------|-----------------------------------------------------------------------------|
| crash             | a process's first exception / fatal error, or its death of an uncaught     |
|                   | exception (`death`); the earliest is the root (a hang's teardown is not a   |
|                   | crash: see `teardown`)                                                      |
| collective-hang   | torch watchdog timeouts of one group instance: members behind the SeqNum the |
|                   | others wait on, or silent, are culprits; the ones that timed out are waiting |
| watchdog-timeout  | SGLang's own watchdog fired: those processes hung (or waited for a crashed  |
|                   | one: then a consequence of the crash)                                       |
| init-hang         | a startup phase begun and never ended (NCCL `Init START` without COMPLETE,  |
|                   | `Init … begin` without its end, weights never loaded) while others went on  |
| missing-process   | processes of the topology that left no line at all                          |
| stalled           | a process whose last line is far earlier than its TP peers', no timeout      |
| inconsistent      | the config and the logs disagree                                            |
| clock-skew        | one collective timing out at different times on different hosts             |

One module per finding kind, over the shared `context` (the rows the rules read, who each
process is, the message stems): `crash`, `hang`, `watchdog`, `init`, `missing`, `transfer`,
`stalled` (with `unresponsive`), `clock`. Beside them: `teardown` (which fatal lines are a
hang's teardown), `death` (which raw tracebacks are their process's death, and what launchers
say of their children), `identity` (the process a fatal line's own rank tag names), `incident` (one
verdict per incident: each error finding's role, consequences folded under their root),
`consequences` (one record per kind), `ranges` (member lists as ranges). `diagnose` runs the
rules in order, folds the incidents and sorts the findings.
"""

from __future__ import annotations

import polars as pl

from logcorr.diagnose.clock import clock_findings, order_window
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
    lines_in,
    merge_people,
    thin_events,
)
from logcorr.diagnose.crash import crash_findings, fatal_rows, teardown_rows
from logcorr.diagnose.hang import hang_findings
from logcorr.diagnose.incident import one_verdict
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
           "crash_findings", "diagnose", "hang_findings", "init_findings",
           "lines_in", "merge_people", "missing_findings", "stalled_findings", "thin_events",
           "transfer_findings", "unresponsive_findings", "watchdog_findings"]


def diagnose(ctx: Context, contradictions: list[dict[str, object]]) -> list[Finding]:
    """All findings, one error verdict per incident (`incident.one_verdict`), errors first,
    then by time."""
    findings: list[Finding] = []
    fatal = fatal_rows(ctx)  # (read once: the crashes and the hangs' teardown)
    crashes = crash_findings(ctx, fatal)
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
                 for c in contradictions if not c.get("note")]
    findings = one_verdict(ctx, findings, teardown_rows(ctx, fatal), order_window(ctx))
    _name_streams(ctx, findings)
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    return sorted(findings, key=lambda f: (rank[f.severity], f.first_ts or "~", f.kind))


def _name_streams(ctx: Context, findings: list[Finding]) -> None:
    """A finding that names no process but whose evidence lines, tied to no process, came
    through a wrapper stream (Ray's `(WorkerDict pid=859188)`) says which: `stream` is the
    first such line's (the culprit is known only by it), the summary names up to three."""
    if "stream" not in ctx.events.columns:
        return
    named = ctx.events.filter(pl.col("stream").is_not_null() & pl.col("proc").is_null())
    if named.height == 0:
        return
    ids = {name: file_id for file_id, name in ctx.files.items()}
    for finding in findings:
        if finding.processes or not finding.evidence:
            continue
        places = [(ids.get(c["file"]), c["line"]) for c in finding.evidence]
        streams = named.join(pl.DataFrame(places, schema={"file_id": pl.UInt32,
                                                          "line": pl.UInt32}, orient="row"
                                              ).unique(),
                             on=["file_id", "line"]).sort("order")["stream"].unique(
            maintain_order=True).to_list()
        if streams:
            finding.stream = streams[0]
            finding.summary = (f"in the stream{'s' if len(streams) > 1 else ''} "
                               f"{', '.join(streams[:3])}: {finding.summary}")
