"""Small families: raw uvicorn access lines, tqdm bars, Ascend CANN errors, Gloo, UCX, the
SGLang router (Rust)."""

from __future__ import annotations

import polars as pl

from logcorr.formats._common import BODY, as_int, datetime_from, flag

UVICORN = r"^(?:INFO|WARNING|ERROR|DEBUG|CRITICAL|TRACE):\s{1,9}\S"
_TQDM = r"it/s[\],]|s/it[\],]|\d%\||% Completed \|"
CANN_ERROR = (
    r"^\[ERROR\] (\d{4}-\d\d-\d\d)-(\d\d:\d\d:\d\d) \(PID:(\d+), Device:(-?\d+), RankID:(-?\d+)\)"
)
# sglang-router / model gateway (Rust tracing): `2025-09-17 08:22:52  INFO sglang_router_rs::…`
# (the time may have been peeled as a kubectl --timestamps wrapper: then the level starts the line)
# (inside a request the tracing span comes first: `ERROR http_request{method=POST uri=…}: `)
ROUTER = (r"^ *(?:(\d{4}-\d\d-\d\d)[ T](\d\d:\d\d:\d\d)(?:\.(\d{1,9}))?Z? +)?"
          r"(TRACE|DEBUG|INFO|WARN|ERROR) +(?:\w+\{[^{}]*\}: ?)*"
          r"(?:sglang_router|sgl_model_gateway|smg)\w*::")
UCX = r"^\[([\w.\-]+):(\d+):\d+:(\d+)\] "  # [host:pid:thread-index:tid]
# torch's Gloo (CPU) group at init: `[Gloo] Rank 7 is connected to 15 peer ranks. Expected
# number of connected peer ranks is : 15` - the line names its own rank in a group of n+1
GLOO_CONNECTED = r"^\[Gloo\] Rank (\d+) is connected to (\d+) peer ranks"
# a CANN error line at the start (`EZ9999: [PID: 696742] 2025-10-31-21:35:03.992.057 …`), and the
# line end that makes it the rest of a torch_npu warning (`… Warning: EZ9999: Inner Error!`)
CANN_LINE = r"^E[A-Z]\d{4}:?\s*\[PID: \d+\]"
CANN_CHAINS = r"\bE[A-Z]\d{4}: Inner Error!?\s*$"
CANN_CODE = r"(?:^|detail:)(E[A-Z]\d{4})?(?::\s*)?\[PID: (\d+)\] (\d{4}-\d\d-\d\d)-(\d\d:\d\d:\d\d)\.(\d{3})\.(\d{3})"


# bash reporting a job it ran: `./run.sh: line 22: 103525 Killed   python -m sglang…`, or an
# interactive shell's `[1]+  Killed   python …`: the shell's line, no process of the server's
SHELL_JOB = (r"^(?:[^\s:]+: line \d+: \d+|\[\d+\][+-]?) +(?:Killed|Terminated|Aborted|"
             r"Segmentation fault|Bus error|Hangup|Quit|Done|Exit \d+)(?: \(core dumped\))? +\S")


def candidates(body: pl.Expr) -> pl.Expr:
    """Cheap test for any of the small families."""
    return (
        body.str.contains(SHELL_JOB)
        | body.str.contains(_TQDM)
        | body.str.contains("[PID: ", literal=True)
        | body.str.starts_with("[ERROR] ")
        | body.str.starts_with("[Gloo] ")
        | body.str.contains(UVICORN)
        | body.str.contains(UCX)
        | body.str.contains("sglang_router", literal=True)
        | body.str.contains("sgl_model_gateway", literal=True)
        | body.str.contains(" smg", literal=True)
    )


def parse(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Tag each row with its family and fields; rows of none are returned as bad."""
    err = BODY.str.extract_groups(CANN_ERROR).struct.field
    code = BODY.str.extract_groups(CANN_CODE).struct.field
    ucx = BODY.str.extract_groups(UCX).struct.field
    router = BODY.str.extract_groups(ROUTER).struct.field
    df = df.with_columns(_e=err("3"), _c=code("2"), _uh=ucx("1"), _up=ucx("2"), _ut=ucx("3"),
                         _rd=router("1"), _rt=router("2"), _rf=router("3"), _rl=router("4"))
    source = (
        pl.when(pl.col("_e").is_not_null() | pl.col("_c").is_not_null())
        .then(pl.lit("cann"))
        .when(pl.col("_uh").is_not_null())
        .then(pl.lit("ucx"))
        .when(pl.col("_rl").is_not_null())
        .then(pl.lit("router"))
        .when(BODY.str.contains(UVICORN))
        .then(pl.lit("uvicorn"))
        .when(BODY.str.starts_with("[Gloo] "))
        .then(pl.lit("gloo"))
        .when(BODY.str.contains(_TQDM))
        .then(pl.lit("tqdm"))
        .when(BODY.str.contains(SHELL_JOB))
        .then(pl.lit("shell"))
    )
    df = df.with_columns(source=source)
    scratch = ("_e", "_c", "_uh", "_up", "_ut", "_rd", "_rt", "_rf", "_rl")
    bad = df.filter(pl.col("source").is_null()).drop("source", *scratch)
    good = df.filter(pl.col("source").is_not_null())
    cann_ts = pl.coalesce(
        pl.concat_str([err("1"), pl.lit(" "), err("2"), pl.lit(".000000")]),
        pl.concat_str([code("3"), pl.lit(" "), code("4"), pl.lit("."), code("5"), code("6")]),
    )
    gloo = BODY.str.extract_groups(GLOO_CONNECTED).struct.field
    good = good.with_columns(
        gloo_rank=as_int(gloo("1"), pl.Int32()),
        gloo_size=as_int(gloo("2"), pl.Int32()) + 1,
        starts_record=pl.col("source").is_in(["uvicorn", "ucx", "router", "shell"])
        | BODY.str.contains(GLOO_CONNECTED)
        | pl.col("_e").is_not_null()
        | (pl.col("_c").is_not_null() & ~BODY.str.contains("detail:[PID:", literal=True)
           & ~flag(df, "_cann_chained")),
        role=pl.when(pl.col("source") == "uvicorn").then(pl.lit("main"))
        .when(pl.col("source") == "router").then(pl.lit("router")),
        pid=as_int(pl.coalesce("_e", "_c", "_up"), pl.Int64()),
        tid=as_int(pl.col("_ut"), pl.Int64()),
        host=pl.col("_uh"),
        device_id=as_int(err("4"), pl.Int32()),
        ts=pl.coalesce(datetime_from(cann_ts, "%Y-%m-%d %H:%M:%S%.6f"), datetime_from(
            pl.concat_str([pl.col("_rd"), pl.lit(" "), pl.col("_rt"), pl.lit("."),
                           pl.col("_rf").fill_null("0").str.slice(0, 6).str.pad_end(6, "0")]),
            "%Y-%m-%d %H:%M:%S%.6f")),
    )
    has_ts = pl.col("ts").is_not_null()
    good = good.with_columns(
        ts_has_date=pl.when(has_ts).then(True), ts_has_year=pl.when(has_ts).then(True)
    )
    return good.drop(*scratch), bad
