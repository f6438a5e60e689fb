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
from logcorr.formats._common import empty_parsed, flag
from logcorr.model import PARSED_SCHEMA

Family = tuple[
    Callable[[pl.Expr], pl.Expr], Callable[[pl.DataFrame], tuple[pl.DataFrame, pl.DataFrame]]
]
# Order matters: the first family whose test and pattern accept a row takes it.
FAMILIES: tuple[Family, ...] = (
    (nccl.fragment_candidates, nccl.parse_fragment),
    (nccl.candidates, nccl.parse),
    (sglang.general_candidates, sglang.parse_general),
    (sglang.gpu_candidates, sglang.parse_gpu),
    (torch.candidates, torch.parse),
    (python.glog_candidates, python.parse_glog),
    (torch.cpp_candidates, torch.parse_cpp),
    (misc.candidates, misc.parse),
    (python.candidates, python.parse),
)
_BASE_COLUMNS = frozenset({"file_id", "line", "part", "text"})
# (not Ray's `(Actor pid=n)`: an actor's child processes - an SGLang engine's schedulers - print
# under the actor's pid, so it names the output stream, not the writer)
_WRAPPER_FILLS = {"host": "_w_host", "torch_rank": "_w_torch_rank", "ts": "_w_ts",
                  "stream": "_w_stream"}

__all__ = ["parse"]


def parse(lines: pl.DataFrame, before: pl.DataFrame | None = None) -> pl.DataFrame:
    """Physical lines (LINES_SCHEMA) -> record parts with their fields (PARSED_SCHEMA).
    `before`: the last lines of the previous chunk (LINES_SCHEMA), read only to tell whether
    the chunk's first lines are announced by a line ending with `:`."""
    if lines.height == 0:
        return empty_parsed()
    df = lines.select("file_id", "line", "text").rechunk()
    routes = _routes(df)
    fast: list[tuple[pl.Series, pl.DataFrame]] = []  # (row indices, fields of those rows)
    for mask, family in ((routes.get_column("_sgl"), _sglang_fast),
                         (routes.get_column("_nccl"), _nccl_fast)):
        rows = mask.arg_true()
        if rows.len():
            fast.append((rows, family(df.get_column("text").filter(mask),
                                      routes.get_column("_cut").filter(mask))))
    taken = pl.repeat(False, df.height, eager=True)
    for rows, fields in fast:
        taken = taken.scatter(rows.filter(fields.get_column("_ok")), True)
    rest = df.with_row_index("_row").filter(~taken)
    nccl_hosts = [f.get_column("host") for _, f in fast if "host" in f.columns]
    parsed = _assemble(df, fast, _parse_rest(rest, df,
                                             pl.concat(nccl_hosts) if nccl_hosts else None,
                                             before))
    return _unglue_hosts(parsed)


_GLUE_RARE = 3  # lines at most of a glued host token
_GLUE_RATIO = 10  # ... against at least this many times as many of the host it ends with


def _unglue_hosts(parsed: pl.DataFrame) -> pl.DataFrame:
    """A host token that is another host of the chunk with a few characters glued in front
    (`adp-uadp-us-llm-1-…:235:235 [1] NCCL INFO …`: the start of a cut-off line ran into
    the header) on a line or two, while that host has many lines, is that host: left as is it
    would be a second host of the file, and the file's host could no longer be placed."""
    counts = parsed.get_column("host").drop_nulls().value_counts()
    if counts.height < 2:
        return parsed
    by_count = dict(counts.iter_rows())
    fixes = {}
    for host, count in by_count.items():
        if count > _GLUE_RARE:
            continue
        under = [other for other, n in by_count.items() if other != host
                 and host.endswith(other) and n >= _GLUE_RATIO * count]
        if under:
            fixes[host] = max(under, key=len)
    if not fixes:
        return parsed
    return parsed.with_columns(pl.col("host").replace(fixes))


def _sglang_fast(text: pl.Series, cut: pl.Series) -> pl.DataFrame:
    return sglang.fast_rows(text).with_columns(
        source=pl.when(pl.col("_ok")).then(pl.lit("sglang")))


def _nccl_fast(text: pl.Series, cut: pl.Series) -> pl.DataFrame:
    return nccl.fast_rows(text, cut).with_columns(
        source=pl.when(pl.col("_ok")).then(pl.lit("nccl")))


def _routes(df: pl.DataFrame) -> pl.DataFrame:
    """`_sgl`: lines starting `[20` with no second header; `_nccl`: lines with one ` NCCL `
    (at `_cut`), no SGLang stamp and no leading `[`. One pass counts both kinds of header."""
    text = pl.col("text")
    routes = df.select(
        _one=text.str.count_matches(r"\[20| NCCL ") == 1,
        _open=text.str.starts_with("["),
        _sgl=text.str.starts_with("[20"),
    )
    cut = pl.when(routes.get_column("_one") & ~routes.get_column("_open")).then(text).str.find(
        " NCCL ", literal=True)
    return routes.select(
        _sgl=pl.col("_sgl") & pl.col("_one"),
        _cut=df.select(cut).to_series(),
    ).with_columns(_nccl=pl.col("_cut").is_not_null())


def _assemble(df: pl.DataFrame, fast: list[tuple[pl.Series, pl.DataFrame]],
              rest: pl.DataFrame | None) -> pl.DataFrame:
    """The lines in (line, part) order, column by column: a fast-path column is spread over
    the physical rows (null elsewhere), then the rows of the rest (which may hold several
    parts per physical line) are written over their places."""
    places = _places(df.height, rest)
    columns = []
    for name, dtype in PARSED_SCHEMA.items():
        if name in df.columns:
            column = df.get_column(name)
        elif name == "part":
            column = pl.repeat(0, df.height, dtype=dtype, eager=True)
        else:
            column = _spread(name, dtype, df.height, fast)
        column = column.cast(dtype).alias(name)
        if places is not None:
            column = _overwrite(column, places, rest)  # type: ignore[arg-type]
        columns.append(column)
    return pl.DataFrame(columns)


def _spread(name: str, dtype: pl.DataType, height: int,
            fast: list[tuple[pl.Series, pl.DataFrame]]) -> pl.Series:
    column = _nulls(name, dtype, height)
    for rows, fields in fast:
        if name in fields.columns:
            values = fields.get_column(name).cast(dtype)
            if values.null_count() < values.len():
                column = column.scatter(rows, values)
    return column


def _nulls(name: str, dtype: pl.DataType, height: int) -> pl.Series:
    """`height` nulls (a tenth of the cost of `pl.repeat`, which plans a query each call)."""
    return pl.Series(name, [None], dtype=dtype).new_from_index(0, height)


def _places(height: int, rest: pl.DataFrame | None) -> tuple[pl.Series | None, pl.Series] | None:
    """Where the rest's rows go: (the physical row of each output row when some line was
    split into parts, else None; the output position of each row of the rest)."""
    if rest is None or rest.height == 0:
        return None
    row = rest.get_column("_row").cast(pl.Int64)
    if rest.height == rest.get_column("_row").n_unique():
        return None, row
    extra = (rest.group_by("_row").agg(pl.len().cast(pl.Int64) - 1)
             .filter(pl.col("len") > 0))
    shift = pl.repeat(0, height, dtype=pl.Int64, eager=True).scatter(
        extra.get_column("_row"), extra.get_column("len"))
    start = pl.int_range(height, dtype=pl.Int64, eager=True) + shift.cum_sum() - shift
    total = height + int(shift.sum())
    source = _nulls("source", pl.Int64(), total).scatter(
        start, pl.int_range(height, dtype=pl.Int64, eager=True)).forward_fill()
    return source, start.gather(row) + rest.get_column("part").cast(pl.Int64)


def _overwrite(column: pl.Series, places: tuple[pl.Series | None, pl.Series],
               rest: pl.DataFrame) -> pl.Series:
    source, position = places
    if source is not None:
        column = column.gather(source)
    if column.name in rest.columns:
        values = rest.get_column(column.name).cast(column.dtype)
        if values.null_count() < values.len():  # else null there already
            column = column.scatter(position, values)
    return column


def _parse_rest(rest: pl.DataFrame, whole: pl.DataFrame, nccl_hosts: pl.Series | None,
                before: pl.DataFrame | None = None) -> pl.DataFrame | None:
    """Wrappers, parts and the family cascade for the rows off the fast path (`whole`: all
    lines of the chunk; `nccl_hosts`: the hosts of its clean NCCL lines, for glued NCCL
    headers)."""
    if rest.height == 0:
        return None
    rest = parts.split(wrappers.peel(rest.rechunk()), nccl_hosts).rechunk()
    wrapped = (pl.col("_wrap") != "") | flag(rest, "_json")
    remaining = rest.with_columns(pbody=wrappers.clean(pl.col("body")),
                                  msg=pl.when(wrapped & (pl.col("part") == 0)).then("body"))
    # whether the line before chains a row to its record matters only for a record opener
    if remaining.select(pl.col("pbody").str.contains(python.OPENS).any()).item():
        remaining = remaining.with_columns(_chained=_chained(rest, whole, before))
    # torch_npu's warning carries CANN's message over several lines: `… Warning: EZ9999:
    # Inner Error!` then `EZ9999: [PID: n] …`, which is no record of its own there
    if remaining.select(pl.col("pbody").str.contains(misc.CANN_LINE).any()).item():
        remaining = remaining.with_columns(
            _cann_chained=_chained(rest, whole, before, misc.CANN_CHAINS, across_blank=False))
    results: list[pl.DataFrame] = []
    for test, family_parse in FAMILIES:
        chosen = remaining.select(test(pl.col("pbody")).fill_null(False)).to_series()
        if not chosen.any():  # the family's parse has a fixed cost of a few ms: skip it
            continue
        parsed, refused = family_parse(remaining.filter(chosen))
        results.append(parsed)
        remaining = pl.concat([remaining.filter(~chosen), refused], how="diagonal_relaxed")
    results.append(remaining.with_columns(source=pl.lit("other"), starts_record=pl.lit(False)))
    parsed = pl.concat(results, how="diagonal_relaxed")
    if "_host_unknown" in parsed.columns and "host" in parsed.columns:
        # the host a glued NCCL header seems to have is not trusted (a wrapper's still is)
        parsed = parsed.with_columns(pl.when(pl.col("_host_unknown").fill_null(False))
                                     .then(None).otherwise(pl.col("host")).alias("host"))
    return _fill_from_wrappers(parsed)


def _chained(rest: pl.DataFrame, whole: pl.DataFrame, context: pl.DataFrame | None = None,
             chains: str = python.CHAINS, across_blank: bool = True) -> pl.Series:
    """Whether the physical line before each row of the rest (or the one before that, when
    it is blank and `across_blank`) matches `chains` (by default: ends with `:`), chaining
    the row to its record (see `python.CHAINS`); lines
    are read without their wrapper where the rest peeled one. Only the first part of a line
    has a line before it; the first lines of a chunk look into `context` (the previous
    chunk's last lines) when it holds the lines right before them."""
    lead = 0
    if context is not None and context.height:
        lead = context.height
        whole = pl.concat([context.select(whole.columns), whole], how="vertical_relaxed")
    bodies = rest.filter(pl.col("part") == 0).select(
        pl.col("_row").cast(pl.Int64) + lead, pl.col("body").alias("_body"))
    row = rest.get_column("_row").cast(pl.Int64) + lead
    text, files = whole.get_column("text"), whole.get_column("file_id")
    numbers = whole.get_column("line").cast(pl.Int64)

    def before(back: int) -> pl.Expr:
        at = (row - back).clip(lower_bound=0)
        same = ((row >= back) & (files.gather(at) == rest.get_column("file_id"))
                & (numbers.gather(at) == rest.get_column("line").cast(pl.Int64) - back))
        found = at.to_frame("_row").join(bodies, on="_row", how="left", maintain_order="left")
        line = found.get_column("_body").fill_null(text.gather(at)).str.strip_chars()
        return pl.when(pl.lit(same)).then(pl.lit(line))

    lines = rest.select(one=before(1), two=before(2))
    one, two = pl.col("one"), pl.col("two")
    chained = one.str.contains(chains)
    if across_blank:
        chained |= (one == "") & two.str.contains(chains)
    return lines.select(chained.fill_null(False)).to_series() & (rest.get_column("part") == 0)


def _fill_from_wrappers(df: pl.DataFrame) -> pl.DataFrame:
    """Fields a wrapper gave fill what the inner line left empty."""
    if "ts_has_date" not in df.columns:  # no family that reads times took a row
        df = df.with_columns(ts_has_date=pl.lit(None, pl.Boolean))
    fills = []
    for name, wrapped in _WRAPPER_FILLS.items():
        if wrapped in df.columns:
            current = pl.col(name) if name in df.columns else pl.lit(None)
            fills.append(pl.coalesce(current, pl.col(wrapped)).alias(name))
    if "_w_ts" in df.columns:
        from_wrapper = pl.col("ts_has_date").is_null() & pl.col("_w_ts").is_not_null()
        fills.append(pl.when(from_wrapper).then(True).otherwise(pl.col("ts_has_date"))
                     .alias("ts_has_date"))
        # (a month-day wrapper stamp has the placeholder year; the others carry theirs)
        no_year = pl.col("_w_no_year").fill_null(False)  # (set with `_w_ts`)
        current = pl.col("ts_has_year") if "ts_has_year" in df.columns else pl.lit(None)
        fills.append(pl.when(from_wrapper).then(~no_year).otherwise(current)
                     .alias("ts_has_year"))
        # a vLLM-style logger prefix (`ERROR 02-09 16:43:26 file.py:112] `) on a plain message
        # is a logging record's start; the lines of a traceback it logged keep their roles
        fills.append(pl.when(no_year & (pl.col("source") == "other")).then(True)
                     .otherwise(pl.col("starts_record")).alias("starts_record"))
    return df.with_columns(fills) if fills else df
