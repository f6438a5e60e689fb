"""Regenerate the analyze/diagnosis fixture library under fixtures/analyze/ (deterministic).

    python tools/make_fixtures.py            # then: logcorr check fixtures/analyze/* --update

Each case: a launch config, a layout, an incident and its culprit. benchmarks/generate.py writes
logs/, truth.jsonl (true writer of every line) and scenario.json (expected finding/culprits).
fixtures/jobs/ (then: logcorr check fixtures/jobs/* --update) holds jobs of other launchers
without a config, from benchmarks/generate_jobs.py.
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

from generate import generate  # noqa: E402
from generate_jobs import SCENARIOS  # noqa: E402
from generate_jobs import generate as generate_job  # noqa: E402

from logcorr.config import config_from_fields  # noqa: E402

TP16_DPATTN = {"tp_size": 16, "dp_size": 8, "enable_dp_attention": True, "nnodes": 2,
               "moe_a2a_backend": "deepep"}
CASES: list[tuple[str, dict[str, object], str, str, str | None, str | None]] = [
    # name, config, layout, incident, culprit, dropped
    ("tp8-crash-per-node", {"tp_size": 8}, "per-node", "exception", None, None),
    ("tp8-crash-per-rank", {"tp_size": 8}, "per-rank", "exception", None, None),
    ("tp8-healthy-combined", {"tp_size": 8, "sglang_version": "0.4.9"}, "combined", "none",
     None, None),
    ("tp8-watchdog-cuda-per-rank", {"tp_size": 8}, "per-rank", "watchdog-cuda", "0:3", None),
    ("tp16-dpattn8-ep-hang-per-node", TP16_DPATTN, "per-node", "hang", "0:9", None),
    ("tp16-dpattn8-ep-hang-per-rank", TP16_DPATTN, "per-rank", "hang", "0:9", None),
    ("tp16-dpattn8-ep-missing-rank", TP16_DPATTN, "per-rank", "hang", "0:9", "0:12"),
    ("tp16-dpattn8-nccl-init-hang", TP16_DPATTN, "per-node", "nccl-init", "0:8", None),
    ("dp2-tp4-replica1-hang-per-node", {"tp_size": 4, "dp_size": 2}, "per-node", "hang", "1:2",
     None),
    ("dp2-tp4-replica1-hang-per-rank", {"tp_size": 4, "dp_size": 2}, "per-rank", "hang", "1:2",
     None),
    ("tp4-pp2-2nodes-crash-per-node", {"tp_size": 4, "pp_size": 2, "nnodes": 2,
                                       "sglang_version": "0.5.3"}, "per-node", "exception",
     None, None),
    ("tp4-pp2-2nodes-crash-per-rank", {"tp_size": 4, "pp_size": 2, "nnodes": 2}, "per-rank",
     "exception", None, None),
    ("tp8-cp2-moedp2-ep4-hang-combined", {"tp_size": 8, "attn_cp_size": 2, "moe_dp_size": 2,
                                          "ep_size": 4}, "combined", "hang", "0:6", None),
    ("npu-tp8-ep8-crash-per-node", {"tp_size": 8, "ep_size": 8, "device": "npu",
                                    "sglang_version": "0.5.7"}, "per-node", "exception", None,
     None),
    # one incident, one verdict: a hang's teardown (torch's aborts, the main processes' exit
    # codes), the other pipeline stage's watchdog after a crash, a 64-scheduler hang
    ("tp16-dpattn8-ep-hang-abort-per-node", TP16_DPATTN, "per-node", "hang-abort", "0:9", None),
    ("tp4-pp2-2nodes-crash-watchdog-per-node", {"tp_size": 4, "pp_size": 2, "nnodes": 2},
     "per-node", "crash-watchdog", "0:5", None),
    ("tp64-dpattn8-ep-hang-abort-per-rank", {**TP16_DPATTN, "tp_size": 64, "nnodes": 8},
     "per-rank", "hang-abort", "0:37", None),
]


def jobs() -> None:
    """fixtures/jobs/: log sets of other launches (plain torch jobs, docker compose on a
    terminal) with no launch config (benchmarks/generate_jobs.py)."""
    target = ROOT / "fixtures" / "jobs"
    for name in SCENARIOS:
        out = target / name
        if (out / "logs").exists():
            shutil.rmtree(out / "logs")
        out.mkdir(parents=True, exist_ok=True)
        generate_job(name, out)
        print(name)


def main() -> None:
    jobs()
    target = ROOT / "fixtures" / "analyze"
    for name, fields, layout, incident, culprit, dropped in CASES:
        out = target / name
        if (out / "logs").exists():
            shutil.rmtree(out / "logs")
        out.mkdir(parents=True, exist_ok=True)
        (out / "args.json").write_text(json.dumps(fields, sort_keys=True) + "\n")
        config = config_from_fields(dict(fields), source=str(out / "args.json"))
        generate(config, out, layout, steps=4, seed=7, kind=incident, culprit_spec=culprit,
                 drop=dropped)
        print(name)


if __name__ == "__main__":
    main()
