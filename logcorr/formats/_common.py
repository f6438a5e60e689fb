"""Helpers shared by the line-family parsers: column names, casts, timestamp builders.

Internal columns (dropped by `finalize`): `_row` (physical row index), `body` (the part's raw text
without wrapper prefix), `pbody` (the body cleaned for parsing: colour codes and Ray dedup suffixes
removed), `_w_*` (fields found in wrappers).
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from logcorr.model import PARSED_SCHEMA

# Marks split points inside a line; lines that already hold it are never split.
SENTINEL = "\ue000"

PLACEHOLDER_DATE = "2000-01-01"
# The SGLang date-time prefix and its rank tokens (order-free; PID is the proposed trailing token).
RANK_TOKEN = r"(?:DP|PP|ATTN_CP|MOE_DP|TP|EP|PID)\d+"
SGL_STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{3})?"
# the prefix of an encoder server (EPD disaggregation, 0.5.14+): ` encode_server`,
# ` encode_dp_worker[N]`; it names no scheduler
ENCODER_TOKEN = r"encode_server|encode_dp_worker\[\d+\]"
SGL_HEADER = rf"\[{SGL_STAMP}(?: {RANK_TOKEN})*(?: (?:{ENCODER_TOKEN}))?\] "
# An NCCL header: host:pid:tid [dev] (src.cc:line )?NCCL
NCCL_HOST = r"[\w.\-\[\]]+"
NCCL_HEADER = rf"{NCCL_HOST}:\d+:\d+ \[\d+\] (?:[\w./\-]+:\d+ )?NCCL "

BODY = pl.col("pbody")


def flag(df: pl.DataFrame, name: str) -> pl.Expr:
    """A boolean column of `df` that a step may not have added: False where null or absent."""
    return pl.col(name).fill_null(False) if name in df.columns else pl.lit(False)


def as_int(expr: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    """A string (or null) column cast to an integer type; bad values -> null."""
    return expr.cast(dtype, strict=False)


def datetime_from(text: pl.Expr, fmt: str) -> pl.Expr:
    """Parse `text` with `fmt` to Datetime(us); anything that does not parse -> null."""
    return text.str.to_datetime(fmt, time_unit="us", strict=False)


def month_day_stamp(mmdd: pl.Expr, hms: pl.Expr, frac: pl.Expr) -> pl.Expr:
    """`MMDD`/`MDD` + `HH:MM:SS` + digits -> Datetime in placeholder year 2000 (a leap year).

    The month of c10 headers is not zero-padded (`E210` is Feb 10); the last two digits are the
    day. The fraction keeps microseconds (nanoseconds are cut, missing digits padded).
    """
    month = mmdd.str.slice(0, mmdd.str.len_chars() - 2).str.zfill(2)
    day = mmdd.str.slice(-2)
    micros = frac.fill_null("").str.slice(0, 6).str.pad_end(6, "0")
    stamp = pl.concat_str([pl.lit("2000-"), month, pl.lit("-"), day, pl.lit(" "), hms, pl.lit("."), micros])
    return datetime_from(stamp, "%Y-%m-%d %H:%M:%S%.6f")


def empty_parsed() -> pl.DataFrame:
    """A frame with the PARSED_SCHEMA columns and no rows."""
    return pl.DataFrame(schema=PARSED_SCHEMA)


def finalize(df: pl.DataFrame) -> pl.DataFrame:
    """Keep exactly the PARSED_SCHEMA columns, in order, with their dtypes (missing -> null)."""
    present = set(df.columns)
    return df.select(
        [
            (pl.col(name) if name in present else pl.lit(None)).cast(dtype).alias(name)
            for name, dtype in PARSED_SCHEMA.items()
        ]
    )


def on_rows(values: pl.Series, rows: pl.Series, test: Callable[[pl.Expr], pl.Expr],
            dtype: pl.DataType) -> pl.Series:
    """`test` of `values` where `rows` holds, null elsewhere, computed on those rows only.

    For a few rows of many this is the cheap form of `pl.when(rows).then(values)` followed by
    a string pattern: polars runs the pattern over every value of the column, also where the
    `when` made it null (192k SGLang lines: 27 ms for a pattern on 4 of them, as on all).
    """
    test_of = test(pl.col(values.name)).cast(dtype)
    return fields_on_rows(values.to_frame(), rows, [test_of]).to_series()


def fields_on_rows(frame: pl.DataFrame, rows: pl.Series, fields: list[pl.Expr]
                   ) -> pl.DataFrame:
    """`frame.select(fields)` where `rows` holds, null elsewhere, computed on those rows only
    (see `on_rows`)."""
    at = rows.fill_null(False).arg_true()
    found = frame[at].select(fields)
    return pl.DataFrame([
        pl.Series(c.name, [None], dtype=c.dtype).new_from_index(0, frame.height).scatter(at, c)
        for c in found.get_columns()])


def per_distinct(values: pl.Series, table: Callable[[pl.Series], pl.DataFrame]) -> pl.DataFrame:
    """`table` computed once per distinct value of `values`, then one row per value.

    `table` gets the distinct values (nulls left out) and returns one row for each, in that
    order. The values are numbered through a private categorical mapping (one hashing pass);
    a null value gets a row of nulls.
    """
    categories = pl.Categories.random()
    coded = values.cast(pl.Categorical(categories))  # keeps the mapping alive
    distinct = categories.to_series()
    return table(distinct).select(pl.all().gather(pl.lit(coded.to_physical())))
