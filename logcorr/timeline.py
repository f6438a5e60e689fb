"""Merge and align lines across files and hosts.

Rules:
* A line's place in time is its own timestamp. Timestamps without a year (glog, torch c10d
  `E1016 03:31:38`) take the year of the nearest fully dated line of their file (else of the whole
  log set), moved by one year when that puts them more than half a year away (Dec -> Jan).
  Time-only stamps (SGLang <= 0.3 `[15:58:39 TP0]`) take the date the same way.
* Lines without a time of their own take their place from their stream: the latest time seen
  before them in the same file (or the first time after them, at the file's start).
* Each file's own order is never changed: the sort key is the running maximum of the time within
  the file, so a line stamped earlier than the line above it stays below it. Ties across files
  (SGLang prints whole seconds) keep file order: file, then line, then part.
* `--clock-offset HOST=SECONDS` shifts the sort key of that host's lines (their printed `ts` is
  not changed).

Example: a.log has 10:00:01 and 10:00:03, b.log has 10:00:02 and a line with no time:

    order  file   ts         key
    0      a.log  10:00:01   10:00:01
    1      b.log  10:00:02   10:00:02
    2      b.log  -          10:00:02   (its stream's time)
    3      a.log  10:00:03   10:00:03
"""

from __future__ import annotations

from datetime import timedelta

import polars as pl

_HALF_YEAR = timedelta(days=183)
_HALF_DAY = timedelta(hours=12)


def complete_timestamps(frame: pl.DataFrame) -> pl.DataFrame:
    """Add `ts_full` (a full date-time or null) from `ts`, `ts_has_date`, `ts_has_year`."""
    full = pl.col("ts_has_date").fill_null(False) & pl.col("ts_has_year").fill_null(False)
    dated = pl.when(full).then(pl.col("ts"))
    reference = dated.forward_fill().backward_fill().over("file_id")
    frame = frame.with_columns(reference.alias("_ref"))
    overall = frame.select(dated.drop_nulls().median()).item()
    if overall is not None:
        frame = frame.with_columns(pl.col("_ref").fill_null(pl.lit(overall)))
    ref = pl.col("_ref")
    no_year = pl.col("ts_has_date").fill_null(False) & ~pl.col("ts_has_year").fill_null(False)
    no_date = pl.col("ts").is_not_null() & ~pl.col("ts_has_date").fill_null(False)
    guess_year = pl.col("ts").dt.replace(year=ref.dt.year())
    year_fixed = (pl.when(guess_year - ref > _HALF_YEAR).then(guess_year.dt.offset_by("-1y"))
                  .when(ref - guess_year > _HALF_YEAR).then(guess_year.dt.offset_by("1y"))
                  .otherwise(guess_year))
    guess_day = ref.dt.truncate("1d") + (pl.col("ts") - pl.col("ts").dt.truncate("1d"))
    day_fixed = (pl.when(ref - guess_day > _HALF_DAY).then(guess_day + timedelta(days=1))
                 .otherwise(guess_day))
    ts_full = (pl.when(full).then(pl.col("ts"))
               .when(no_year).then(year_fixed)
               .when(no_date).then(day_fixed))
    # the guesses run on the (few) rows without a full date only, then take their places
    partial = frame.select(~full & (no_year | no_date)).to_series()
    column = frame.select(pl.when(full).then(pl.col("ts")).alias("ts_full")).to_series()
    if partial.any():
        guessed = frame.select("ts", "ts_has_date", "ts_has_year", "_ref").filter(partial)
        column = column.scatter(partial.arg_true(), guessed.select(ts_full).to_series())
    return frame.with_columns(column).drop("_ref")


def order_lines(frame: pl.DataFrame, clock_offsets: dict[str, float] | None = None
                ) -> pl.DataFrame:
    """Sort into the aligned timeline and number it (`order`); needs `ts_full`, `eff_host`."""
    key = pl.col("ts_full")
    for host, seconds in (clock_offsets or {}).items():
        shift = timedelta(seconds=seconds)
        key = pl.when(pl.col("eff_host") == host).then(key + shift).otherwise(key)
    running = key.cum_max().over("file_id")
    stream = running.forward_fill().backward_fill().over("file_id")
    frame = frame.with_columns(stream.alias("_key"))
    # rows are in (file_id, line, part) order already: a stable sort on the time and the file
    # gives the (time, file, line, part) order
    frame = frame.sort(["_key", "file_id"], nulls_last=True, maintain_order=True)
    return frame.with_columns(pl.int_range(pl.len(), dtype=pl.UInt64).alias("order")).drop("_key")


def iso_text(ts: pl.Expr) -> pl.Expr:
    """ISO 8601 text with the fraction the value has: none, milliseconds or microseconds."""
    micros = ts.dt.microsecond()
    base = ts.dt.strftime("%Y-%m-%dT%H:%M:%S")
    return (pl.when(micros == 0).then(base)
            .when(micros % 1000 == 0).then(base + ts.dt.strftime(".%3f"))
            .otherwise(base + ts.dt.strftime(".%6f")))


def ts_text(ts_full: pl.Series) -> pl.Series:
    """`iso_text` of a column, formatted once per distinct time (lines share their second)."""
    frame = ts_full.to_frame("_t")
    distinct = frame.unique().with_columns(iso_text(pl.col("_t")).alias("ts"))
    return frame.join(distinct, on="_t", how="left", maintain_order="left", nulls_equal=True
                      ).get_column("ts")
