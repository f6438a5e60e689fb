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
_MAIN_HINTS = [
    "server_args", "INFO:", "WARNING:", "ERROR:", "DEBUG:", "CRITICAL:", "fired up", "sigquit",
    "Subprocess scheduler_", "kill_process_tree", ".py:", "Pyspy dump for PID",
]  # fmt: skip
_UVICORN_LEVEL = r"^(?:INFO|WARNING|ERROR|DEBUG|CRITICAL|TRACE):\s"
_MAIN_SOURCE = r"^(?:INFO|WARNING|ERROR|DEBUG|CRITICAL) (?:server_args|http_server|tokenizer_manager|engine|launch_server)\.py:\d+: "
_MAIN_STEMS = ["The server is fired up", "Received sigquit from a child proces", "kill_process_tree"]


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
    """Common columns: source, role, server_args, link_pid (message checks on hinted rows only)."""
    has_rank = pl.any_horizontal(pl.col(name).is_not_null() for name in _RANK_KEYS)
    df = df.with_columns(
        source=pl.lit("sglang"),
        starts_record=pl.lit(True),
        ts_has_year=pl.col("ts_has_date"),
        role=pl.when(has_rank).then(pl.lit("scheduler")),
        _hint=BODY.str.contains_any(_MAIN_HINTS),
    )
    hinted = _message_facts(df.filter(pl.col("_hint")))
    plain = df.filter(~pl.col("_hint"))
    return pl.concat([plain, hinted], how="diagonal_relaxed").drop("_hint", "_close", "_tail", "_ok", "_ms", strict=False)


def _message_facts(df: pl.DataFrame) -> pl.DataFrame:
    """role=main / server_args / link_pid from the message of hinted rows."""
    msg = BODY.str.slice(pl.col("_close") + 2)
    is_args = msg.str.starts_with("server_args=ServerArgs(") | msg.str.starts_with("server_args={")
    proves_main = (
        is_args
        | msg.str.contains(_UVICORN_LEVEL)
        | msg.str.contains(_MAIN_SOURCE)
        | pl.any_horizontal(msg.str.starts_with(stem) for stem in _MAIN_STEMS)
        | (msg.str.starts_with("Subprocess scheduler_") & msg.str.contains(" crashed", literal=True))
    )
    return df.with_columns(
        role=pl.when(pl.col("role").is_null() & proves_main).then(pl.lit("main")).otherwise("role"),
        server_args=pl.when(is_args).then(True),
        link_pid=as_int(msg.str.extract(r"^Pyspy dump for PID (\d+)", 1), pl.Int64()),
    )
