"""Score a timeline against a per-line truth: per line family, how many lines carry their true
writer (right), another process (wrong), or none (unattributed) - and, given a second timeline,
how lines moved between those states.

    python tools/score_truth.py TRUTH.jsonl TIMELINE.jsonl [BEFORE_TIMELINE.jsonl]

The truth holds one record per physical line: {"file", "line", "replica", "world_rank"} (nulls
for lines no scheduler wrote). A timeline line is compared on (replica, world_rank) of its
first part.
"""

from __future__ import annotations

import sys
from collections import Counter

import polars as pl


def states(truth: pl.DataFrame, timeline: pl.DataFrame) -> pl.DataFrame:
    """(file, line, source, state) with state right / wrong / unattributed / none (a line no
    scheduler wrote and none was given)."""
    tl = (timeline.filter(pl.col("part") == 0)
          .select("file", "line", "source", pl.col("replica").alias("r"),
                  pl.col("world_rank").alias("w")))
    joined = truth.join(tl, on=["file", "line"], how="inner")
    given = pl.col("w").is_not_null()
    true = pl.col("world_rank").is_not_null()
    same = (pl.col("w") == pl.col("world_rank")) & (pl.col("r").fill_null(0)
                                                    == pl.col("replica").fill_null(0))
    state = (pl.when(given & true & same).then(pl.lit("right"))
             .when(given).then(pl.lit("wrong"))
             .when(true).then(pl.lit("unattributed"))
             .otherwise(pl.lit("none")))
    return joined.select("file", "line", "source", state.alias("state"))


def main() -> None:
    truth = pl.read_ndjson(sys.argv[1], infer_schema_length=None)
    after = states(truth, pl.read_ndjson(sys.argv[2], infer_schema_length=None))
    counts = Counter((s, st) for s, st in after.select("source", "state").iter_rows())
    for (source, state), n in sorted(counts.items()):
        print(f"{source:14s} {state:13s} {n}")
    if len(sys.argv) > 3:
        before = states(truth, pl.read_ndjson(sys.argv[3], infer_schema_length=None))
        moved = before.join(after, on=["file", "line"], suffix="_after").filter(
            pl.col("state") != pl.col("state_after"))
        print("moved (source: before -> after):")
        for row in (moved.group_by("source_after", "state", "state_after").len()
                    .sort("source_after", "state").iter_rows()):
            print(f"  {row[0]:14s} {row[1]} -> {row[2]}: {row[3]}")


if __name__ == "__main__":
    main()
