"""Small families: raw uvicorn access lines, tqdm bars, Ascend CANN errors, Gloo."""

from __future__ import annotations

import polars as pl

from logcorr.formats._common import BODY, as_int, datetime_from

UVICORN = r"^(?:INFO|WARNING|ERROR|DEBUG|CRITICAL|TRACE):\s{1,9}\S"
_TQDM = r"it/s[\],]|s/it[\],]|\d%\||% Completed \|"
CANN_ERROR = (
    r"^\[ERROR\] (\d{4}-\d\d-\d\d)-(\d\d:\d\d:\d\d) \(PID:(\d+), Device:(-?\d+), RankID:(-?\d+)\)"
)
CANN_CODE = r"(?:^|detail:)(E[A-Z]\d{4})?(?::\s*)?\[PID: (\d+)\] (\d{4}-\d\d-\d\d)-(\d\d:\d\d:\d\d)\.(\d{3})\.(\d{3})"


def candidates(body: pl.Expr) -> pl.Expr:
    """Cheap test for any of the small families."""
    return (
        body.str.contains(_TQDM)
        | body.str.contains("[PID: ", literal=True)
        | body.str.starts_with("[ERROR] ")
        | body.str.starts_with("[Gloo] ")
        | body.str.contains(UVICORN)
    )


def parse(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Tag each row with its family and fields; rows of none are returned as bad."""
    err = BODY.str.extract_groups(CANN_ERROR).struct.field
    code = BODY.str.extract_groups(CANN_CODE).struct.field
    df = df.with_columns(_e=err("3"), _c=code("2"))
    source = (
        pl.when(pl.col("_e").is_not_null() | pl.col("_c").is_not_null())
        .then(pl.lit("cann"))
        .when(BODY.str.contains(UVICORN))
        .then(pl.lit("uvicorn"))
        .when(BODY.str.starts_with("[Gloo] "))
        .then(pl.lit("gloo"))
        .when(BODY.str.contains(_TQDM))
        .then(pl.lit("tqdm"))
    )
    df = df.with_columns(source=source)
    bad = df.filter(pl.col("source").is_null()).drop("source", "_e", "_c")
    good = df.filter(pl.col("source").is_not_null())
    cann_ts = pl.coalesce(
        pl.concat_str([err("1"), pl.lit(" "), err("2"), pl.lit(".000000")]),
        pl.concat_str([code("3"), pl.lit(" "), code("4"), pl.lit("."), code("5"), code("6")]),
    )
    good = good.with_columns(
        starts_record=pl.col("source").is_in(["uvicorn"]) | pl.col("_e").is_not_null()
        | (pl.col("_c").is_not_null() & ~BODY.str.contains("detail:[PID:", literal=True)),
        role=pl.when(pl.col("source") == "uvicorn").then(pl.lit("main")),
        pid=as_int(pl.coalesce("_e", "_c"), pl.Int64()),
        device_id=as_int(err("4"), pl.Int32()),
        ts=datetime_from(cann_ts, "%Y-%m-%d %H:%M:%S%.6f"),
    )
    has_ts = pl.col("ts").is_not_null()
    good = good.with_columns(
        ts_has_date=pl.when(has_ts).then(True), ts_has_year=pl.when(has_ts).then(True)
    )
    return good.drop("_e", "_c"), bad
