"""SGLang's `[date time(.ms)? TOKENS] message` lines (schedulers, and the main process).

Fast path: lines starting `[20` are cut at fixed offsets (`[YYYY-MM-DD HH:MM:SS` then the
`.mmm`/rank-token tail up to the first `] `). The tail has few distinct values (one per process, or
per process x millisecond), so it is parsed once per distinct value and joined back. Other shapes
(time only `[15:58:39 TP0]`, missing `[`) go through one regex on their (few) rows.

SGLang <= 0.2.13 had neither time nor tokens: its TP workers wrote `[gpu=N] message`; such a
line gives its gpu_id (`device_id`), which the resolver maps through the node to a process.

Role: "scheduler" when rank tokens are present; "encoder" for an encoder server's
` encode_server` / ` encode_dp_worker[N]` prefix (EPD disaggregation); "main" only when the message proves it (uvicorn
through SGLang's formatter, `server_args=`, `The server is fired up`, ...). A TP1-only scheduler
has an empty prefix too, so an empty prefix alone proves nothing.
"""

from __future__ import annotations

import polars as pl

from logcorr.formats._common import (
    BODY,
    ENCODER_TOKEN,
    RANK_TOKEN,
    as_int,
    datetime_from,
    on_rows,
    per_distinct,
)

_RANK_KEYS = {
    "p_dp": "DP",
    "p_pp": "PP",
    "p_attn_cp": "ATTN_CP",
    "p_moe_dp": "MOE_DP",
    "p_tp": "TP",
    "p_ep": "EP",
    "p_pid": "PID",
}
_TOKENS = rf"^(?: {RANK_TOKEN})*$"
_ENCODER = rf"^ (?:{ENCODER_TOKEN})$"
GENERAL = (
    rf"^(\[)?(?:(\d{{4}}-\d\d-\d\d) )?(\d\d:\d\d:\d\d)(?:\.(\d{{3}}))?((?: {RANK_TOKEN})*)"
    rf"( (?:{ENCODER_TOKEN}))?\](?: |$)"
)
_MAIN_PROOF = (
    r"^[^\]]*\] (?:server_args=(?:ServerArgs\(|\{)|(?:INFO|WARNING|ERROR|DEBUG|CRITICAL|TRACE):\s"
    r"|(?:INFO|WARNING|ERROR|DEBUG|CRITICAL) (?:server_args|http_server|tokenizer_manager|engine"
    r"|launch_server)\.py:\d+: |The server is fired up|Received sigquit from a child proces"
    r"|kill_process_tree|Subprocess scheduler_\S* \(pid=\d+\) crashed"
    # the tokenizer manager's and HTTP server's own messages (0.5.9-0.5.23)
    r"|SIGQUIT received\. signum|SIGTERM received\. signum|Signal SIGTERM received while "
    r"|Dumping requests before crash|Dumped \d+ finished and \d+ unfinished requests before crash"
    r"|Request is disconnected from the client side|Gracefully exiting\.\.\."
    r"|Health check failed\. Server couldn't get a response|Rank \d+ scheduler is dead)"
)
_SERVER_ARGS = r"^[^\]]*\] server_args=(?:ServerArgs\(|\{)"
GPU = r"^\[gpu=(\d+)\] "
# a scheduler's watchdog dumps its own process (`pyspy_dump_schedulers()`: psutil's own pid)
# (0.5.23 also: `Pyspy failed (py-spy dump --native --pid 61). Error: …`, `All pyspy dump
# attempts failed for PID 61.`)
_PYSPY = (r"^[^\]]*\] (?:Pyspy (?:dump for|failed to dump) PID |Pyspy failed \(py-spy dump "
          r"[^)]*--pid |All pyspy dump attempts failed for PID )(\d+)")
_PYSPY_HINT = r"\] (?:Pyspy (?:dump for|failed to dump) PID |Pyspy failed \(py-spy|All pyspy dump)"


def fast_rows(text: pl.Series) -> pl.DataFrame:
    """The SGLang fields of `[YYYY-MM-DD HH:MM:SS…] ` lines, one row per line of `text`, and
    `_ok` (the line has this shape; the fields are null where it has not).

    The stamp and the `.mmm TOKENS` tail are cut at fixed offsets and parsed once per distinct
    value; the message is searched only for the proofs of a role.
    """
    t = pl.col("text")
    close = t.str.find("] ", literal=True).cast(pl.Int64)
    cut = text.to_frame("text").select(
        "text",
        _stamp=t.str.slice(1, 19),
        _tail=t.str.slice(20, (close - 20).clip(lower_bound=0)),
    )
    stamps = per_distinct(cut.get_column("_stamp"), _stamp_table)
    tails = per_distinct(cut.get_column("_tail"), _tail_table)
    df = pl.concat([cut.select("text"), stamps, tails], how="horizontal")
    ok = pl.col("_ts").is_not_null() & pl.col("_ok").fill_null(False)
    df = df.with_columns(_ok=ok, _ranked=ok & pl.col("_ranked"))
    # the message tests run on the rows they concern, gathered (see `on_rows`): a role's
    # proof on the lines without rank tokens, the py-spy dump on lines naming py-spy
    rows = df.select(unranked=pl.col("_ok") & ~pl.col("_ranked"),
                     hinted=pl.col("_ranked") & t.str.contains("yspy", literal=True))
    unranked = rows.get_column("unranked")
    main = on_rows(text, unranked, lambda m: m.str.contains(_MAIN_PROOF), pl.Boolean())
    server_args = on_rows(text, unranked, lambda m: pl.when(
        m.str.contains(_MAIN_PROOF) & m.str.contains(_SERVER_ARGS)).then(True), pl.Boolean())
    dumped = on_rows(text, rows.get_column("hinted"), lambda m: as_int(
        pl.when(m.str.contains(_PYSPY_HINT)).then(m).str.extract(_PYSPY, 1), pl.Int64()),
        pl.Int64())
    when = pl.when(pl.col("_ok"))
    return df.select(
        "_ok",
        when.then(pl.col("_ts") + pl.duration(milliseconds=pl.col("_ms").fill_null(0)))
        .alias("ts"),
        *(when.then(pl.lit(True)).alias(name)
          for name in ("ts_has_date", "ts_has_year", "starts_record")),
        pl.when(pl.col("_ranked")).then(pl.lit("scheduler"))
        .when(pl.col("_ok") & pl.col("_encoder")).then(pl.lit("encoder"))
        .when(pl.lit(main)).then(pl.lit("main")).alias("role"),
        pl.lit(server_args).alias("server_args"),
        pl.lit(dumped).alias("link_pid"),
        pl.lit(dumped).alias("pid"),
        *(when.then(pl.col(name)).alias(name) for name in _RANK_KEYS),
    )


def _stamp_table(stamps: pl.Series) -> pl.DataFrame:
    return stamps.to_frame("_stamp").select(
        _ts=datetime_from(pl.col("_stamp"), "%Y-%m-%d %H:%M:%S"))


def _tail_table(tails: pl.Series) -> pl.DataFrame:
    """One row per distinct `.mmm TOKENS` tail: validity, ms, the rank of each token and
    `_ranked` (a token names a rank). The tokens (one value per process) are parsed once each.
    """
    tail = pl.col("_tail")
    dotted = tail.str.starts_with(".")
    ms = pl.when(dotted).then(tail.str.slice(1, 3))
    table = tails.to_frame("_tail").select(
        _ms_ok=~dotted | ms.str.contains(r"^\d{3}$"),
        _ms=as_int(ms, pl.Int64()),
        _tokens=pl.when(dotted).then(tail.str.slice(4)).otherwise(tail),
    )
    fields = per_distinct(table.get_column("_tokens"), _token_table)
    return pl.concat([table, fields], how="horizontal").select(
        "_ms", pl.exclude("_ms", "_ms_ok", "_tokens", "_tokens_ok"),
        _ok=pl.col("_ms_ok") & pl.col("_tokens_ok"),
    )


def _token_table(tokens: pl.Series) -> pl.DataFrame:
    table = tokens.to_frame("_tokens").with_columns(
        _encoder=pl.col("_tokens").str.contains(_ENCODER),
        _tokens_ok=pl.col("_tokens").str.contains(_TOKENS),
        **_rank_columns(pl.col("_tokens")),
    )
    ranks = {name: pl.when(pl.col("_tokens_ok")).then(pl.col(name)) for name in _RANK_KEYS}
    return table.select(
        "_encoder", _tokens_ok=pl.col("_tokens_ok") | pl.col("_encoder"), **ranks,
        _ranked=pl.any_horizontal(pl.col(name).is_not_null() for name in _RANK_KEYS),
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
        _encoder=field("6").is_not_null(),
        **_rank_columns(field("5")),
    ).drop("_g")
    return _finish(good), bad


def gpu_candidates(body: pl.Expr) -> pl.Expr:
    """Cheap test: a `[gpu=N] ` line of SGLang 0.2.x."""
    return body.str.starts_with("[gpu=")


def parse_gpu(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """SGLang <= 0.2.13 printed no time and no rank tokens: its TP workers wrote
    `[gpu=N] Load weight begin. …` (N: the GPU the worker runs on, its gpu_id)."""
    gpu = as_int(BODY.str.extract(GPU, 1), pl.Int32())
    df = df.with_columns(_gpu=gpu)
    ok = pl.col("_gpu").is_not_null()
    good = df.filter(ok).with_columns(source=pl.lit("sglang"), starts_record=pl.lit(True),
                                      device_id=pl.col("_gpu"))
    return good.drop("_gpu"), df.filter(~ok).drop("_gpu")


def _finish(df: pl.DataFrame) -> pl.DataFrame:
    """Common columns: source, role, server_args, link_pid (message checks on few rows only:
    the regexes read a body that is null on the other rows)."""
    has_rank = pl.any_horizontal(pl.col(name).is_not_null() for name in _RANK_KEYS)
    df = df.with_columns(_ranked=has_rank).drop("_close", "_tail", "_ok", "_ms", strict=False)
    ranked = pl.when(pl.col("_ranked")).then(BODY)
    unranked = pl.when(~pl.col("_ranked")).then(BODY)
    main = unranked.str.contains(_MAIN_PROOF)
    pyspy = ranked.str.contains(_PYSPY_HINT)
    dumped = as_int(pl.when(pyspy).then(ranked).str.extract(_PYSPY, 1), pl.Int64())
    return df.with_columns(
        source=pl.lit("sglang"),
        starts_record=pl.lit(True),
        ts_has_year=pl.col("ts_has_date"),
        role=pl.when(pl.col("_ranked")).then(pl.lit("scheduler"))
        .when(pl.col("_encoder")).then(pl.lit("encoder"))
        .when(main).then(pl.lit("main")),
        server_args=pl.when(main & unranked.str.contains(_SERVER_ARGS)).then(True),
        link_pid=dumped,
        pid=dumped,
    ).drop("_ranked", "_encoder")
