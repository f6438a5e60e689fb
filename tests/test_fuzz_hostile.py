"""Short seeded runs of the hostile fuzzer (`benchmarks/fuzz.py --hostile`, cases built by
`benchmarks/hostile.py`): whole folders of glued, NUL-holed, wrapped, gzipped, oddly named,
misleadingly suffixed, calendar-extreme and symlinked files through the command line; and the
classes of numbers and lines: server_args lines that once made the reader backtrack or hold
values out of range, incidents at the calendar's edges, launch configs out of range. About
half a minute; the long run is `python benchmarks/fuzz.py --hostile --cases 2000`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NUMBERS_AND_LINES = "server_args_lines,calendar_incident,config_out_of_range,config_server_args"


@pytest.mark.parametrize(("classes", "cases", "seed"), [("", 32, 19), (NUMBERS_AND_LINES, 24, 32)],
                         ids=["all-classes", "numbers-and-lines"])
def test_hostile_fuzz_smoke(tmp_path: Path, classes: str, cases: int, seed: int) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "fuzz.py"), "--hostile", "--cases", str(cases),
         "--jobs", "2", "--seed", str(seed), "--keep", str(tmp_path / "failures"),
         *(["--classes", classes] if classes else [])],
        capture_output=True, text=True, timeout=240, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-500:]
    assert f"{cases} cases" in done.stdout and " 0 failures" in done.stdout, done.stdout
    for name in classes.split(",") if classes else ():
        assert f"  {name}: " in done.stdout and f"  {name}: 0 cases" not in done.stdout, done.stdout
