"""`logcorr topology`: the JSON contract, --rank, and clean errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from logcorr.cli import main

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
CONFIG = FIXTURES / "configs" / "tp16_dp8_dpattn_2nodes.json"
PROCESS_KEYS = {"node_rank", "replica", "dp_rank", "pp_rank", "tp_rank", "world_rank", "gpu_id",
                "attn_dp_rank", "attn_cp_rank", "attn_tp_rank", "moe_dp_rank", "moe_ep_rank",
                "moe_tp_rank", "prefix", "proctitle"}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


class TestJsonContract:
    """The JSON document other tools compare."""

    def test_shape(self, capsys: pytest.CaptureFixture[str]) -> None:
        code, out, _ = run(capsys, "topology", "--config", str(CONFIG), "--format", "json")
        doc = json.loads(out)
        assert code == 0
        assert set(doc) == {"sizes", "processes", "groups"}
        assert set(doc["sizes"]) == {"tp", "pp", "replicas", "attn_dp", "attn_cp", "attn_tp",
                                     "moe_dp", "moe_ep", "moe_tp", "world", "nnodes"}
        assert all(set(p) == PROCESS_KEYS for p in doc["processes"])
        p10 = doc["processes"][10]
        assert (p10["node_rank"], p10["gpu_id"], p10["prefix"]) == (1, 2, " DP5 TP10 EP10")
        assert doc["groups"]["moe_ep"] == {"members": [list(range(16))], "alias_of": "tp"}
        assert doc["groups"]["attention_tp"]["members"][5] == [10, 11]

    def test_rank_filters_processes(self, capsys: pytest.CaptureFixture[str]) -> None:
        _, out, _ = run(capsys, "topology", "--config", str(CONFIG), "--format", "json",
                        "--rank", "DP5")
        assert [p["tp_rank"] for p in json.loads(out)["processes"]] == [10, 11]


class TestRich:
    """The tables a person reads."""

    def test_rank_explains_groups(self, capsys: pytest.CaptureFixture[str]) -> None:
        code, out, _ = run(capsys, "topology", "--config", str(CONFIG), "--rank", "tp=10")
        assert code == 0
        assert "sglang::scheduler_DP5_TP10_EP10" in out
        assert "[10 11]" in out

    def test_full_view_has_grid(self, capsys: pytest.CaptureFixture[str]) -> None:
        _, out, _ = run(capsys, "topology", "--config", str(CONFIG))
        assert "attention DP8 x CP1 x TP2" in out and "Attention layout" in out


class TestErrors:
    """Bad input: exit 2, one `logcorr: error:` line, no traceback."""

    @pytest.mark.parametrize(("content", "needle"), [
        ('{"tp_size": 16, "moe_dp_size": 2, "ep_size": 4}', "moe_dp_size"),
        ('{"tp_size": 8, "dp_size": 2, "nnodes": 2}', "multi-node"),
        ("{oops", "not valid JSON"),
    ])
    def test_bad_config(self, tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str,
                        needle: str) -> None:
        path = tmp_path / "args.json"
        path.write_text(content)
        code, out, err = run(capsys, "topology", "--config", str(path))
        assert code == 2 and out == ""
        assert err.count("logcorr: error:") == 1 and needle in err
        assert "Traceback" not in err

    def test_no_validate_computes_refused_layout(self, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
        path = tmp_path / "args.json"
        path.write_text('{"tp_size": 16, "moe_dp_size": 2, "ep_size": 4}')
        code, out, _ = run(capsys, "topology", "--config", str(path), "--no-validate",
                           "--format", "json")
        assert code == 0 and json.loads(out)["sizes"]["moe_tp"] == 2

    def test_unknown_rank(self, capsys: pytest.CaptureFixture[str]) -> None:
        code, _, err = run(capsys, "topology", "--config", str(CONFIG), "--rank", "tp=99")
        assert code == 2 and "no process matches" in err

    def test_bad_selector_and_usage(self, capsys: pytest.CaptureFixture[str]) -> None:
        assert run(capsys, "topology", "--config", str(CONFIG), "--rank", "foo=1")[0] == 2
        code, _, err = run(capsys, "topology")
        assert code == 2 and err.startswith("logcorr: error:")

    def test_python_dash_m(self) -> None:
        result = subprocess.run([sys.executable, "-m", "logcorr", "topology", "--config",
                                 str(CONFIG), "--format", "json"], capture_output=True, text=True,
                                check=False)
        assert result.returncode == 0 and json.loads(result.stdout)["sizes"]["tp"] == 16
