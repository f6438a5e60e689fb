"""Config and logs that contradict each other: a finding of kind `inconsistent`, never a failure.

Each case copies a 2-node TP16 / attention-DP8 fixture, damages its logs, and runs analyze
through the CLI with --report; the run must exit 0, keep every line, and report the
contradiction.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from test_robustness import run_cli

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "analyze" / "tp16-dpattn8-ep-hang-per-node"
CONFIG = str(FIXTURE / "args.json")


def _edit(logs: Path, name: str, change: Callable[[str], str]) -> None:
    path = logs / name
    path.write_text(change(path.read_text()))


def _run(tmp_path: Path, change: Callable[[Path], None], *config: str
         ) -> tuple[list[dict[str, object]], list[dict[str, object]]]:
    """analyze a damaged copy; (findings of kind inconsistent, timeline rows)."""
    logs = tmp_path / "logs"
    shutil.copytree(FIXTURE / "logs", logs)
    change(logs)
    lines = sum(len(p.read_bytes().splitlines()) for p in logs.iterdir())
    out, report = tmp_path / "out.jsonl", tmp_path / "report.json"
    code, _, err = run_cli(["analyze", str(logs), *config, "--format", "jsonl", "-o", str(out),
                            "--report", str(report)])
    assert code == 0, err
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len({(r["file"], r["line"]) for r in rows}) == lines
    findings = json.loads(report.read_text())["findings"]
    return [f for f in findings if f["kind"] == "inconsistent"], rows


def _tp20(logs: Path) -> None:
    _edit(logs, "node0.log", lambda t: t + "[2026-11-29 10:00:09 DP0 TP20 EP20] Scheduler hi\n")


def _node_rank_0_in_node1(logs: Path) -> None:
    _edit(logs, "node1.log", lambda t: t.replace("node_rank=1", "node_rank=0"))


def _node_rank_outside(logs: Path) -> None:
    _edit(logs, "node1.log", lambda t: t.replace("node_rank=1", "node_rank=7"))


def _server_args_differ(logs: Path) -> None:
    _edit(logs, "node1.log", lambda t: t.replace("tp_size=16", "tp_size=8", 1))


def _all_server_args_say_tp8(logs: Path) -> None:
    for name in ("node0.log", "node1.log"):
        _edit(logs, name, lambda t: t.replace("tp_size=16", "tp_size=8").replace(
            "dp_size=8", "dp_size=4"))


def _server_args_value(value: str) -> Callable[[Path], None]:
    def change(logs: Path) -> None:
        for name in ("node0.log", "node1.log"):
            _edit(logs, name, lambda t: t.replace("tp_size=16", f"tp_size={value}"))
    return change


class TestContradictions:
    @pytest.mark.parametrize("config", [(), ("--config", CONFIG)], ids=["logs", "config"])
    def test_rank_outside_topology(self, tmp_path: Path, config: tuple[str, ...]) -> None:
        """`TP20` under tp_size=16: reported, the line kept without coordinates."""
        found, rows = _run(tmp_path, _tp20, *config)
        assert any("TP20" in str(f["summary"]) for f in found)
        tp20 = [r for r in rows if "TP20" in r["text"]]
        assert len(tp20) == 1 and tp20[0]["world_rank"] is None

    @pytest.mark.parametrize("config", [(), ("--config", CONFIG)], ids=["logs", "config"])
    def test_node_rank_does_not_match(self, tmp_path: Path, config: tuple[str, ...]) -> None:
        """node1.log's server_args says node_rank=0 although its ranks live on node 1."""
        found, _ = _run(tmp_path, _node_rank_0_in_node1, *config)
        assert any("node_rank 0" in str(f["summary"]) for f in found)

    def test_server_args_lines_differ(self, tmp_path: Path) -> None:
        """Two nodes' server_args lines disagree on tp_size."""
        found, _ = _run(tmp_path, _server_args_differ)
        assert any("disagree" in str(f["summary"]) for f in found)

    def test_config_contradicts_every_server_args_line(self, tmp_path: Path) -> None:
        """--config tp_size=16 while every server_args line says tp_size=8: a finding."""
        found, _ = _run(tmp_path, _all_server_args_say_tp8, "--config", CONFIG)
        assert found

    def test_node_rank_outside_topology_not_stamped(self, tmp_path: Path) -> None:
        """A node_rank the topology does not have is reported and not copied into rows."""
        found, rows = _run(tmp_path, _node_rank_outside, "--config", CONFIG)
        assert found
        assert {r["node_rank"] for r in rows} <= {0, 1, None}


class TestBadServerArgsInLogs:
    def test_rejected_values(self, tmp_path: Path) -> None:
        """A server_args line with tp_size=-8 does not stop the analysis."""
        found, _ = _run(tmp_path, _server_args_value("-8"))
        assert found

    def test_non_finite_value(self, tmp_path: Path) -> None:
        """A server_args line with tp_size='inf' does not crash the analysis."""
        _run(tmp_path, _server_args_value("'inf'"))

    def test_damaged_node_rank(self, tmp_path: Path) -> None:
        """A server_args line with node_rank=1x: exit 0 with --config, the line kept."""
        _run(tmp_path, lambda logs: _edit(logs, "node1.log",
                                          lambda t: t.replace("node_rank=1", "node_rank=1x")),
             "--config", CONFIG)
