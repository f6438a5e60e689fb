"""`analyze --engine ray` on a real local Ray cluster (2 CPUs, one for the test session, its
temporary folder and HOME inside the session's tmp): every fixture's timeline, detail and
report equal to the local run at two chunk sizes and groupings; the command line's partitions
equal to the local parquet export; a worker killed during pass 2 is run again without a
duplicate or a missing row; a missing input named; Ctrl-C leaves no output.

Marked `ray` (not in the default run): `pytest -m ray -n 0` (.ci/run installs the extra and
runs them). Without Ray installed they are skipped, with the reason.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from logcorr import parts
from logcorr.api import Analysis, RayOptions, analyze
from logcorr.cli import main
from logcorr.errors import InputError
from logcorr.fixtures import open_fixture

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'logcorr[ray]'")
pytestmark = pytest.mark.ray

REPO = Path(__file__).resolve().parent.parent
ROOT = REPO / "fixtures"
SCENARIOS = sorted(p for p in [*(ROOT / "analyze").iterdir(), *(ROOT / "jobs").iterdir()]
                   if (p / "logs").is_dir())


@pytest.fixture(scope="session", autouse=True)
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """One local cluster for the session; Ray writes its session files and auth token under
    the session's tmp, not under /tmp/ray and ~/.ray."""
    root = tmp_path_factory.mktemp("ray")
    home = os.environ.get("HOME")
    os.environ["HOME"] = str(root / "home")
    ray.init(num_cpus=2, include_dashboard=False, _temp_dir=str(root / "t"),
             logging_level="ERROR", log_to_driver=False)
    try:
        yield
    finally:
        ray.shutdown()
        if home is None:
            os.environ.pop("HOME", None)
        else:
            os.environ["HOME"] = home


def document(analysis: Analysis) -> str:
    return json.dumps(analysis.report(), sort_keys=True, default=str)


@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
@pytest.mark.parametrize(("chunk_bytes", "group_bytes", "range_rows"),
                         [(None, None, 1 << 19), (700, 1, 40)])
def test_every_fixture_gives_the_local_answers(path: Path, chunk_bytes: int | None,
                                               group_bytes: int | None,
                                               range_rows: int) -> None:
    fixture = open_fixture(path, need_expected=False)
    local = analyze([fixture.logs], config=fixture.config)
    on_ray = analyze([fixture.logs], config=fixture.config, engine="ray",
                     chunk_bytes=chunk_bytes,
                     ray=RayOptions(group_bytes=group_bytes, range_rows=range_rows))
    assert on_ray.timeline.equals(local.timeline)
    assert on_ray.detail.equals(local.detail)
    assert document(on_ray) == document(local)
    assert on_ray.contradictions == local.contradictions


def test_the_partitions_are_the_local_export(tmp_path: Path) -> None:
    """The command's -o OUT/ read in `order` is the local parquet export; the --report
    documents are byte-identical."""
    fixture = ROOT / "analyze" / "tp16-dpattn8-ep-hang-abort-per-node"
    logs, config = str(fixture / "logs"), str(fixture / "args.json")
    assert main(["analyze", logs, "--config", config, "--format", "parquet",
                 "-o", str(tmp_path / "local.parquet"),
                 "--report", str(tmp_path / "local.json")]) == 0
    assert main(["analyze", logs, "--config", config, "--engine", "ray",
                 "-o", str(tmp_path / "out"), "--report", str(tmp_path / "ray.json")]) == 0
    exported = pl.read_parquet(tmp_path / "local.parquet")
    assert pl.read_parquet(tmp_path / "out").sort("order").equals(exported)
    assert (tmp_path / "ray.json").read_bytes() == (tmp_path / "local.json").read_bytes()


def test_a_file_a_worker_does_not_see_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    found = parts.files_of

    def elsewhere(sources: list[object]) -> list[parts.File]:
        return [(i, b"/nowhere" + p, d) for i, p, d in found(sources)]  # type: ignore[arg-type]

    monkeypatch.setattr(parts, "files_of", elsewhere)
    with pytest.raises(InputError, match=r"^/nowhere/.* is not there on the Ray worker on "):
        analyze([ROOT / "analyze" / "tp8-crash-per-node" / "logs"], engine="ray")


@pytest.fixture(scope="module")
def large_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 200k-line, 2-node set (about a second of pass 2 a file)."""
    out = tmp_path_factory.mktemp("large")
    subprocess.run([sys.executable, str(REPO / "benchmarks" / "gen_large.py"), str(out),
                    "--lines", "200000", "--ranks", "16", "--nodes", "2"],
                   check=True, capture_output=True)
    return out


def _processes(title: str) -> list[int]:
    """The processes whose title starts with `title` (Ray names a worker by its task)."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            command = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if command.startswith(title.encode()):
            found.append(int(entry))
    return found


def test_a_worker_killed_in_pass_2_is_run_again(large_set: Path) -> None:
    """SIGKILL to a worker while it attributes a file: Ray runs the task again, and the
    timeline has no duplicate and no missing row (it equals the local one)."""
    killed: list[int] = []
    done = threading.Event()

    def kill_one() -> None:
        while not done.is_set() and not killed:
            for pid in _processes("ray::_attribute_task"):
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                break
            time.sleep(0.01)

    killer = threading.Thread(target=kill_one)
    killer.start()
    try:
        on_ray = analyze([large_set / "logs"], config=large_set / "args.json", engine="ray",
                         ray=RayOptions(group_bytes=1))
    finally:
        done.set()
        killer.join()
    assert killed, "no worker was seen attributing"
    local = analyze([large_set / "logs"], config=large_set / "args.json")
    assert on_ray.timeline.equals(local.timeline)
    assert document(on_ray) == document(local)


def test_ctrl_c_stops_the_job_and_leaves_no_output(large_set: Path, tmp_path: Path) -> None:
    """SIGINT to `logcorr analyze --engine ray` (its own local cluster) while tasks run:
    exit 130, no OUT, no temporary folder."""
    short = Path(tempfile.mkdtemp(prefix="lcr"))  # (Ray's sockets: paths of 107 bytes at most)
    env = {**os.environ, "HOME": str(tmp_path), "RAY_TMPDIR": str(short)}
    env.pop("RAY_ADDRESS", None)  # (not the session's cluster: one of its own)
    command = [sys.executable, "-m", "logcorr", "analyze", str(large_set / "logs"),
               "--config", str(large_set / "args.json"), "--engine", "ray",
               "--ray-cpus", "2", "-o", str(tmp_path / "out")]
    before = set(_processes("ray::"))
    child = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not set(_processes("ray::scan_part")) | set(_processes("ray::_attribute_task")):
        if child.poll() is not None or time.monotonic() > deadline:
            child.kill()
            pytest.fail(f"no task was seen: {child.communicate()[1]}")
        time.sleep(0.02)
    child.send_signal(signal.SIGINT)
    _, err = child.communicate(timeout=60)
    assert child.returncode == 130, err
    assert err.strip().splitlines()[-1] == "logcorr: interrupted"
    assert not [p for p in tmp_path.iterdir() if p.name != ".ray"]
    deadline = time.monotonic() + 30  # (the cluster it started ends with it)
    while set(_processes("ray::")) - before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not set(_processes("ray::")) - before
    shutil.rmtree(short, ignore_errors=True)
