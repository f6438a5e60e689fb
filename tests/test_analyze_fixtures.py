"""`analyze` over the generated fixture log sets, against the true writer of every line.

Each folder under fixtures/analyze/ holds logs/, args.json and truth.jsonl (the writer of every
physical line, from benchmarks/generate.py). A new folder is a new test case.
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from logcorr.api import analyze
from logcorr.model import EVIDENCE, SOURCES

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "analyze"
CASES = sorted(p for p in ROOT.iterdir() if (p / "truth.jsonl").exists())


def truth(case: Path) -> pl.DataFrame:
    rows = [json.loads(line) for line in (case / "truth.jsonl").read_text().splitlines()]
    return pl.DataFrame(rows, schema={"file": pl.String, "line": pl.UInt32, "replica": pl.Int32,
                                      "world_rank": pl.Int32})


def physical_lines(case: Path) -> dict[tuple[str, int], str]:
    lines = {}
    for path in sorted((case / "logs").rglob("*")):
        if path.is_file():
            text = path.read_bytes().decode("utf-8", "replace")
            pieces = text.split("\n")
            if pieces and pieces[-1] == "":
                pieces.pop()
            for number, piece in enumerate(pieces, start=1):
                lines[(path.relative_to(case / "logs").as_posix(), number)] = piece.removesuffix(
                    "\r")
    return lines


@pytest.fixture(scope="module", params=CASES, ids=[c.name for c in CASES])
def case(request: pytest.FixtureRequest) -> tuple[Path, pl.DataFrame]:
    path: Path = request.param
    analysis = analyze([path / "logs"], config=path / "args.json")
    return path, analysis.timeline


class TestFixtures:
    """Every line kept once, and attributed to its true writer or to nobody."""

    def test_every_line_once(self, case: tuple[Path, pl.DataFrame]) -> None:
        path, timeline = case
        joined = (timeline.sort("file", "line", "part").group_by("file", "line", maintain_order=True)
                  .agg(pl.col("text").str.join("")))
        got = {(f, n): t for f, n, t in joined.iter_rows()}
        assert got == physical_lines(path)
        assert timeline["order"].to_list() == list(range(timeline.height))

    def test_no_wrong_attribution(self, case: tuple[Path, pl.DataFrame]) -> None:
        path, timeline = case
        merged = timeline.join(truth(path), on=["file", "line"], suffix="_true")
        wrong = merged.filter(pl.col("world_rank").is_not_null() & (
            (pl.col("world_rank") != pl.col("world_rank_true")).fill_null(True)
            | (pl.col("replica") != pl.col("replica_true")).fill_null(True)))
        assert wrong.height == 0, wrong.select("file", "line", "world_rank", "world_rank_true",
                                               "evidence", "text").head(5)

    def test_scheduler_lines_attributed(self, case: tuple[Path, pl.DataFrame]) -> None:
        path, timeline = case
        merged = timeline.join(truth(path), on=["file", "line"], suffix="_true")
        written = merged.filter(pl.col("world_rank_true").is_not_null())
        # a glued line counts as attributed when one of its parts is (a progress bar glued in
        # front of a prefixed line names no process by itself)
        missed = (written.group_by("file", "line")
                  .agg(pl.col("world_rank").drop_nulls().len().alias("found"),
                       pl.col("source").first(), pl.col("text").first())
                  .filter(pl.col("found") == 0))
        if json.loads((path / "args.json").read_text()).get("dp_size", 1) > 1:
            # native-DP replicas repeat torch's `[rankN]`: in a file shared by both replicas
            # nothing on such a line says which replica wrote it
            torch_lines = merged.filter(pl.col("source") == "torch").select(
                "file", (pl.col("line") + 1).alias("line"), pl.lit(True).alias("after_torch"))
            missed = missed.join(torch_lines, on=["file", "line"], how="left").filter(
                (pl.col("source") != "torch") & pl.col("after_torch").is_null())
        # C++'s and Python's faulthandler output (`terminate called …`, its frames, `Fatal
        # Python error: Aborted`, the blank lines between) carries no identity of its own: in a
        # file several processes write to, whose it is cannot be told
        shared = (written.group_by("file").agg(pl.col("world_rank_true").n_unique().alias("n"))
                  .filter(pl.col("n") > 1)["file"].to_list())
        anonymous = pl.col("source").is_in(["cpp", "faulthandler"]) | (
            (pl.col("source") == "other") & (pl.col("text").str.strip_chars() == ""))
        missed = missed.filter(~(pl.col("file").is_in(shared) & anonymous))
        assert missed.height == 0, missed.select("file", "line", "source", "text").head(5)

    def test_evidence_and_sources_are_known_words(self, case: tuple[Path, pl.DataFrame]) -> None:
        _, timeline = case
        assert set(timeline["evidence"].drop_nulls().unique()) <= set(EVIDENCE)
        assert set(timeline["source"].drop_nulls().unique()) <= set(SOURCES)

    def test_timeline_is_time_ordered_per_file(self, case: tuple[Path, pl.DataFrame]) -> None:
        _, timeline = case
        for _, group in timeline.group_by("file"):
            assert group.sort("order")["line"].is_sorted()


@pytest.mark.parametrize("case_path", CASES, ids=[c.name for c in CASES])
def test_server_args_line_replaces_config(case_path: Path) -> None:
    """Without --config, the server_args line in the logs gives the same attribution."""
    with_config = analyze([case_path / "logs"], config=case_path / "args.json").timeline
    from_logs = analyze([case_path / "logs"])
    assert from_logs.topology is not None
    assert from_logs.timeline["world_rank"].to_list() == with_config["world_rank"].to_list()
