"""NCCL debug lines: `host:pid:tid [cudaDev] (src.cc:line )?NCCL LEVEL msg`.

The header (everything before ` NCCL `) has few distinct values (one per process thread), so it is
parsed once per distinct value and joined back. Communicator lines (`comm 0x… rank r nranks n …
commId 0x… - Init COMPLETE`) are a small subset parsed with one regex. A header glued after a bare
SGLang time stamp (`[2026-02-25 16:41:56] host:…`) is accepted and gives the line its time.
"""

from __future__ import annotations

import polars as pl

from logcorr.formats._common import BODY, NCCL_HOST, as_int, datetime_from, per_distinct

_HEAD = (
    r"^(?:\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d{3})?)\] )?"
    r"(" + NCCL_HOST + r"):(\d+):(\d+) \[(\d+)\](?: [\w./\-]+:\d+)?$"
)
_FRAGMENT = rf"^({NCCL_HOST}):(\d+):(\d+)$"
COMM = (
    r"(?:\[Rank \d+\] )?(?:(?:ncclCommInitRank(?:Config)?|ncclCommInitAll|ncclCommSplit) )?"
    r"comm (0x[0-9a-fA-F]+) rank (-?\d+) n[Rr]anks (\d+)"
)
_COMM_ID = r" commId (0x[0-9a-fA-F]+)"
# NCCL 2.23+ prints a split's START before the commId exists: `… parent 0x… splitCount 3 color
# 1197013201 key 2- Init START` (no space before the dash). The members of one split share its
# color (torch: a hash of the member ranks) and the parent's split count, so they name it.
_SPLIT = r" splitCount (\d+) color (-?\d+) key -?\d+"
_PHASE = r" ?- (Init START|Init COMPLETE|Abort COMPLETE)\s*$"
# Colour codes and Ray dedup suffixes (see wrappers._JUNK_HINT): such lines take the slow path.
_JUNK_HINT = r"\x1b|\[repeated |\[[0-9;]{1,6}m"


def candidates(body: pl.Expr) -> pl.Expr:
    """Cheap test: the line may be an NCCL line."""
    return body.str.contains(" NCCL ", literal=True) | body.str.starts_with("NCCL version")


def parse(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Parse NCCL rows; return (parsed, rows that are not NCCL lines)."""
    cut = BODY.str.find(" NCCL ", literal=True)
    df = df.with_columns(_head=BODY.str.slice(0, cut), _after=BODY.str.slice(cut.fill_null(0)))
    heads = df.get_column("_head").drop_nulls().unique()
    df = df.join(_head_table(heads), on="_head", how="left")
    ok = pl.col("_host").is_not_null() | (
        BODY.str.starts_with("NCCL version ")
    )
    ok = ok.fill_null(False)
    bad = df.filter(~ok).drop("_head", "_after", "_host", "_pid", "_tid", "_dev", "_ts")
    good = df.filter(ok).with_columns(
        source=pl.lit("nccl"),
        starts_record=pl.col("_host").is_not_null(),
        host=pl.col("_host"),
        pid=pl.col("_pid"),
        tid=pl.col("_tid"),
        device_id=pl.col("_dev"),
        ts=pl.col("_ts"),
        ts_has_date=pl.when(pl.col("_ts").is_not_null()).then(True),
        ts_has_year=pl.when(pl.col("_ts").is_not_null()).then(True),
        _comm=pl.col("_after").str.contains("comm 0x", literal=True),
    ).drop("_head", "_host", "_pid", "_tid", "_dev", "_ts")
    comm = _comm_fields(good.filter(pl.col("_comm")))
    rest = good.filter(~pl.col("_comm"))
    return pl.concat([rest, comm], how="diagonal_relaxed").drop("_after", "_comm"), bad


def fragment_candidates(body: pl.Expr) -> pl.Expr:
    """Parts that are only the `host:pid:tid` of an NCCL header, cut off by a glued line
    (`parts` marks them `_frag`)."""
    return pl.col("_frag").fill_null(False)


def parse_fragment(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The host, pid and thread of a cut-off NCCL header; the line starts a record."""
    fields = BODY.str.extract_groups(_FRAGMENT)
    return df.with_columns(
        source=pl.lit("nccl"),
        starts_record=pl.lit(True),
        host=fields.struct.field("1"),
        pid=as_int(fields.struct.field("2"), pl.Int64()),
        tid=as_int(fields.struct.field("3"), pl.Int64()),
    ), df.clear()


def fast_rows(text: pl.Series, cut: pl.Series) -> pl.DataFrame:
    """The NCCL fields of lines with one plain `host:pid:tid [dev]` header at the start (no
    wrapper, colour code or glued record), one row per line of `text` (`cut`: where ` NCCL `
    starts), and `_ok` (the line has this shape; the fields are null where it has not).
    The header is parsed once per distinct value."""
    t = pl.col("text")
    plain = text.to_frame("text").with_columns(cut.alias("_cut")).select(
        _nt=pl.when(~t.str.contains(_JUNK_HINT)).then(t), _cut=pl.col("_cut"))
    plain = plain.with_columns(_head=pl.col("_nt").str.slice(0, pl.col("_cut")))
    heads = per_distinct(plain.get_column("_head"), lambda h: _head_table(h).drop("_head"))
    df = pl.concat([plain, heads], how="horizontal")
    df = df.with_columns(_ok=(pl.col("_host").is_not_null() & pl.col("_ts").is_null()))
    comm = pl.col("_ok") & pl.col("_nt").str.contains("comm 0x", literal=True)
    df = df.with_columns(_after=pl.when(comm).then(pl.col("_nt").str.slice(pl.col("_cut"))))
    after = pl.col("_after")
    groups = after.str.extract_groups(COMM).struct.field
    when = pl.when(pl.col("_ok"))
    return df.select(
        "_ok",
        when.then(pl.lit(True)).alias("starts_record"),
        when.then(pl.col("_host")).alias("host"),
        when.then(pl.col("_pid")).alias("pid"),
        when.then(pl.col("_tid")).alias("tid"),
        when.then(pl.col("_dev")).alias("device_id"),
        groups("1").alias("comm"),
        as_int(groups("2"), pl.Int32()).alias("comm_rank"),
        as_int(groups("3"), pl.Int32()).alias("comm_nranks"),
        _comm_id(after).alias("comm_id"),
        after.str.extract(_PHASE, 1).alias("nccl_phase"),
    )


def _head_table(heads: pl.Series) -> pl.DataFrame:
    """One row per header of `heads`: host, pid, tid, device and the optional bare time stamp."""
    table = heads.to_frame("_head")
    groups = pl.col("_head").str.extract_groups(_HEAD)
    field = groups.struct.field
    return table.select(
        "_head",
        _ts=datetime_from(field("1"), "%Y-%m-%d %H:%M:%S%.f"),
        _host=field("2"),
        _pid=as_int(field("3"), pl.Int64()),
        _tid=as_int(field("4"), pl.Int64()),
        _dev=as_int(field("5"), pl.Int32()),
    )


def _comm_fields(df: pl.DataFrame) -> pl.DataFrame:
    """comm pointer, commId, rank in comm, nranks and init/abort phase of communicator lines."""
    groups = pl.col("_after").str.extract_groups(COMM)
    field = groups.struct.field
    return df.with_columns(
        comm=field("1"),
        comm_rank=as_int(field("2"), pl.Int32()),
        comm_nranks=as_int(field("3"), pl.Int32()),
        comm_id=_comm_id(pl.col("_after")),
        nccl_phase=pl.col("_after").str.extract(_PHASE, 1),
    )


def _comm_id(after: pl.Expr) -> pl.Expr:
    """The commId, or for a split's START that has none `split <color>/<splitCount>` (the
    diagnosis matches it to the COMPLETE of the same process and comm pointer)."""
    split = after.str.extract_groups(_SPLIT).struct.field
    return pl.coalesce(after.str.extract(_COMM_ID, 1),
                       pl.concat_str(pl.lit("split "), split("2"), pl.lit("/"), split("1")))
