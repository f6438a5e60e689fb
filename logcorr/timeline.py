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
* A line with no time of its own but a collector's or container runtime's zoned time (CRI,
  `kubectl --timestamps`, Loki) takes that time in its file's local clock: the offset between
  the zoned time and the line's own stamp on the file's first line that has both, rounded to a
  quarter hour (else the set's one offset when its files agree; UTC when the set has no
  dated line of its own; else no time).
* `--clock-offset HOST=SECONDS` shifts the sort key of that host's lines (their printed `ts` is
  not changed).
* A stamp that names no instant of the calendar - a year outside 1-9999 (as written, or after a
  zone shift or year inference), or a day the completed year does not have (`E0229` in 2023) -
  leaves the line without a time of its own; `ts_note` says why (counted in the header).

Example: a.log has 10:00:01 and 10:00:03, b.log has 10:00:02 and a line with no time:

    order  file   ts         key
    0      a.log  10:00:01   10:00:01
    1      b.log  10:00:02   10:00:02
    2      b.log  -          10:00:02   (its stream's time)
    3      a.log  10:00:03   10:00:03
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

import polars as pl

_HALF_YEAR = timedelta(days=183)
_HALF_DAY = timedelta(hours=12)
_PLACEHOLDER_YEAR = 2000  # the year of month-day stamps before completion (a leap year)
OUT_OF_CALENDAR = "stamp outside years 1-9999"
NO_SUCH_DAY = "no such day in the completed year"


@dataclass(frozen=True)
class Clock:
    """What completing a timestamp needs from the whole log set."""

    # file_id -> _first: the file's first fully dated time, _wofs: its wrapper clock offset
    first_dated: pl.DataFrame
    overall: datetime | None  # the median fully dated time of the set
    wrap_default: timedelta | None = None  # the wrapper offset of files without their own


@dataclass(frozen=True)
class Carry:
    """Where a file stood at the end of the previous chunk, for the chunk that continues it."""

    file_id: int
    last_dated: datetime | None  # its latest fully dated time so far
    running: datetime | None  # the running maximum of its sort key so far


_QUARTER_HOUR = 900


def first_dated_rows(parsed: pl.DataFrame) -> pl.DataFrame:
    """Per file of a parsed chunk: `_first`, its first fully dated time, and `_wofs`, the
    seconds from a wrapper's zoned time to the line's own stamp on the first line with both
    (a zone offset, so rounded to a quarter hour)."""
    own = pl.col("ts") - _wrapper_utc()
    seconds = (own.dt.total_seconds() / _QUARTER_HOUR).round() * _QUARTER_HOUR
    # (lazy: the filter copies only the columns read, not the chunk)
    return (parsed.lazy().filter(fully_dated()).group_by("file_id", maintain_order=True)
            .agg(pl.col("ts").first().alias("_first"),
                 seconds.cast(pl.Int64).drop_nulls().first().alias("_wofs")).collect())


def clock_of(first_dated: list[pl.DataFrame], overall: datetime | None) -> Clock:
    """The Clock from per-chunk `first_dated_rows` tables in chunk order."""
    table = (pl.concat(first_dated) if first_dated
             else pl.DataFrame(schema={"file_id": pl.UInt32, "_first": pl.Datetime("us"),
                                       "_wofs": pl.Int64}))
    table = table.group_by("file_id", maintain_order=True).agg(
        pl.col("_first").first(), pl.col("_wofs").drop_nulls().first())
    offsets = table.get_column("_wofs").drop_nulls().unique()
    if offsets.len() == 1:
        default: timedelta | None = timedelta(seconds=int(offsets[0]))
    else:  # no own dates at all: the wrapper's UTC; files that disagree: no guess
        default = timedelta(0) if overall is None and offsets.len() == 0 else None
    return Clock(table, overall, default)


def _wrapper_utc() -> pl.Expr:
    """A wrapper's zoned time as a naive UTC datetime."""
    return pl.col("wrap_ts").dt.replace_time_zone(None).cast(pl.Datetime("us"))


def in_calendar(ts: pl.Expr) -> pl.Expr:
    """`ts` where it is an instant of years 1-9999 (what a Python datetime can hold), else null."""
    return pl.when(ts.dt.year().is_between(1, 9999)).then(ts)


def fully_dated() -> pl.Expr:
    """The line's own stamp has a date and a year in the calendar."""
    return (pl.col("ts_has_date").fill_null(False) & pl.col("ts_has_year").fill_null(False)
            & pl.col("ts").dt.year().is_between(1, 9999).fill_null(False))


def _carried(carry: Carry | None, value: datetime | None) -> pl.Expr:
    if carry is None or value is None:
        return pl.lit(None, pl.Datetime("us"))
    return pl.when(pl.col("file_id") == carry.file_id).then(pl.lit(value, pl.Datetime("us")))


def complete_timestamps(frame: pl.DataFrame, clock: Clock, carry: Carry | None = None
                        ) -> pl.DataFrame:
    """Add `ts_full` (a full date-time or null) from `ts`, `ts_has_date`, `ts_has_year`, and
    `ts_note`: why a line's stamp gave no time (see the module's rules), else null.

    The reference of a partial stamp is the latest fully dated line above it in its file
    (`carry` holds it across chunks), else the file's first, else the set's median."""
    frame = frame.with_columns(fully_dated().alias("_full"))  # (read five times: made once)
    full = pl.col("_full")
    dated = pl.when(full).then(pl.col("ts"))
    of_file = file_values(frame.get_column("file_id"), clock.first_dated)
    # (a collector's zoned time on the line itself gives at least the year, whatever the zone)
    reference = pl.coalesce(dated.forward_fill().over("file_id"),
                            _carried(carry, carry.last_dated if carry else None),
                            of_file["_first"], _wrapper_utc())
    if clock.overall is not None:
        reference = reference.fill_null(pl.lit(clock.overall, pl.Datetime("us")))
    frame = frame.with_columns(reference.alias("_ref"))
    ref = pl.col("_ref")
    no_year = pl.col("ts_has_date").fill_null(False) & ~pl.col("ts_has_year").fill_null(False)
    no_date = pl.col("ts").is_not_null() & ~pl.col("ts_has_date").fill_null(False)
    # month-day stamps carry the placeholder year: compared with the reference moved into it,
    # the stamp is within half a year of the reference in the year before, of or after it; the
    # date is then built as text, so a day that year lacks (Feb 29) or a year past 9999 is null
    ref_md = ref.dt.replace(year=_PLACEHOLDER_YEAR)
    year = (ref.dt.year() + pl.when(pl.col("ts") - ref_md > _HALF_YEAR).then(-1)
            .when(ref_md - pl.col("ts") > _HALF_YEAR).then(1).otherwise(0))
    year_fixed = pl.concat_str([year.cast(pl.String).str.zfill(4),
                                pl.col("ts").dt.strftime("-%m-%d %H:%M:%S%.6f")]
                               ).str.to_datetime("%Y-%m-%d %H:%M:%S%.6f", time_unit="us",
                                                 strict=False)
    guess_day = ref.dt.truncate("1d") + (pl.col("ts") - pl.col("ts").dt.truncate("1d"))
    day_fixed = (pl.when(ref - guess_day > _HALF_DAY).then(guess_day + timedelta(days=1))
                 .otherwise(guess_day))
    # with no fully dated line in the whole set there is no year to give: left null (the
    # sort key still orders such stamps by their month and day, see `sort_key`)
    ts_full = (pl.when(full).then(pl.col("ts"))
               .when(no_year & ref.is_not_null()).then(year_fixed)
               .when(no_date & ref.is_not_null()).then(day_fixed))
    # the guesses run on the (few) rows without a full date only, then take their places
    partial = frame.select(~full & (no_year | no_date)).to_series()
    column = frame.select(pl.when(full).then(pl.col("ts")).alias("ts_full")).to_series()
    # why a stamp the line has gave no time: out of the calendar as written, or completed
    # into a day or year that does not exist
    written_out = (pl.col("ts_has_date").fill_null(False) & pl.col("ts_has_year").fill_null(False)
                   & pl.col("ts").is_not_null() & ~full)
    note = frame.select(pl.when(written_out).then(pl.lit(OUT_OF_CALENDAR)).alias("ts_note")
                        ).to_series()
    if partial.any():
        guessed = frame.select("ts", "ts_has_date", "ts_has_year", "_ref", "_full"
                               ).filter(partial)
        filled = guessed.select(
            in_calendar(ts_full).alias("ts_full"),
            pl.when(ts_full.is_not_null() & ~in_calendar(ts_full).is_not_null())
            .then(pl.lit(OUT_OF_CALENDAR))
            .when(no_year & ref.is_not_null() & ts_full.is_null())
            .then(pl.when(year.is_between(1, 9999)).then(pl.lit(NO_SUCH_DAY))
                  .otherwise(pl.lit(OUT_OF_CALENDAR))).alias("ts_note"))
        at = partial.arg_true()
        column = column.scatter(at, filled.get_column("ts_full"))
        note = note.scatter(at, filled.get_column("ts_note"))
    if frame.get_column("wrap_ts").null_count() < frame.height:
        offset = of_file["_wofs"].cast(pl.Int64)
        if clock.wrap_default is not None:
            offset = offset.fill_null(int(clock.wrap_default.total_seconds()))
        local = frame.select(_wrapper_utc() + (offset * 1_000_000).cast(
            pl.Duration("us"))).to_series()
        both = pl.DataFrame([column, note, local.alias("_local")]).select(
            pl.coalesce("ts_full", in_calendar(pl.col("_local"))).alias("ts_full"),
            pl.when(pl.col("ts_full").is_null() & pl.col("_local").is_not_null()
                    & in_calendar(pl.col("_local")).is_null()).then(pl.lit(OUT_OF_CALENDAR))
            .when(pl.col("ts_full").is_null() & in_calendar(pl.col("_local")).is_null())
            .then(pl.col("ts_note")).alias("ts_note"))
        column, note = both.get_column("ts_full"), both.get_column("ts_note")
    return frame.with_columns(column, note.alias("ts_note")).drop("_ref", "_full")


def file_values(files: pl.Series, table: pl.DataFrame) -> dict[str, pl.Expr]:
    """The columns of `table` (one row per `file_id`) for rows of the files `files`: one
    value each when every row is of one file (most chunks: no join of the chunk's rows),
    else columns joined on the file."""
    if files.len() and files.min() == files.max():
        mine = table.filter(pl.col("file_id") == files[0])
        if mine.height <= 1:
            return {c.name: pl.lit(c[0] if c.len() else None, c.dtype)
                    for c in mine.drop("file_id").get_columns()}
    joined = files.to_frame("file_id").join(table, on="file_id", how="left",
                                            maintain_order="left")
    return {c.name: pl.lit(c) for c in joined.drop("file_id").get_columns()}


def sort_key(frame: pl.DataFrame, clock_offsets: dict[str, float] | None = None,
             carry: Carry | None = None) -> pl.DataFrame:
    """Add `_key`: the running maximum of the (shifted) time within the file, carried over
    from the previous chunk; rows before a file's first time take that first time. Needs
    `ts_full`, `eff_host`; rows must be in (file_id, line, part) order."""
    # a month-day stamp left without a year (no dated line in the set) still has its order
    key = pl.coalesce(pl.col("ts_full"),
                      pl.when(pl.col("ts_has_date").fill_null(False)
                              & ~pl.col("ts_has_year").fill_null(False)).then(pl.col("ts")))
    for host, seconds in (clock_offsets or {}).items():
        shift = timedelta(seconds=seconds)
        key = pl.when(pl.col("eff_host") == host).then(in_calendar(key + shift)).otherwise(key)
    running = key.cum_max().forward_fill().over("file_id")
    if carry is not None and carry.running is not None:
        running = pl.max_horizontal(running, _carried(carry, carry.running))
    return frame.with_columns(running.backward_fill().over("file_id").alias("_key"))


def next_carry(frame: pl.DataFrame, carry: Carry | None) -> Carry | None:
    """The Carry for the chunk after `frame` (after `complete_timestamps` and `sort_key`):
    the state of `frame`'s last file."""
    if frame.height == 0:
        return carry
    file_id = int(frame["file_id"][-1])
    mine = frame.select("file_id", "ts", "ts_has_date", "ts_has_year", "_key").filter(
        pl.col("file_id") == file_id)
    dated = mine.filter(fully_dated()).get_column("ts")  # (in the calendar: see fully_dated)
    previous = carry if carry is not None and carry.file_id == file_id else None
    last_dated = dated[-1] if dated.len() else (previous.last_dated if previous else None)
    keys = mine.get_column("_key").drop_nulls()
    running = keys[-1] if keys.len() else (previous.running if previous else None)
    return Carry(file_id, last_dated, running)


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
