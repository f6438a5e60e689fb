"""`logcorr lnav-format`: lnav reads the jsonl timeline with it (headless, through its SQL)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from logcorr.cli import main
from logcorr.lnav_format import NAME, lnav_format
from logcorr.model import TIMELINE_SCHEMA

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "analyze"
LNAV = shutil.which("lnav")
REQUIRED = bool(os.environ.get("LOGCORR_REQUIRE_BROWSER"))  # .ci/run installs lnav too


def test_prints_and_installs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lnav-format"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == lnav_format()
    spec = printed[NAME]
    assert spec["json"] is True and spec["timestamp-field"] == "ts"
    assert spec["body-field"] == "text"
    # every contract column but the time, the text and `order` (an SQL keyword) is a field
    assert set(spec["value"]) == set(TIMELINE_SCHEMA) - {"ts", "text", "order"}
    assert spec["value"]["tp_rank"] == {"kind": "integer", "hidden": True, "identifier": True}
    assert main(["lnav-format", "--install", "--dir", str(tmp_path / "formats")]) == 0
    assert "installed" in capsys.readouterr().out
    written = tmp_path / "formats" / f"{NAME}.json"
    assert json.loads(written.read_text()) == printed
    assert main(["lnav-format", "--dir", str(tmp_path)]) == 2


def test_install_goes_where_lnav_looks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from logcorr.lnav_format import install

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    assert install() == tmp_path / ".config" / "lnav" / "formats" / "installed" / f"{NAME}.json"
    (tmp_path / ".lnav").mkdir()
    assert install() == tmp_path / ".lnav" / "formats" / "installed" / f"{NAME}.json"


@pytest.mark.skipif(LNAV is None and not REQUIRED, reason="lnav is not installed")
def test_lnav_reads_the_timeline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """lnav, with the format installed in a fresh HOME, loads the jsonl of a hang: its SQL table
    has every timed line, filters by tp_rank, and sees the watchdog lines as errors."""
    assert LNAV is not None
    case = ROOT / "tp16-dpattn8-ep-hang-per-node"
    timeline = tmp_path / "timeline.jsonl"
    assert main(["analyze", str(case / "logs"), "--config", str(case / "args.json"),
                 "--format", "jsonl", "-o", str(timeline)]) == 0
    records = [json.loads(line) for line in timeline.read_text().splitlines()]
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    assert main(["lnav-format", "--install"]) == 0  # where lnav looks in this HOME
    env = dict(os.environ)

    def sql(query: str) -> list[list[str]]:
        done = subprocess.run([LNAV, "-n", "-c", f";{query}", "-c", ":write-csv-to -",
                               str(timeline)], env=env, capture_output=True, text=True,
                              timeout=60, check=False)
        assert done.returncode == 0, done.stderr
        lines = [line for line in done.stdout.splitlines() if line]
        return [line.split(",") for line in lines[1:]]

    timed = [r for r in records if r["ts"] is not None]
    got = sql(f"SELECT count(*), count(DISTINCT tp_rank) FROM {NAME}")
    assert got == [[str(len(timed)), "16"]]
    ninth = [r for r in timed if r["tp_rank"] == 9]
    assert sql(f"SELECT count(*) FROM {NAME} WHERE tp_rank = 9") == [[str(len(ninth))]]
    assert sql(f"SELECT file, line FROM {NAME} WHERE world_rank = 9 AND role = 'scheduler' "
               "ORDER BY log_line DESC LIMIT 1") == [["node1.log", "115"]]
    errors = sql(f"SELECT count(*) FROM {NAME} WHERE log_level = 'error' "
                 "AND log_body LIKE '%Watchdog caught%'")
    caught = [r for r in timed if "Watchdog caught" in r["text"]]
    assert len(caught) >= 13 and errors == [[str(len(caught))]]
