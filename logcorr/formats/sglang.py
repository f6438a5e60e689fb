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
    """Common columns: source, role, server_args, link_pid (message checks on few rows only)."""
    has_rank = pl.any_horizontal(pl.col(name).is_not_null() for name in _RANK_KEYS)
    df = df.with_columns(
        source=pl.lit("sglang"),
        starts_record=pl.lit(True),
        ts_has_year=pl.col("ts_has_date"),
        role=pl.when(has_rank).then(pl.lit("scheduler")),
    ).drop("_close", "_tail", "_ok", "_ms", strict=False)
    ranked = df.filter(pl.col("role").is_not_null())
    unranked = df.filter(pl.col("role").is_null())
    return pl.concat([_pyspy_links(ranked), _main_facts(unranked)], how="diagonal_relaxed")


def _pyspy_links(df: pl.DataFrame) -> pl.DataFrame:
    """`Pyspy dump for PID n:` -> link_pid (the scheduler dumps itself)."""
    hit = BODY.str.contains("] Pyspy dump for PID ", literal=True)
    rows = df.filter(hit).with_columns(link_pid=as_int(BODY.str.extract(_PYSPY, 1), pl.Int64()))
    return pl.concat([df.filter(~hit), rows], how="diagonal_relaxed")


def _main_facts(df: pl.DataFrame) -> pl.DataFrame:
    """role=main (and server_args) for prefix-less lines whose message proves the main process."""
    hit = BODY.str.contains(_MAIN_PROOF)
    rows = df.filter(hit).with_columns(
        role=pl.lit("main"),
        server_args=pl.when(BODY.str.contains(_SERVER_ARGS)).then(True),
    )
    return pl.concat([df.filter(~hit), rows], how="diagonal_relaxed")
