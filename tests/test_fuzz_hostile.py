"""A short seeded run of the hostile-folder fuzzer (`benchmarks/fuzz.py --hostile`): whole
folders of glued, NUL-holed, wrapped, gzipped, oddly named, misleadingly suffixed, calendar-
extreme and symlinked files through the command line. About half a minute; the long run is
`python benchmarks/fuzz.py --hostile --cases 2000`."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_hostile_fuzz_smoke(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "fuzz.py"), "--hostile", "--cases", "32",
         "--jobs", "2", "--seed", "19", "--keep", str(tmp_path / "failures")],
        capture_output=True, text=True, timeout=240, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr[-3000:] + done.stdout[-500:]
    assert "32 cases" in done.stdout and " 0 failures" in done.stdout, done.stdout
