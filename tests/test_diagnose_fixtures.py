"""Diagnosis over the fixture library: each scenario's culprit, named with its coordinates.

scenario.json (written by benchmarks/generate.py from what it made happen) says which finding
kind is expected and which (replica, world_rank) processes are its culprits.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from logcorr.api import Analysis, analyze

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "analyze"
CASES = sorted(p for p in ROOT.iterdir() if (p / "scenario.json").exists())


def scenario(case: Path) -> dict[str, object]:
    return json.loads((case / "scenario.json").read_text())


def culprits(analysis: Analysis, kind: str) -> list[list[int]]:
    found = [f for f in analysis.findings if f.kind == kind and f.severity == "error"]
    assert found, [f.summary for f in analysis.findings]
    return sorted([p["replica"], p["world_rank"]] for p in found[0].processes)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
class TestScenario:
    """The expected finding names exactly the expected culprits, and is the only error."""

    def test_culprit(self, case: Path) -> None:
        expected = scenario(case)
        analysis = analyze([case / "logs"], config=case / "args.json")
        if expected["finding"] is None:
            assert [f for f in analysis.findings if f.severity == "error"] == []
            return
        assert culprits(analysis, str(expected["finding"])) == expected["culprits"]
        # one incident, one verdict: its consequences are folded under it
        assert [f.kind for f in analysis.findings if f.severity == "error"] == [
            expected["finding"]]
        missing = [[p["replica"], p["world_rank"]] for f in analysis.findings
                   if f.kind == "missing-process" for p in f.processes]
        assert sorted(missing) == expected["missing"]

    def test_same_culprit_when_files_renamed_and_reordered(self, case: Path,
                                                           tmp_path: Path) -> None:
        expected = scenario(case)
        if expected["finding"] is None:
            return
        files = sorted(p for p in (case / "logs").iterdir())
        renamed = []
        for index, path in enumerate(reversed(files)):
            target = tmp_path / f"zz-{index:03d}-{path.stem[::-1]}.txt"
            shutil.copy(path, target)
            renamed.append(target)
        analysis = analyze(list(reversed(renamed)), config=case / "args.json")
        assert culprits(analysis, str(expected["finding"])) == expected["culprits"]


_STAMP = re.compile(r"(\[\d{4}-\d{2}-\d{2} )(\d{2}):(\d{2}):(\d{2})")


def shift_clock(text: str, seconds: int) -> str:
    """Move every SGLang timestamp forward by `seconds` (within the hour, as in the fixtures)."""
    def move(match: re.Match[str]) -> str:
        total = int(match[2]) * 3600 + int(match[3]) * 60 + int(match[4]) + seconds
        return f"{match[1]}{total // 3600:02d}:{total // 60 % 60:02d}:{total % 60:02d}"
    return _STAMP.sub(move, text)


def test_hang_culprit_survives_a_shifted_host_clock(tmp_path: Path) -> None:
    """node1's clock runs 40 s ahead: same culprit."""
    case = ROOT / "tp16-dpattn8-ep-hang-per-node"
    (tmp_path / "logs").mkdir()
    for path in (case / "logs").iterdir():
        text = path.read_text()
        if path.name == "node1.log":
            text = shift_clock(text, 40)
        (tmp_path / "logs" / path.name).write_text(text)
    analysis = analyze([tmp_path / "logs"], config=case / "args.json")
    assert culprits(analysis, "collective-hang") == scenario(case)["culprits"]


def test_cuda_fault_through_watchdog_is_a_crash_not_a_hang() -> None:
    analysis = analyze([ROOT / "tp8-watchdog-cuda-per-rank" / "logs"])
    kinds = {f.kind for f in analysis.findings if f.severity == "error"}
    assert "crash" in kinds and "collective-hang" not in kinds
    crash = next(f for f in analysis.findings if f.kind == "crash")
    assert "illegal memory access" in crash.summary


def test_crash_cascade_is_attached_not_separate() -> None:
    analysis = analyze([ROOT / "tp8-crash-per-node" / "logs"])
    crashes = [f for f in analysis.findings if f.kind == "crash"]
    assert len(crashes) == 1
    assert "other process(es) failed after it" in crashes[0].summary
    assert [p["world_rank"] for p in crashes[0].waiting] == [0]
    assert len(crashes[0].evidence) >= 4


def test_hard_wrapped_watchdog_line_still_counts(tmp_path: Path) -> None:
    """`WorkNCCL(S` / `eqNum=…` cut by a terminal copy: SeqNum and op are read across the cut."""
    logs = tmp_path / "logs"
    logs.mkdir()
    for rank in (0, 1):
        line = (f"[rank{rank}]:[E1129 10:10:00.000000000 ProcessGroupNCCL.cpp:607] [PG ID 2 PG "
                f"GUID 3(tp:device) Rank {rank}] Watchdog caught collective operation timeout: "
                "WorkNCCL(SeqNum=77, OpType=ALLGATHER, NumelIn=8, NumelOut=24, Timeout(ms)=600000)")
        cut = line.index("WorkNCCL(S") + len("WorkNCCL(S")
        (logs / f"rank{rank}.log").write_text(
            f"[2026-11-29 10:00:00 TP{rank}] Decode batch, #running-req: 3\n"
            f"{line[:cut]}\n{line[cut:]}\n")
    (logs / "rank2.log").write_text("[2026-11-29 10:00:00 TP2] Decode batch, #running-req: 3\n")
    (tmp_path / "args.json").write_text('{"tp_size": 3}')
    analysis = analyze([logs], config=tmp_path / "args.json")
    hang = next(f for f in analysis.findings if f.kind == "collective-hang")
    assert (hang.seq, hang.op) == (77, "ALLGATHER")
    assert [p["world_rank"] for p in hang.processes] == [2]
