"""Determinism: the same logs give byte-identical jsonl and --report output.

Independent of the order files are given on the command line or created on disk (and so found
by the folder walk), of the run, of the number of polars threads and of the line core's
workers. Each run is a separate process so POLARS_MAX_THREADS takes effect.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT / "fixtures" / "analyze" / "tp16-dpattn8-ep-hang-per-rank"
# Lines with equal time stamps in several files: ordering must break ties the same way every time.
TIES = "".join(f"[2026-11-29 10:00:0{i % 3}] tie {i}\n" for i in range(30))


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A generated 16-rank hang (about 0.7 MB in 18 files) plus files of tied time stamps."""
    root = tmp_path_factory.mktemp("determinism")
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "generate.py"), str(root / "gen"),
                    "--config", str(FIXTURE / "args.json"), "--layout", "per-rank",
                    "--steps", "600", "--seed", "7", "--incident", "hang"],
                   check=True, capture_output=True, cwd=ROOT)
    folder = root / "gen" / "logs"
    for name in ("tie-a.log", "tie-b.log", "sub/tie-c.log"):
        (folder / name).parent.mkdir(exist_ok=True)
        (folder / name).write_text(TIES)
    return folder, root / "gen" / "args.json"


def _run(args: list[str], out: Path, *, cwd: Path, threads: int | None = None,
         core: int = 1) -> bytes:
    """analyze ARGS in a subprocess (polars on `threads`, default one per core; the line
    core on `core` workers); returns the jsonl bytes followed by the report bytes."""
    env = dict(os.environ, LOGCORR_THREADS=str(core))
    env.pop("POLARS_MAX_THREADS", None)
    if threads is not None:
        env["POLARS_MAX_THREADS"] = str(threads)
    report = out.with_suffix(".report.json")
    done = subprocess.run([sys.executable, "-m", "logcorr", "analyze", *args, "--format", "jsonl",
                           "-o", str(out), "--report", str(report)],
                          check=False, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return out.read_bytes() + b"\n--report--\n" + report.read_bytes()


def _files(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


class TestDeterminism:
    def test_folder_runs_and_threads(self, logs: tuple[Path, Path], tmp_path: Path) -> None:
        """Two default runs (one with the core on two workers) and a single-threaded run are
        byte-identical."""
        folder, config = logs
        args = [str(folder), "--config", str(config)]
        first = _run(args, tmp_path / "a.jsonl", cwd=tmp_path)
        assert first.count(b"\n") > 5_000
        assert _run(args, tmp_path / "b.jsonl", cwd=tmp_path, core=2) == first
        assert _run(args, tmp_path / "c.jsonl", cwd=tmp_path, threads=1) == first

    def test_creation_order(self, logs: tuple[Path, Path], tmp_path: Path) -> None:
        """A copy whose files were created in reverse order gives the same bytes."""
        folder, config = logs
        copy = tmp_path / "copy"
        for name in reversed(_files(folder)):
            (copy / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(folder / name, copy / name)
        args = ["--config", str(config)]
        assert (_run([str(copy), *args], tmp_path / "a.jsonl", cwd=tmp_path)
                == _run([str(folder), *args], tmp_path / "b.jsonl", cwd=tmp_path))

    def test_argument_order(self, logs: tuple[Path, Path], tmp_path: Path) -> None:
        """Files named one by one, forwards or backwards, give the same bytes."""
        folder, config = logs
        names = _files(folder)
        forwards = _run([*names, "--config", str(config)], tmp_path / "a.jsonl", cwd=folder)
        backwards = _run([*names[::-1], "--config", str(config)], tmp_path / "b.jsonl",
                         cwd=folder)
        assert forwards == backwards
