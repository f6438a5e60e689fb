"""`logcorr check` and `logcorr fixture new`: the regression mode over fixture folders."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from logcorr.cli import main

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "analyze"
FIXTURES = sorted(p for p in ROOT.iterdir() if (p / "expected").is_dir())
SMALL = ROOT / "tp8-crash-per-rank"


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture()
def copy(tmp_path: Path) -> Path:
    target = tmp_path / "fixture"
    shutil.copytree(SMALL, target)
    return target


class TestLibrary:
    """The project's own fixture library stays honest."""

    def test_all_fixtures_match(self, capsys: pytest.CaptureFixture[str]) -> None:
        code, out, err = run(capsys, "check", *map(str, FIXTURES))
        assert code == 0, out
        assert out.count("ok ") == len(FIXTURES) and err.count("checking") == len(FIXTURES)
        assert len(FIXTURES) >= 12

    def test_order_does_not_matter(self, capsys: pytest.CaptureFixture[str]) -> None:
        picked = [str(p) for p in FIXTURES[:3]]
        forward = run(capsys, "check", "--format", "json", *picked)
        backward = run(capsys, "check", "--format", "json", *reversed(picked))
        assert forward[:2] == backward[:2]


class TestDiffs:
    """A changed attribution or culprit is caught, named, and --update accepts it."""

    def test_changed_attribution(self, copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
        log = copy / "logs" / "rank5.log"
        log.write_text(log.read_text().replace(" TP5]", " TP6]"))
        code, out, _ = run(capsys, "check", str(copy))
        assert code == 1
        assert "DIFFERS" in out and "changed attribution" in out
        assert "world_rank=5" in out and "world_rank=6" in out
        code, _, err = run(capsys, "check", str(copy), "--update")
        assert code == 0 and "line(s) changed attribution" in err
        assert run(capsys, "check", str(copy))[0] == 0

    def test_changed_culprit(self, copy: Path, capsys: pytest.CaptureFixture[str]) -> None:
        report_path = copy / "expected" / "report.json"
        report = json.loads(report_path.read_text())
        crash = next(f for f in report["findings"] if f["kind"] == "crash")
        crash["processes"][0]["world_rank"] = 2
        report_path.write_text(json.dumps(report))
        code, out, _ = run(capsys, "check", str(copy), "--format", "json")
        result = json.loads(out)["fixtures"][0]
        assert code == 1 and not result["matches"]
        changes = {(c["change"], c["kind"], c["culprits"][0]["world_rank"])
                   for c in result["findings_changed"]}
        assert changes == {("gone", "crash", 2), ("new", "crash", 5)}

    @pytest.mark.parametrize("remove", ["logs", "expected/report.json"])
    def test_malformed_fixture(self, copy: Path, remove: str,
                               capsys: pytest.CaptureFixture[str]) -> None:
        target = copy / remove
        shutil.rmtree(target) if target.is_dir() else target.unlink()
        code, _, err = run(capsys, "check", str(copy))
        assert code == 2 and err.count("logcorr: error:") == 1
        assert remove.split("/")[-1] in err


class TestFixtureNew:
    """An incident's logs become a regression test in one command."""

    def test_new_then_check(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        out = tmp_path / "incident"
        code, stdout, _ = run(capsys, "fixture", "new", str(SMALL / "logs"), "--config",
                              str(SMALL / "args.json"), "-o", str(out))
        assert code == 0 and "created fixture" in stdout
        assert (out / "args.json").is_file() and (out / "logs" / "rank5.log").is_file()
        assert run(capsys, "check", str(out))[0] == 0

    def test_refuses_non_empty_target(self, capsys: pytest.CaptureFixture[str]) -> None:
        code, _, err = run(capsys, "fixture", "new", str(SMALL / "logs"), "-o", str(SMALL))
        assert code == 2 and "not empty" in err
