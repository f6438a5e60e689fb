"""`logcorr analyze` starts reading before it imports polars and rich (`cli._head_start`):
the core parses the files while those load. The start changes no answer and no error."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from test_robustness import run_cli

from logcorr.api import analyze

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "analyze" / "tp8-crash-per-node"
LOGS, CONFIG = FIXTURE / "logs", FIXTURE / "args.json"


def test_the_command_line_reads_the_files_before_polars_and_rich_are_imported() -> None:
    code = f"""
import sys
from logcorr import cli
args = cli.build_parser().parse_args(["analyze", {str(LOGS)!r}, "--config", {str(CONFIG)!r}])
started = cli._head_start(args)
heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("polars", "rich"))
steps = 0
while started.logs.survey_step() is not None:
    steps += 1
print(steps, len(started.sources), heavy)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)
    steps, sources, heavy = done.stdout.split(" ", 2)
    assert int(steps) >= 1 and int(sources) == len(list(LOGS.iterdir()))
    assert heavy.strip() == "[]"


def test_the_timeline_and_findings_are_those_of_an_analysis_without_a_head_start(
        tmp_path: Path) -> None:
    out, report = tmp_path / "timeline.jsonl", tmp_path / "report.json"
    code, _, err = run_cli(["analyze", str(LOGS), "--config", str(CONFIG), "--format", "jsonl",
                            "-o", str(out), "--report", str(report)])
    assert code == 0, err
    plain = analyze([LOGS], config=CONFIG, threads=2)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows == [json.loads(line) for line in
                    plain.timeline.write_ndjson().splitlines()]
    assert json.loads(report.read_text()) == json.loads(json.dumps(plain.report()))


def test_a_start_that_fails_is_reported_by_the_analysis_after_the_options_it_checks_first(
        tmp_path: Path) -> None:
    missing_config = tmp_path / "none.json"
    code, out, err = run_cli(["analyze", str(LOGS), "--config", str(missing_config),
                              "--select", "bogus"])
    assert (code, out) == (2, "")
    assert err.startswith("logcorr: error: cannot read 'bogus' in selector"), err
    assert err.count("\n") == 1
    code, out, err = run_cli(["analyze", str(LOGS), "--config", str(missing_config)])
    assert (code, out) == (2, "")
    assert err.startswith("logcorr: error: ") and "none.json" in err, err
    code, _, err = run_cli(["analyze", str(tmp_path / "no-such-folder")])
    assert code == 2 and err.startswith("logcorr: error: ") and "no-such-folder" in err, err
