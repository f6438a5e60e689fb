"""The topology model against SGLang's own code.

fixtures/topology/sglang_truth/<version>/*.json were produced by running SGLang's launcher,
`initialize_model_parallel` and the scheduler's prefix code (tools/sglang_truth.py; see
tools/README-sglang-truth.md). Each file names the SGLang version it was computed with, the
launch args, whether SGLang accepted them, and the resulting topology.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from logcorr.config import config_from_fields
from logcorr.errors import ConfigError
from logcorr.topology import build_topology, check_config, topology_to_json

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "topology" / "sglang_truth"
CASES = sorted(ROOT.glob("*/*.json"))


def load(path: Path) -> dict[str, object]:
    data = json.loads(path.read_text())
    data.setdefault("sglang_version", path.parent.name)
    return data


@pytest.mark.parametrize("path", CASES, ids=[f"{p.parent.name}/{p.stem}" for p in CASES])
def test_matches_sglang(path: Path) -> None:
    truth = load(path)
    if not truth["valid"]:  # (refused when read, or by SGLang's rules)
        with pytest.raises(ConfigError):
            check_config(config_from_fields(
                dict(truth["config"]), source=path.name,  # type: ignore[arg-type]
                sglang_version=str(truth["sglang_version"])))
        return
    config = config_from_fields(dict(truth["config"]), source=path.name,  # type: ignore[arg-type]
                                sglang_version=str(truth["sglang_version"]))
    ours = topology_to_json(build_topology(config))
    expected = truth["expected"]
    assert isinstance(expected, dict)
    assert ours["sizes"] == expected["sizes"]
    assert ours["processes"] == expected["processes"]
    assert ours["groups"] == expected["groups"]


def test_truth_covers_versions() -> None:
    """The comparison spans more than one SGLang version once the truth is generated."""
    versions = {p.parent.name for p in CASES}
    assert "0.5.23" in versions
