"""Incidents stamped at the calendar's edges: the diagnosis of a crash or hang in the first
minutes of year 1 or the last of year 9999 is that of the same incident in 2026. (A rule's
window before or after a record once ran off the calendar: `OverflowError: date value out of
range`, exit 1, no output.)

Each case is a fixture whose stamps are moved to an edge, analysed through the command line
with --report, beside the same fixture in 2026.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from test_robustness import run_cli

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "analyze"

# Where the fixtures' stamps go (their incidents are at 10:00-10:01, hangs time out at 10:11).
YEAR_1 = {"2026-11-29 10:00": "0001-01-01 00:00", "2026-11-29 10:01": "0001-01-01 00:01",
          "2026-11-29 10:11": "0001-01-01 00:02", "E1129 10:11": "E0101 00:02"}
YEAR_9999 = {"2026-11-29 10:00": "9999-12-31 23:50", "2026-11-29 10:01": "9999-12-31 23:59",
             "2026-11-29 10:11": "9999-12-31 23:59", "E1129 10:11": "E1231 23:59"}
# tp8-crash with the victim's exception (TP0: "remote process exited") printed a second before
# the culprit's, on a line of its own: the rule looks a minute past the first failure
VICTIM_FIRST = {"10:01:11 TP0] Scheduler hit": "10:01:08 TP0] Scheduler hit",
                "2.24it/s][2026": "2.24it/s]\n[2026"}

CASES = {
    # the crash rule looks for NCCL warnings ten minutes before the crash
    "crash-year-1": ("tp8-crash-per-node", {}, YEAR_1),
    "crash-year-9999": ("tp8-crash-per-node", {}, YEAR_9999),
    "victim-first-year-1": ("tp8-crash-per-rank", VICTIM_FIRST, YEAR_1),
    "victim-first-year-9999": ("tp8-crash-per-rank", VICTIM_FIRST, YEAR_9999),
    # a hang across native-DP replicas: SGLang watchdogs within ten minutes either side
    "replica-hang-year-1": ("dp2-tp4-replica1-hang-per-node", {}, YEAR_1),
    "replica-hang-year-9999": ("dp2-tp4-replica1-hang-per-node", {}, YEAR_9999),
    "tp16-hang-year-1": ("tp16-dpattn8-ep-hang-per-node", {}, YEAR_1),
}


def _findings(tmp_path: Path, fixture: str, *edits: dict[str, str]) -> list[dict[str, object]]:
    """The findings of `fixture`'s logs with `edits` applied (exit 0, no traceback)."""
    logs = tmp_path / "logs"
    shutil.rmtree(logs, ignore_errors=True)
    logs.mkdir()
    for path in (FIXTURES / fixture / "logs").iterdir():
        text = path.read_text()
        for edit in edits:
            for old, new in edit.items():
                text = text.replace(old, new)
        (logs / path.name).write_text(text)
    report = tmp_path / "report.json"
    code, _, err = run_cli(["analyze", str(logs), "--config", str(FIXTURES / fixture / "args.json"),
                            "--format", "jsonl", "-o", str(tmp_path / "out.jsonl"),
                            "--report", str(report)])
    assert code == 0 and "Traceback" not in err, err[-2000:]
    return list(json.loads(report.read_text())["findings"])


def _verdict(finding: dict[str, object]) -> tuple[object, ...]:
    processes = finding.get("processes") or []
    return (finding["kind"], finding["severity"],
            sorted(p["world_rank"] for p in processes))  # type: ignore[union-attr,index]


@pytest.mark.parametrize("case", sorted(CASES))
def test_incident_at_the_calendars_edge(tmp_path: Path, case: str) -> None:
    fixture, edit, edge = CASES[case]
    moved = _findings(tmp_path, fixture, edit, edge)
    assert moved, "no finding"
    assert [_verdict(f) for f in moved] == [_verdict(f) for f in _findings(tmp_path, fixture, edit)]
    year = "0001-" if edge is YEAR_1 else "9999-"
    assert all(str(f["first_ts"]).startswith(year) for f in moved if f.get("first_ts"))
