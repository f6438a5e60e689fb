"""Small families: raw uvicorn access lines, tqdm bars, Ascend CANN errors, Gloo, UCX."""

from __future__ import annotations

import polars as pl

from logcorr.formats._common import BODY, as_int, datetime_from

UVICORN = r"^(?:INFO|WARNING|ERROR|DEBUG|CRITICAL|TRACE):\s{1,9}\S"
_TQDM = r"it/s[\],]|s/it[\],]|\d%\||% Completed \|"
CANN_ERROR = (
    r"^\[ERROR\] (\d{4}-\d\d-\d\d)-(\d\d:\d\d:\d\d) \(PID:(\d+), Device:(-?\d+), RankID:(-?\d+)\)"
)
UCX = r"^\[([\w.\-]+):(\d+):\d+:(\d+)\] "  # [host:pid:thread-index:tid]
CANN_CODE = r"(?:^|detail:)(E[A-Z]\d{4})?(?::\s*)?\[PID: (\d+)\] (\d{4}-\d\d-\d\d)-(\d\d:\d\d:\d\d)\.(\d{3})\.(\d{3})"


def candidates(body: pl.Expr) -> pl.Expr:
    """Cheap test for any of the small families."""
    return (
        body.str.contains(_TQDM)
        | body.str.contains("[PID: ", literal=True)
        | body.str.starts_with("[ERROR] ")
        | body.str.starts_with("[Gloo] ")
        | body.str.contains(UVICORN)
        | body.str.contains(UCX)
    )


def parse(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Tag each row with its family and fields; rows of none are returned as bad."""
    err = BODY.str.extract_groups(CANN_ERROR).struct.field
    code = BODY.str.extract_groups(CANN_CODE).struct.field
    ucx = BODY.str.extract_groups(UCX).struct.field
    df = df.with_columns(_e=err("3"), _c=code("2"), _uh=ucx("1"), _up=ucx("2"), _ut=ucx("3"))
    source = (
        pl.when(pl.col("_e").is_not_null() | pl.col("_c").is_not_null())
        .then(pl.lit("cann"))
        .when(pl.col("_uh").is_not_null())
        .then(pl.lit("ucx"))
        .when(BODY.str.contains(UVICORN))
        .then(pl.lit("uvicorn"))
        .when(BODY.str.starts_with("[Gloo] "))
        .then(pl.lit("gloo"))
        .when(BODY.str.contains(_TQDM))
        .then(pl.lit("tqdm"))
    )
    df = df.with_columns(source=source)
    bad = df.filter(pl.col("source").is_null()).drop("source", "_e", "_c", "_uh", "_up", "_ut")
    good = df.filter(pl.col("source").is_not_null())
    cann_ts = pl.coalesce(
        pl.concat_str([err("1"), pl.lit(" "), err("2"), pl.lit(".000000")]),
        pl.concat_str([code("3"), pl.lit(" "), code("4"), pl.lit("."), code("5"), code("6")]),
    )
    good = good.with_columns(
        starts_record=pl.col("source").is_in(["uvicorn", "ucx"]) | pl.col("_e").is_not_null()
        | (pl.col("_c").is_not_null() & ~BODY.str.contains("detail:[PID:", literal=True)),
        role=pl.when(pl.col("source") == "uvicorn").then(pl.lit("main")),
        pid=as_int(pl.coalesce("_e", "_c", "_up"), pl.Int64()),
        tid=as_int(pl.col("_ut"), pl.Int64()),
        host=pl.col("_uh"),
        device_id=as_int(err("4"), pl.Int32()),
        ts=datetime_from(cann_ts, "%Y-%m-%d %H:%M:%S%.6f"),
    )
    has_ts = pl.col("ts").is_not_null()
    good = good.with_columns(
        ts_has_date=pl.when(has_ts).then(True), ts_has_year=pl.when(has_ts).then(True)
    )
    return good.drop("_e", "_c", "_uh", "_up", "_ut"), bad
