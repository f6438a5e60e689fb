"""torch c10d / ProcessGroupNCCL lines and the C++ exception tail.

    [rank1]:[E1016 03:31:38.928019586 ProcessGroupNCCL.cpp:607] [PG ID 2 PG GUID 3(tp:device) Rank 1]
        Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9141, OpType=_ALLGATHER_BASE, …)

The `[rankN]:` prefix is peeled by `wrappers` (-> torch_rank). The month of the header is not
zero-padded (`E210` = Feb 10), there is no year (placeholder 2000) and the fraction is in ns.
"""

from __future__ import annotations

import polars as pl

from logcorr.formats._common import BODY, as_int, month_day_stamp

HEADER = r"^ *\[([IWEF])(?:(\d{3,4}) (\d\d:\d\d:\d\d)(?:\.(\d+))? )? ?[\w./*\-]+:\d+\] "
# torch 2.5+: `[PG ID 2 PG GUID 3(tp:device) Rank 1]`; torch 2.4: `[PG 3 (tp:device) Rank 1]`,
# where the name is the GUID or a hash (`[PG 7c4f3b02… (tp:device) Rank 3]`); `[Rank 1]`
PG_TAG = (
    r"\[(?:PG ID (\d+) PG GUID ([^\s(\]]*)(?:\(([^)]*)\))?|PG (\w+)(?: \(([^)]*)\))?) Rank (\d+)\]"
    r"|\[Rank (\d+)\]"
)
WORK = r"WorkNCCL\(SeqNum=(-?\d+), OpType=(\w+)"
AT_WORK = r"(?:detected by watchdog at work|Timeout at NCCL work|at work sequence id): (-?\d+)"
COUNTERS = r"[Ll]ast enqueued (?:NCCL )?work: (-?\d+), last completed (?:NCCL )?work: (-?\d+)"
_FACT_HINT = r"Rank \d|WorkNCCL\(|work: |sequence id"
# a frame in the main executable names it as the process title SGLang set:
# `frame #26: _PyEval_EvalFrameDefault + 0x6bd (0x55f5f43e926d in sglang::scheduler_TP1)`
_FRAME_TITLE = r"^frame #\d+: .* \(0x[0-9a-fA-F]+ in (sglang::\S+)\)\s*$"
CPP_STARTS = (
    "terminate called after throwing",
    "terminate called recursively",
    "  what():",
    "Exception raised from ",
    "frame #",
)


def candidates(body: pl.Expr) -> pl.Expr:
    """Cheap test: the line may have a c10 header."""
    return body.str.contains(r"^ *\[[IWEF](?:\d| )")


def parse(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Parse c10 header rows; return (parsed, rows without a c10 header)."""
    df = df.with_columns(_g=BODY.str.extract_groups(HEADER))
    field = pl.col("_g").struct.field
    ok = field("1").is_not_null()
    bad = df.filter(~ok).drop("_g")
    good = df.filter(ok).with_columns(
        source=pl.lit("torch"),
        starts_record=pl.lit(True),
        ts=month_day_stamp(field("2"), field("3"), field("4")),
    )
    good = good.with_columns(
        ts_has_date=pl.when(pl.col("ts").is_not_null()).then(True),
        ts_has_year=pl.when(pl.col("ts").is_not_null()).then(False),
    ).drop("_g")
    return message_facts(good), bad


def cpp_candidates(body: pl.Expr) -> pl.Expr:
    """Cheap test: a C++ exception tail line."""
    return pl.any_horizontal(body.str.starts_with(start) for start in CPP_STARTS)


def parse_cpp(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """`terminate called …` opens a C++ exception record; `what():`, `Exception raised from`
    and `frame #N:` continue it. The record names no process (in a file several processes
    write to, the line before it may be another process's), so it has one only from its file
    (a file of one process) or from evidence of its own: a frame in the main executable shows
    the process title (`… in sglang::scheduler_TP1)`)."""
    good = df.with_columns(source=pl.lit("cpp"),
                           starts_record=BODY.str.starts_with("terminate called "),
                           proctitle=BODY.str.extract(_FRAME_TITLE, 1))
    return message_facts(good), df.clear()


def message_facts(df: pl.DataFrame) -> pl.DataFrame:
    """PG identity, WorkNCCL seq/op and watchdog counters, on rows that hint at them."""
    hinted = BODY.str.contains(_FACT_HINT)
    rows = df.filter(hinted)
    if rows.height == 0:
        return df
    pg = BODY.str.extract_groups(PG_TAG).struct.field
    work = BODY.str.extract_groups(WORK).struct.field
    counters = BODY.str.extract_groups(COUNTERS).struct.field
    rows = rows.with_columns(
        pg_id=as_int(pg("1"), pl.Int32()),
        pg_guid=pl.coalesce(pg("2"), pg("4")),
        pg_desc=pl.coalesce(pg("3"), pg("5")),
        pg_rank=as_int(pl.coalesce(pg("6"), pg("7")), pl.Int32()),
        seq=as_int(pl.coalesce(work("1"), BODY.str.extract(AT_WORK, 1)), pl.Int64()),
        op=work("2"),
        last_enqueued=as_int(counters("1"), pl.Int64()),
        last_completed=as_int(counters("2"), pl.Int64()),
    )
    return pl.concat([df.filter(~hinted), rows], how="diagonal_relaxed")
