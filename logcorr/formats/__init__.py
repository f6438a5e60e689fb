"""Line families: `parse(lines)` turns physical lines into record parts with their fields.

Pipeline (all whole-column polars work; no Python per line):

1. fast paths, on the whole frame (literal tests, then joins on the few distinct prefixes):
   lines that start `[20` and hold no second header -> SGLang fixed-offset parser; lines with
   one ` NCCL ` and a plain `host:pid:tid [dev]` header -> NCCL header table;
2. the rest (few rows): peel wrappers (`wrappers.peel`), split glued lines (`parts.split`), clean the body
   (`wrappers.clean`), then offer the rows to each family in turn; a family takes the rows its
   cheap literal test selects and its pattern confirms, and hands back the others;
3. whatever no family takes is `other`; wrapper fields fill host/pid/torch_rank/ts gaps.
"""

from __future__ import annotations

from collections.abc import Callable

import polars as pl

from logcorr.formats import misc, nccl, parts, python, sglang, torch, wrappers
from logcorr.formats._common import empty_parsed
from logcorr.model import PARSED_SCHEMA

Family = tuple[
    Callable[[pl.Expr], pl.Expr], Callable[[pl.DataFrame], tuple[pl.DataFrame, pl.DataFrame]]
]
# Order matters: the first family whose test and pattern accept a row takes it.
FAMILIES: tuple[Family, ...] = (
    (nccl.candidates, nccl.parse),
    (sglang.general_candidates, sglang.parse_general),
    (torch.candidates, torch.parse),
    (python.glog_candidates, python.parse_glog),
    (torch.cpp_candidates, torch.parse_cpp),
    (misc.candidates, misc.parse),
    (python.candidates, python.parse),
)
_BASE_COLUMNS = frozenset({"file_id", "line", "part", "text"})
_WRAPPER_FILLS = {"host": "_w_host", "pid": "_w_pid", "torch_rank": "_w_torch_rank", "ts": "_w_ts"}

__all__ = ["parse"]


def parse(lines: pl.DataFrame) -> pl.DataFrame:
    """Physical lines (LINES_SCHEMA) -> record parts with their fields (PARSED_SCHEMA)."""
    if lines.height == 0:
        return empty_parsed()
    df = lines.select("file_id", "line", "text").with_row_index("_row")
    text = pl.col("text")
    has_nccl = text.str.contains(" NCCL ", literal=True)
    one_nccl = pl.when(has_nccl).then(text).str.count_matches(" NCCL ", literal=True) == 1
    second_sgl = text.str.slice(1).str.contains("[20", literal=True)
    route = (pl.when(text.str.starts_with("[20") & ~second_sgl & ~has_nccl).then(pl.lit(1))
             .when(one_nccl & ~second_sgl & ~text.str.starts_with("[")).then(pl.lit(2))
             .otherwise(pl.lit(0)).cast(pl.UInt8))
    df = df.with_columns(_route=route)
    body = {"part": pl.lit(0, pl.UInt16), "body": text, "pbody": text}
    sgl, sgl_bad = sglang.parse_fast(df.filter(pl.col("_route") == 1).with_columns(**body))
    nccl_parsed, nccl_bad = nccl.parse_plain(df.filter(pl.col("_route") == 2))
    rest = pl.concat([df.filter(pl.col("_route") == 0), sgl_bad.select(df.columns),
                      nccl_bad.select(df.columns)]).drop("_route")
    return _assemble([sgl, nccl_parsed, *_parse_rest(rest)])


def _assemble(results: list[pl.DataFrame]) -> pl.DataFrame:
    """Put the family results back in (line, part) order, column by column.

    One sort of the narrow key gives every row's output position. A column is built only from
    the results that have it: gathered when most rows have it, else scattered into nulls, so
    the many columns that only a few rows fill are never materialised per result and copied.
    """
    results = [r for r in results if r.height]
    if not results:
        return empty_parsed()
    keys = pl.concat([_key(r) for r in results]).rechunk()
    order = keys.arg_sort()
    total = keys.len()
    position = pl.int_range(total, dtype=pl.UInt32, eager=True).scatter(order, pl.int_range(
        total, dtype=pl.UInt32, eager=True))  # output position of each concatenated row
    offsets = [0]
    for r in results:
        offsets.append(offsets[-1] + r.height)
    columns = [_assembled(name, dtype, results, offsets, order, position)
               for name, dtype in PARSED_SCHEMA.items()]
    return pl.DataFrame(columns)


def _assembled(name: str, dtype: pl.DataType, results: list[pl.DataFrame], offsets: list[int],
               order: pl.Series, position: pl.Series) -> pl.Series:
    total = offsets[-1]
    have = [i for i, r in enumerate(results) if name in r.columns]
    rows = sum(results[i].height for i in have)
    if rows * 4 >= total:  # most rows: concatenate (nulls for the others) and gather
        pieces = [r.get_column(name).cast(dtype) if name in r.columns
                  else pl.repeat(None, r.height, dtype=dtype, eager=True) for r in results]
        return pl.concat(pieces).rechunk().gather(order).alias(name)
    column = pl.repeat(None, total, dtype=dtype, eager=True).alias(name)
    for i in have:
        values = results[i].get_column(name).cast(dtype)
        if values.null_count() < values.len():
            column.scatter(position.slice(offsets[i], results[i].height), values)
    return column


def _key(frame: pl.DataFrame) -> pl.Series:
    return (frame.get_column("_row").cast(pl.UInt64) * 65536
            + frame.get_column("part").cast(pl.UInt64)).alias("_key")


def _parse_rest(rest: pl.DataFrame) -> list[pl.DataFrame]:
    """Wrappers, parts and the family cascade for the rows off the fast path."""
    if rest.height == 0:
        return []
    rest = parts.split(wrappers.peel(rest.rechunk())).rechunk()
    remaining = rest.with_columns(pbody=wrappers.clean(pl.col("body")))
    results: list[pl.DataFrame] = []
    for test, family_parse in FAMILIES:
        chosen = test(pl.col("pbody")).fill_null(False)
        parsed, refused = family_parse(remaining.filter(chosen))
        results.append(parsed)
        remaining = pl.concat([remaining.filter(~chosen), refused], how="diagonal_relaxed")
    results.append(remaining.with_columns(source=pl.lit("other"), starts_record=pl.lit(False)))
    return [_fill_from_wrappers(pl.concat(results, how="diagonal_relaxed"))]


def _fill_from_wrappers(df: pl.DataFrame) -> pl.DataFrame:
    """Fields a wrapper gave fill what the inner line left empty."""
    fills = []
    for name, wrapped in _WRAPPER_FILLS.items():
        if wrapped in df.columns:
            current = pl.col(name) if name in df.columns else pl.lit(None)
            fills.append(pl.coalesce(current, pl.col(wrapped)).alias(name))
    if "_w_ts" in df.columns:
        fills.append(
            pl.when(pl.col("ts_has_date").is_null() & pl.col("_w_ts").is_not_null())
            .then(True)
            .otherwise(pl.col("ts_has_date") if "ts_has_date" in df.columns else None)
            .alias("ts_has_date")
        )
    return df.with_columns(fills) if fills else df
