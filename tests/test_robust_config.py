"""Config and logs that contradict each other: a finding of kind `inconsistent`, never a failure;
launch values out of range: refused by name from --config, a contradiction from the logs.

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
import regex
from test_robustness import run_cli

from logcorr.api import analyze
from logcorr.config import MAX_GPU_ID, MAX_PROCESSES, config_from_fields
from logcorr.errors import ConfigError
from logcorr.topology import build_topology

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


# ------------------------------------------------------------------------------------------
# launch values outside what SGLang accepts or logcorr can build

# field=value -> the field the one error line must name
OUT_OF_RANGE = {
    "base_gpu_id=2147483648": "base_gpu_id",
    "base_gpu_id=100000000000000000000": "base_gpu_id",
    "base_gpu_id=-1": "base_gpu_id",
    "gpu_id_step=4294967296": "gpu_id_step",
    "tp_size=65537": "tp_size",
    "tp_size=-8": "tp_size",
    "nnodes=1000000000": "nnodes",
    "node_rank=2147483648": "node_rank",
    "ep_size=" + "9" * 5000: "ep_size",
}


def _spellings(field: str, value: str) -> dict[str, str]:
    """One launch config with `field=value` (else the TP8 crash fixture's layout) in each
    spelling --config reads: file name -> text."""
    flag = "--" + field.replace("_", "-")
    command = f"python -m sglang.launch_server --model-path m --tp-size 8 {flag} {value}"
    values = {"tp_size": 8, field: int(value) if len(value) < 4000 else value}
    return {
        "args.json": json.dumps(values),
        "command.txt": command,
        "launch.sh": f"#!/bin/sh\nexport NCCL_DEBUG=INFO\n{command} \\\n  --trust-remote-code\n",
        "server.log": (f"[2026-11-29 10:00:00] server_args=ServerArgs({field}={value}, "
                       "tp_size=8, pp_size=1, dp_size=1, nnodes=1, ep_size=1, "
                       "enable_dp_attention=False)\n"),  # (the first value of a field counts)
    }


class TestLaunchValuesOutOfRange:
    """A launch value outside its range is refused by name from every spelling of --config
    (exit 2, one line: once a polars ComputeError traceback, or a hang), and makes a logged
    server_args line a contradiction the analysis goes on after."""

    @pytest.mark.parametrize("setting", sorted(OUT_OF_RANGE))
    @pytest.mark.parametrize("spelling", ["args.json", "command.txt", "launch.sh", "server.log"])
    def test_config_refused_by_name(self, tmp_path: Path, setting: str, spelling: str) -> None:
        field, _, value = setting.partition("=")
        config = tmp_path / spelling
        config.write_text(_spellings(field, value)[spelling])
        for argv in (["topology", "--config", str(config), "--no-validate"],
                     ["analyze", str(FIXTURE / "logs"), "--config", str(config),
                      "--format", "jsonl", "-o", str(tmp_path / "out.jsonl")]):
            code, _, err = run_cli(argv)
            errors = [line for line in err.splitlines() if line.startswith("logcorr: error:")]
            assert code == 2 and len(errors) == 1 and "Traceback" not in err, err
            assert field in errors[0] and len(errors[0]) < 300, errors[0]

    @pytest.mark.parametrize("setting", ["base_gpu_id=2147483648", "node_rank=2147483648",
                                         "base_gpu_id=100000000000000000000"])
    def test_logged_server_args_line_is_ignored(self, tmp_path: Path, setting: str) -> None:
        """node1.log's server_args line says base_gpu_id=2^31: that line is a contradiction
        naming the field and the analysis goes on (without it), every line kept."""
        field = setting.partition("=")[0]
        found, rows = _run(tmp_path, lambda logs: _edit(
            logs, "node1.log", lambda t: regex.sub(rf"\b{field}=\d+", setting, t, count=1)))
        assert any(field in str(f["summary"]) and "ignored" in str(f["summary"])
                   for f in found), found
        assert {r["gpu_id"] for r in rows} <= set(range(16)) | {None}

    @pytest.mark.parametrize("values", [
        {"tp_size": 8, "enable_dp_attention": "x" * 100_000},
        {"tp_size": 8, "watchdog_timeout": "x" * 100_000},
        {"tp_size": 8, "sglang_version": "0" * 100_000},
        {"tp_size": 8, "moe_a2a_backend": "x" * 100_000},
        {"tp_size": "x" * 100_000},
    ], ids=["flag", "timeout", "version", "backend", "size"])
    def test_long_value_is_shown_cut(self, tmp_path: Path, values: dict[str, object]) -> None:
        """A value of 100,000 characters is named in a short line, not printed whole."""
        config = tmp_path / "args.json"
        config.write_text(json.dumps(values))
        code, _, err = run_cli(["topology", "--config", str(config)])
        assert code == 2 and len(err.splitlines()) == 1 and len(err) < 500, err[:600]

    def test_too_many_processes_refused_before_reading(self) -> None:
        """More than MAX_PROCESSES processes (here 131,072, and a billion nodes, which once
        hung `--no-validate` in a loop over nodes) is refused before a log line is read."""
        stages: list[str] = []
        for launch in ({"tp_size": 512, "pp_size": 256}, {"tp_size": 1, "nnodes": 10**9}):
            with pytest.raises(ConfigError, match="nnodes|131,072 scheduler processes"):
                analyze([FIXTURE / "logs"], validate=False, progress=lambda s, d, t: stages.append(s),
                        config=config_from_fields(launch, source="test"))
        assert stages == []

    def test_widest_layout_is_built(self) -> None:
        """Exactly MAX_PROCESSES processes (and the largest GPU id) is still a layout."""
        topology = build_topology(config_from_fields(
            {"tp_size": 64, "pp_size": 8, "dp_size": 128, "base_gpu_id": MAX_GPU_ID - MAX_PROCESSES + 1},
            source="test"), validate=False)
        assert len(topology.processes) == MAX_PROCESSES
        assert max(p.gpu_id for p in topology.processes) == MAX_GPU_ID
