"""The analysis over parts of a set (logcorr.parts) and the Ray engine's driver
(logcorr.engine_ray), run here without a cluster: each task runs in this process when it is
submitted (tests/inprocess_ray.py). The same answers as the local run for every fixture, at
any chunk size and grouping; answers that change when the state a file carries from chunk to
chunk is dropped; the options' and the output folder's errors. tests/test_engine_ray.py runs
the same on a real local cluster."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from logcorr import engine_ray, parts
from logcorr.api import Analysis, RayOptions, analyze
from logcorr.cli import main
from logcorr.errors import InputError
from logcorr.fixtures import open_fixture

sys.path.insert(0, str(Path(__file__).resolve().parent))
from inprocess_ray import InProcessRay

ROOT = Path(__file__).resolve().parent.parent / "fixtures"
SCENARIOS = sorted(p for p in [*(ROOT / "analyze").iterdir(), *(ROOT / "jobs").iterdir()]
                   if (p / "logs").is_dir())
# the fixtures whose timeline changes when files are cut without their carried state
STATEFUL = ("tp16-dpattn8-ep-hang-per-node", "tp16-dpattn8-nccl-init-hang",
            "tp4-pp2-2nodes-crash-per-node")


def document(analysis: Analysis) -> str:
    return json.dumps(analysis.report(), sort_keys=True, default=str)


@pytest.fixture
def in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(engine_ray, "import_ray", InProcessRay)


def same(one: Analysis, other: Analysis) -> bool:
    return (one.timeline.equals(other.timeline) and one.detail.equals(other.detail)
            and document(one) == document(other) and one.contradictions == other.contradictions)


@pytest.mark.usefixtures("in_process")
@pytest.mark.parametrize("path", SCENARIOS, ids=lambda p: p.name)
@pytest.mark.parametrize(("chunk_bytes", "group_bytes", "range_rows"),
                         [(None, None, 1 << 19), (700, 1, 40)])
def test_parts_give_the_local_answers(path: Path, chunk_bytes: int | None,
                                      group_bytes: int | None, range_rows: int) -> None:
    """One group or a file a group, one range or many, whole chunks or 700 bytes: the
    timeline, detail, report and contradictions of the local run."""
    fixture = open_fixture(path, need_expected=False)
    local = analyze([fixture.logs], config=fixture.config)
    parted = analyze([fixture.logs], config=fixture.config, engine="ray",
                     chunk_bytes=chunk_bytes,
                     ray=RayOptions(group_bytes=group_bytes, range_rows=range_rows))
    assert isinstance(parted, parts.PartitionedAnalysis)
    if range_rows == 40 and path.parent.name == "analyze":  # (jobs/ have no fully dated line)
        assert len(parted.partitions) > 1
    assert same(parted, local)


@pytest.mark.usefixtures("in_process")
@pytest.mark.parametrize("name", STATEFUL)
def test_dropping_the_carried_state_changes_the_timeline(
        name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The comparison above sees the state a file carries from chunk to chunk: attributed
    with every chunk starting afresh (as byte ranges read without it would be), the
    timeline differs; with the state, it does not."""
    path = ROOT / "analyze" / name
    local = analyze([path / "logs"], config=path / "args.json")

    def run() -> Analysis:
        return analyze([path / "logs"], config=path / "args.json", engine="ray",
                       chunk_bytes=700, ray=RayOptions(group_bytes=1))

    assert run().timeline.equals(local.timeline)

    def forgetting(files: list[parts.File], tables: parts.Tables, folder: str,
                   group: int) -> parts.AttributedPart:
        return parts.attribute_part(
            files, tables, lambda i, rows: parts.write_fragment(folder, group, i, rows),
            forget=True)

    monkeypatch.setattr(engine_ray, "_attribute_task", forgetting)
    assert not run().timeline.equals(local.timeline)


class TestParts:
    def test_a_large_file_is_a_group_alone(self, tmp_path: Path) -> None:
        """Small files are gathered up to the size; a file of the size or more is alone."""
        sizes = {"a": 3, "b": 3, "c": 12, "d": 2, "e": 9, "f": 1}
        files = []
        for file_id, (name, size) in enumerate(sizes.items()):
            (tmp_path / name).write_bytes(b"x" * size)
            files.append((file_id, os.fsencode(tmp_path / name), name))
        cut = parts.groups(files, 10)
        assert [[f[2] for f in g] for g in cut] == [["a", "b"], ["c"], ["d", "e"], ["f"]]

    def test_rows_are_cut_at_the_bounds_and_numbered_on(self) -> None:
        """A group's sorted rows cut at the bounds; the ranges' offsets from the counts; a
        range merged from every group's slice and numbered from its offset."""
        def rows(sks: list[int], file_id: int) -> pl.DataFrame:
            frame = parts._empty_fragment().clear(len(sks))
            return frame.with_columns(pl.Series("_sk", sks, pl.Int64),
                                      pl.lit(file_id, pl.UInt32).alias("file_id"),
                                      pl.Series("line", range(1, len(sks) + 1), pl.UInt32),
                                      pl.lit(0, pl.UInt16).alias("part"))
        one = dict(parts.ranges([rows([1, 5, 5], 0), rows([9], 0)], [5, 9]))
        two = dict(parts.ranges([rows([2, 6], 1), rows([12], 1)], [5, 9]))
        three = dict(parts.ranges([rows([10, 11], 2)], [5, 9]))
        assert {i: f.height for i, f in one.items()} == {0: 1, 1: 2, 2: 1}
        assert {i: f.height for i, f in two.items()} == {0: 1, 1: 1, 2: 1}
        assert {i: f.height for i, f in three.items()} == {2: 2}  # (no empty range given)
        counts = [[len(part.get(i, [])) for i in range(3)] for part in (one, two, three)]
        starts = parts.offsets(counts)
        assert starts == [0, 2, 5]
        merged = parts.merge_range([one[1], two[1]], starts[1], detail=True)
        assert merged["order"].to_list() == [2, 3, 4]
        assert merged["file_id"].to_list() == [0, 0, 1]  # (5, 5 before 6)


@pytest.mark.usefixtures("in_process")
class TestCommandLine:
    FIXTURE = ROOT / "analyze" / "tp16-dpattn8-ep-hang-per-node"

    def test_the_partitions_are_the_local_export(self, tmp_path: Path) -> None:
        """`-o OUT/` holds parquet partitions that, read in `order`, are the local parquet
        export; the --report documents are byte-identical."""
        logs, config = str(self.FIXTURE / "logs"), str(self.FIXTURE / "args.json")
        assert main(["analyze", logs, "--config", config, "--format", "parquet",
                     "-o", str(tmp_path / "local.parquet"),
                     "--report", str(tmp_path / "local.json")]) == 0
        assert main(["analyze", logs, "--config", config, "--engine", "ray",
                     "-o", str(tmp_path / "out"), "--report", str(tmp_path / "ray.json")]) == 0
        exported = pl.read_parquet(tmp_path / "local.parquet")
        assert pl.read_parquet(tmp_path / "out").sort("order").equals(exported)
        assert (tmp_path / "ray.json").read_bytes() == (tmp_path / "local.json").read_bytes()
        assert sorted(p.name for p in tmp_path.iterdir()) == \
            ["local.json", "local.parquet", "out", "ray.json"]  # (no partial folder left)

    @pytest.mark.parametrize(("extra", "message"), [
        (["--ray-cpus", "2"], "--ray-address and --ray-cpus go with --engine ray"),
        (["--engine", "ray"], "--engine ray writes the timeline as parquet partitions"),
        (["--engine", "ray", "--format", "jsonl", "-o", "x"], "--format jsonl does not apply"),
        (["--engine", "ray", "--select", "tp=1", "-o", "x"], "--select does not apply"),
        (["--engine", "ray", "--ray-address", "auto", "--ray-cpus", "2", "-o", "x"],
         "--ray-cpus sizes the local cluster logcorr starts"),
    ])
    def test_options_that_do_not_go_together(self, extra: list[str], message: str,
                                             capsys: pytest.CaptureFixture[str]) -> None:
        assert main(["analyze", str(self.FIXTURE / "logs"), *extra]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"logcorr: error: {message}") and err.count("\n") == 1

    def test_an_output_folder_with_other_files_is_left_alone(
            self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        (tmp_path / "out").mkdir()
        (tmp_path / "out" / "notes.txt").write_text("mine")
        assert main(["analyze", str(self.FIXTURE / "logs"), "--engine", "ray",
                     "-o", str(tmp_path / "out")]) == 2
        assert "holds other files (notes.txt" in capsys.readouterr().err
        assert [p.name for p in (tmp_path / "out").iterdir()] == ["notes.txt"]

    def test_an_interrupted_run_leaves_no_output(self, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
        """Ctrl-C after a partition was written: neither OUT nor its temporary folder stays."""
        write = parts.write_partition

        def interrupted(rows: pl.DataFrame, folder: str, index: int) -> str:
            write(rows, folder, index)
            raise KeyboardInterrupt

        monkeypatch.setattr(parts, "write_partition", interrupted)
        with pytest.raises(KeyboardInterrupt):
            analyze([self.FIXTURE / "logs"], engine="ray",
                    ray=RayOptions(output=tmp_path / "out"))
        assert list(tmp_path.iterdir()) == []

    def test_a_cluster_out_of_reach_is_one_error_line(
            self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
            capsys: pytest.CaptureFixture[str]) -> None:
        class Unreachable(InProcessRay):
            def is_initialized(self) -> bool:
                return False

            def init(self, **_: object) -> None:
                raise ConnectionError("Could not find any running Ray instance.")

        monkeypatch.setattr(engine_ray, "import_ray", Unreachable)
        assert main(["analyze", str(self.FIXTURE / "logs"), "--engine", "ray",
                     "--ray-address", "auto", "-o", str(tmp_path / "out")]) == 2
        assert capsys.readouterr().err == (
            "logcorr: error: cannot start or reach a Ray cluster at auto: Could not find any "
            "running Ray instance.; start one with `ray start --head` and pass --ray-address "
            "auto\n")
        assert list(tmp_path.iterdir()) == []

    def test_a_file_a_worker_does_not_see_is_named(self, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
        """Inputs must be at the same path on every worker: the first missing one is named."""
        found = parts.files_of

        def elsewhere(sources: list[object]) -> list[parts.File]:
            files = found(sources)  # type: ignore[arg-type]
            return [(i, b"/nowhere" + p if i == 1 else p, d) for i, p, d in files]

        monkeypatch.setattr(parts, "files_of", elsewhere)
        with pytest.raises(InputError, match=r"^/nowhere/.* is not there on the Ray worker"):
            analyze([self.FIXTURE / "logs"], engine="ray")


def test_without_ray_the_error_says_how_to_install_it(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # (import ray raises ImportError)
    fixture = ROOT / "analyze" / "tp8-crash-per-node"
    assert main(["analyze", str(fixture / "logs"), "--engine", "ray", "-o", "out"]) == 2
    assert capsys.readouterr().err == \
        "logcorr: error: --engine ray needs: pip install 'logcorr[ray]'\n"


def test_the_local_engine_never_imports_ray() -> None:
    fixture = ROOT / "analyze" / "tp8-crash-per-node"
    code = ("import sys; from logcorr.cli import main; "
            f"main(['analyze', {str(fixture / 'logs')!r}, '--format', 'jsonl', '-o', "
            "'/dev/null']); print('ray' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "False"

