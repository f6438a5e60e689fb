"""SGLang's `[date time(.ms)? TOKENS] message` lines (schedulers, and the main process).

Fast path: lines starting `[20` are cut at fixed offsets (`[YYYY-MM-DD HH:MM:SS` then the
`.mmm`/rank-token tail up to the first `] `). The tail has few distinct values (one per process, or
per process x millisecond), so it is parsed once per distinct value and joined back. Other shapes
(time only `[15:58:39 TP0]`, missing `[`) go through one regex on their (few) rows.

Role: "scheduler" when rank tokens are present; "main" only when the message proves it (uvicorn
through SGLang's formatter, `server_args=`, `The server is fired up`, ...). A TP1-only scheduler
has an empty prefix too, so an empty prefix alone proves nothing.
"""

from __future__ import annotations

import polars as pl

from logcorr.formats._common import BODY, RANK_TOKEN, as_int, datetime_from

_RANK_KEYS = {
    "p_dp": "DP",
    "p_pp": "PP",
    "p_attn_cp": "ATTN_CP",
    "p_moe_dp": "MOE_DP",
    "p_tp": "TP",
    "p_ep": "EP",
    "p_pid": "PID",
}
_TAIL = rf"^(?:\.(\d{{3}}))?((?: {RANK_TOKEN})*)$"
GENERAL = (
    rf"^(\[)?(?:(\d{{4}}-\d\d-\d\d) )?(\d\d:\d\d:\d\d)(?:\.(\d{{3}}))?((?: {RANK_TOKEN})*)\](?: |$)"
)
_MAIN_PROOF = (
    r"^[^\]]*\] (?:server_args=(?:ServerArgs\(|\{)|(?:INFO|WARNING|ERROR|DEBUG|CRITICAL|TRACE):\s"
    r"|(?:INFO|WARNING|ERROR|DEBUG|CRITICAL) (?:server_args|http_server|tokenizer_manager|engine"
    r"|launch_server)\.py:\d+: |The server is fired up|Received sigquit from a child proces"
    r"|kill_process_tree|Subprocess scheduler_\S* \(pid=\d+\) crashed)"
)
_SERVER_ARGS = r"^[^\]]*\] server_args=(?:ServerArgs\(|\{)"
_PYSPY = r"^[^\]]*\] Pyspy dump for PID (\d+)"


def fast_candidates(text: pl.Expr) -> pl.Expr:
    """Rows that may take the fixed-offset path."""
    return text.str.starts_with("[20")


def parse_fast(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Parse `[YYYY-MM-DD HH:MM:SS…] ` rows; return (parsed, rows that are not this shape)."""
    df = df.with_columns(
        _close=BODY.str.find("] ", literal=True).cast(pl.Int64),
        ts=datetime_from(BODY.str.slice(1, 19), "%Y-%m-%d %H:%M:%S"),
    ).with_columns(_tail=BODY.str.slice(20, (pl.col("_close") - 20).clip(lower_bound=0)))
    df = df.join(_tail_table(df.get_column("_tail")), on="_tail", how="left")
    ok = pl.col("ts").is_not_null() & pl.col("_ok").fill_null(False)
    bad = df.filter(~ok).drop("_close", "ts", "_tail", "_ok", "_ms", *_RANK_KEYS)
    good = df.filter(ok).with_columns(
        ts=pl.col("ts") + pl.duration(milliseconds=pl.col("_ms").fill_null(0)),
        ts_has_date=pl.lit(True),
    )
    return _finish(good), bad


def fast_fields(df: pl.DataFrame, mask: str) -> pl.DataFrame:
    """`parse_fast` on the rows where column `mask` is true, on the whole frame (no filter):
    the stamp and the `.mmm TOKENS` tail are cut at fixed offsets and parsed once per distinct
    value (joins on small tables). Adds `_sgl_ok` and, on those rows, the SGLang fields."""
    text = pl.when(pl.col(mask)).then(pl.col("text"))
    close = text.str.find("] ", literal=True).cast(pl.Int64)
    df = df.with_columns(
        _stamp=text.str.slice(1, 19),
        _tail=text.str.slice(20, (close - 20).clip(lower_bound=0)),
    )
    stamps = df.get_column("_stamp").drop_nulls().unique().to_frame()
    stamps = stamps.with_columns(_ts=datetime_from(pl.col("_stamp"), "%Y-%m-%d %H:%M:%S"))
    tails = _tail_table(df.get_column("_tail").drop_nulls())
    df = df.join(stamps, on="_stamp", how="left", maintain_order="left")
    df = df.join(tails, on="_tail", how="left", maintain_order="left")
    ok = (pl.col("_ts").is_not_null() & pl.col("_ok").fill_null(False)).alias("_sgl_ok")
    df = df.with_columns(ok)
    when = pl.when(pl.col("_sgl_ok"))
    has_rank = pl.any_horizontal(pl.col(name).is_not_null() for name in _RANK_KEYS)
    ranked_body = pl.when(pl.col("_sgl_ok") & has_rank).then(pl.col("text"))
    unranked_body = pl.when(pl.col("_sgl_ok") & ~has_rank).then(pl.col("text"))
    main = unranked_body.str.contains(_MAIN_PROOF)
    pyspy = ranked_body.str.contains("] Pyspy dump for PID ", literal=True)
    return df.with_columns(
        when.then(pl.col("_ts") + pl.duration(milliseconds=pl.col("_ms").fill_null(0))).alias("ts"),
        when.then(True).alias("ts_has_date"),
        when.then(True).alias("ts_has_year"),
        when.then(True).alias("starts_record"),
        pl.when(pl.col("_sgl_ok") & has_rank).then(pl.lit("scheduler"))
        .when(main).then(pl.lit("main")).alias("role"),
        pl.when(main & unranked_body.str.contains(_SERVER_ARGS)).then(True).alias("server_args"),
        as_int(pl.when(pyspy).then(ranked_body).str.extract(_PYSPY, 1), pl.Int64()).alias(
            "link_pid"),
        *(when.then(pl.col(name)).alias(name) for name in _RANK_KEYS),
    ).drop("_stamp", "_tail", "_ts", "_ok", "_ms")


def _tail_table(tails: pl.Series) -> pl.DataFrame:
    """One row per distinct `.mmm TOKENS` tail: validity, ms and the rank of each token."""
    table = tails.unique().to_frame("_tail")
    groups = pl.col("_tail").str.extract_groups(_TAIL)
    return table.with_columns(
        _ok=groups.struct.field("2").is_not_null(),
        _ms=as_int(groups.struct.field("1"), pl.Int64()),
        **_rank_columns(groups.struct.field("2")),
    )


def _rank_columns(tokens: pl.Expr) -> dict[str, pl.Expr]:
    return {
        name: as_int(tokens.str.extract(rf"(?:^| ){key}(\d+)(?: |$)", 1), pl.Int32())
        for name, key in _RANK_KEYS.items()
    }


def general_candidates(body: pl.Expr) -> pl.Expr:
    """Rows that may be a SGLang line of another shape (cheap test before the regex)."""
    return body.str.contains(r"^\[?\d\d(?:\d\d-\d\d-\d\d |:\d\d:\d\d)")


def parse_general(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Parse time-only, missing-`[` and other SGLang shapes; return (parsed, not this shape)."""
    groups = BODY.str.extract_groups(GENERAL)
    df = df.with_columns(_g=groups)
    field = pl.col("_g").struct.field
    ok = field("3").is_not_null() & (field("1").is_not_null() | field("2").is_not_null())
    bad = df.filter(~ok.fill_null(False)).drop("_g")
    good = df.filter(ok.fill_null(False))
    date = field("2")
    stamp = pl.concat_str(
        [date.fill_null("2000-01-01"), pl.lit(" "), field("3"), pl.lit("."), field("4").fill_null("000")]
    )
    good = good.with_columns(
        ts=datetime_from(stamp, "%Y-%m-%d %H:%M:%S%.3f"),
        ts_has_date=date.is_not_null(),
        _close=BODY.str.find("]", literal=True).cast(pl.Int64),
        **_rank_columns(field("5")),
    ).drop("_g")
    return _finish(good), bad


def _finish(df: pl.DataFrame) -> pl.DataFrame:
    """Common columns: source, role, server_args, link_pid (message checks on few rows only:
    the regexes read a body that is null on the other rows)."""
    has_rank = pl.any_horizontal(pl.col(name).is_not_null() for name in _RANK_KEYS)
    df = df.with_columns(_ranked=has_rank).drop("_close", "_tail", "_ok", "_ms", strict=False)
    ranked = pl.when(pl.col("_ranked")).then(BODY)
    unranked = pl.when(~pl.col("_ranked")).then(BODY)
    main = unranked.str.contains(_MAIN_PROOF)
    pyspy = ranked.str.contains("] Pyspy dump for PID ", literal=True)
    return df.with_columns(
        source=pl.lit("sglang"),
        starts_record=pl.lit(True),
        ts_has_year=pl.col("ts_has_date"),
        role=pl.when(pl.col("_ranked")).then(pl.lit("scheduler"))
        .when(main).then(pl.lit("main")),
        server_args=pl.when(main & unranked.str.contains(_SERVER_ARGS)).then(True),
        link_pid=as_int(pl.when(pyspy).then(ranked).str.extract(_PYSPY, 1), pl.Int64()),
    ).drop("_ranked")
