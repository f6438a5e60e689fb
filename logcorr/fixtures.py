"""Regression fixtures: a known incident's logs with the timeline and report accepted for it.

A fixture is a folder:

    logs/                 the incident's logs, any layout
    args.json             launch args (or command.txt / launch.sh with the launch command);
                          optional when the logs carry a server_args line
    expected/timeline.jsonl   the analyze jsonl contract, one sorted-key record per line
    expected/report.json      the diagnosis report (sorted keys)

`check` re-runs the analysis and compares: which findings changed (kind, culprit, group) and
which lines changed attribution, with their old and new coordinates.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from logcorr.api import Analysis, analyze
from logcorr.errors import FixtureError
from logcorr.model import COORDINATES

CONFIG_NAMES = ("args.json", "command.txt", "launch.sh", "args.txt")
ATTRIBUTION = ("role", "evidence", *COORDINATES)


@dataclass(frozen=True)
class Fixture:
    path: Path
    config: Path | None

    @property
    def logs(self) -> Path:
        return self.path / "logs"

    @property
    def expected(self) -> Path:
        return self.path / "expected"


@dataclass
class Comparison:
    """What differs between a fixture's expected output and today's analysis."""

    fixture: str
    findings_changed: list[dict[str, Any]] = field(default_factory=list)
    lines_changed: int = 0
    line_examples: list[dict[str, Any]] = field(default_factory=list)
    lines_added: int = 0
    lines_removed: int = 0
    other_changes: list[str] = field(default_factory=list)

    @property
    def matches(self) -> bool:
        return not (self.findings_changed or self.lines_changed or self.lines_added
                    or self.lines_removed or self.other_changes)

    def to_json(self) -> dict[str, Any]:
        return {"fixture": self.fixture, "matches": self.matches,
                "findings_changed": self.findings_changed, "lines_changed": self.lines_changed,
                "line_examples": self.line_examples, "lines_added": self.lines_added,
                "lines_removed": self.lines_removed, "other_changes": self.other_changes}


def open_fixture(path: str | Path, *, need_expected: bool) -> Fixture:
    """Check the folder has what a fixture needs; FixtureError names what is missing."""
    folder = Path(path)
    if not folder.is_dir():
        raise FixtureError(f"fixture {folder} is not a folder; pass a folder holding logs/ and "
                           "expected/ (create one with `logcorr fixture new`)")
    if not (folder / "logs").is_dir():
        raise FixtureError(f"fixture {folder} has no logs/ folder; put the incident's logs there")
    config = next((folder / n for n in CONFIG_NAMES if (folder / n).is_file()), None)
    if need_expected:
        for name in ("timeline.jsonl", "report.json"):
            if not (folder / "expected" / name).is_file():
                raise FixtureError(f"fixture {folder} has no expected/{name}; run `logcorr check "
                                   f"{folder} --update` to accept the current analysis")
    return Fixture(folder, config)


def run(fixture: Fixture) -> Analysis:
    return analyze([fixture.logs], config=fixture.config)


def timeline_records(analysis: Analysis) -> list[dict[str, Any]]:
    return analysis.timeline.to_dicts()


def report_document(analysis: Analysis) -> dict[str, Any]:
    return analysis.report()


def write_expected(fixture: Fixture, analysis: Analysis) -> None:
    """Write expected/ with sorted keys and stable order so diffs stay small."""
    fixture.expected.mkdir(parents=True, exist_ok=True)
    with open(fixture.expected / "timeline.jsonl", "w", encoding="utf-8") as stream:
        stream.writelines(json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n" for record in timeline_records(analysis))
    text = json.dumps(report_document(analysis), indent=1, sort_keys=True, default=str)
    (fixture.expected / "report.json").write_text(text + "\n", encoding="utf-8")


def read_expected(fixture: Fixture) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    try:
        lines = (fixture.expected / "timeline.jsonl").read_text(encoding="utf-8").splitlines()
        timeline = [json.loads(line) for line in lines if line.strip()]
        report = json.loads((fixture.expected / "report.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as error:
        raise FixtureError(f"fixture {fixture.path}: cannot read expected/: {error}; regenerate "
                           "it with --update") from None
    if not isinstance(report, dict) or "findings" not in report:
        raise FixtureError(f"fixture {fixture.path}: expected/report.json has no findings list")
    return timeline, report


def compare(fixture: Fixture, analysis: Analysis, examples: int = 5) -> Comparison:
    """Expected vs now: findings by (kind, group, culprits), lines by (file, line, part)."""
    old_timeline, old_report = read_expected(fixture)
    result = Comparison(str(fixture.path))
    result.findings_changed = _finding_changes(old_report, report_document(analysis))
    old = {_key(r): r for r in old_timeline}
    new = {_key(r): r for r in timeline_records(analysis)}
    result.lines_added = len(new.keys() - old.keys())
    result.lines_removed = len(old.keys() - new.keys())
    for key in sorted(old.keys() & new.keys(), key=lambda k: (str(k[0]), k[1], k[2])):
        before = {f: old[key].get(f) for f in ATTRIBUTION}
        after = {f: new[key].get(f) for f in ATTRIBUTION}
        if before != after:
            result.lines_changed += 1
            if len(result.line_examples) < examples:
                result.line_examples.append({"file": key[0], "line": key[1], "part": key[2],
                                             "text": str(new[key].get("text"))[:120],
                                             "old": _changed(before, after),
                                             "new": _changed(after, before)})
        elif _rest(old[key]) != _rest(new[key]):
            result.other_changes.append(f"{key[0]}:{key[1]} changed outside attribution")
    del result.other_changes[examples:]
    return result


def _key(record: dict[str, Any]) -> tuple[Any, Any, Any]:
    return (record.get("file"), record.get("line"), record.get("part"))


def _changed(mine: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in mine.items() if other.get(k) != v}


def _rest(record: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k not in ATTRIBUTION}


def _finding_identity(finding: dict[str, Any]) -> tuple[Any, ...]:
    culprits = tuple(sorted((p.get("replica"), p.get("world_rank"))
                            for p in finding.get("processes") or []))
    return (finding.get("kind"), finding.get("severity"), finding.get("group"), culprits)


def _finding_changes(old: dict[str, Any], new: dict[str, Any]) -> list[dict[str, Any]]:
    before = [_finding_identity(f) for f in old.get("findings", [])]
    after = [_finding_identity(f) for f in new.get("findings", [])]
    changes = []
    for identity in before:
        if identity not in after:
            changes.append({"change": "gone", **_describe(identity)})
    for identity in after:
        if identity not in before:
            changes.append({"change": "new", **_describe(identity)})
    return changes


def _describe(identity: tuple[Any, ...]) -> dict[str, Any]:
    kind, severity, group, culprits = identity
    return {"kind": kind, "severity": severity, "group": group,
            "culprits": [{"replica": r, "world_rank": w} for r, w in culprits]}


def new_fixture(logs: str | Path, config: str | Path | None, out: str | Path) -> Fixture:
    """Copy an incident's logs (and args) into a new fixture and accept today's analysis."""
    source, target = Path(logs), Path(out)
    if not source.exists():
        raise FixtureError(f"{source} does not exist; pass the incident's log folder or file")
    if target.exists() and any(target.iterdir()):
        raise FixtureError(f"{target} exists and is not empty; choose a new folder for -o")
    (target / "logs").mkdir(parents=True, exist_ok=True)
    if source.is_dir():
        shutil.copytree(source, target / "logs", dirs_exist_ok=True, symlinks=False)
    else:
        shutil.copy2(source, target / "logs" / source.name)
    if config is not None:
        name = "args.json" if str(config).endswith(".json") else "command.txt"
        shutil.copy2(config, target / name)
    fixture = open_fixture(target, need_expected=False)
    write_expected(fixture, run(fixture))
    return fixture
