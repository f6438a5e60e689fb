"""Python-side text: tracebacks, faulthandler dumps, glog-style logging, py-spy dumps.

None of these carry a process prefix (glog carries a pid or tid), so apart from glog every line
here is a continuation (`starts_record` False) that inherits the process of its record.
"""

from __future__ import annotations

import polars as pl

from logcorr.formats import torch
from logcorr.formats._common import BODY, as_int, month_day_stamp

GLOG = r"^([IWEFV])(\d{4}) (\d\d:\d\d:\d\d)(?:\.(\d{6}))?(?: +(\d+))? [^\]\s]+:\d+\] "
_FILE_TB = r'^\s*File "[^"]*", line \d+, in '
_FILE_FH = r'^\s*File "[^"]*", line \d+ in '
_FILE_START = r'^\s*File "'
_EXC = r"^[A-Za-z_][\w.]*(?:Error|Exception|Interrupt|Exit|Warning|Fault|Failure)(?:: |:$|$)"
_PYSPY_FRAME = r"^ {4}[\w.<>:~\[\]$@ ]+ \([^()\s]+\)$"
_PROCESS = r"^Process (\d+): (\S.*)$"
_THREAD = r"^Thread (\d+) \((?:idle|active|gil)[^)]*\): "
# A traceback at the start of a line (not on a prefixed line, as SGLang logs its own) or a
# faulthandler dump is the crash of some process: it opens a record of its own, unless the line
# before (or the one before a blank line) ends with `:` and so announces it: `During handling of
# the above exception, …:`, `The above exception was the direct cause …:`, SGLang 0.3's
# `[… TP0] Exception in ModelTpServer:`, multiprocessing's `Process SpawnProcess-1:` - itself
# an opener: a child process whose target raised prints it before its traceback, and exits.
# (py-spy's `Process 4321: sglang::scheduler_TP4` always opens a record: see `parse`.)
CHILD_DIED = r"Process [A-Za-z]\w*-\d+:\s*$"
OPENS = (r"^(?:Traceback \(most recent call last\)|Exception in [\w.]+:\s*$"
         rf"|Fatal Python error: |{CHILD_DIED})")
CHAINS = r":$"
_TRACEBACK_STARTS = (
    "Traceback (most recent call last)",
    "During handling of the above exception",
    "The above exception was the direct cause",
)
_FAULT_STARTS = (
    "Fatal Python error: ",
    "Thread 0x",
    "Current thread 0x",
    "Extension modules: ",
    "<no Python frame>",
    "  <no Python frame>",
)


def glog_candidates(body: pl.Expr) -> pl.Expr:
    """Cheap test: a glog header `W0922 18:51:16…`."""
    return body.str.contains(r"^[IWEFV]\d{4} \d\d:")


def parse_glog(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """glog lines: ts (no year), and pid (python: µs ending in 000) or tid (C++)."""
    df = df.with_columns(_g=BODY.str.extract_groups(GLOG))
    field = pl.col("_g").struct.field
    ok = field("1").is_not_null()
    bad = df.filter(~ok).drop("_g")
    python_side = field("4").str.ends_with("000")
    good = df.filter(ok).with_columns(
        source=pl.lit("glog"),
        starts_record=pl.lit(True),
        ts=month_day_stamp(field("2"), field("3"), field("4")),
        pid=pl.when(python_side).then(as_int(field("5"), pl.Int64())),
        tid=pl.when(~python_side).then(as_int(field("5"), pl.Int64())),
    )
    good = good.with_columns(
        ts_has_date=pl.when(pl.col("ts").is_not_null()).then(True),
        ts_has_year=pl.when(pl.col("ts").is_not_null()).then(False),
    ).drop("_g")
    # (a torch built with glog writes c10d's watchdog lines this way)
    return torch.message_facts(good), bad


def candidates(body: pl.Expr) -> pl.Expr:
    """Cheap test: anything that may be a traceback, faulthandler or py-spy line."""
    starts = (_TRACEBACK_STARTS + _FAULT_STARTS
              + ("Process ", "Python v", "Thread ", "  ", "Exception in "))
    return (
        pl.any_horizontal(body.str.starts_with(start) for start in starts)
        | body.str.contains(_EXC)
        | body.str.contains(_FILE_START)  # a frame whose indent a wrapper or collector ate
    )


def parse(df: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Classify into traceback / faulthandler / pyspy; rows matching none are returned as bad."""
    df = df.with_columns(_src=_source())
    bad = df.filter(pl.col("_src").is_null()).drop("_src")
    chained = pl.col("_chained") if "_chained" in df.columns else pl.lit(False)
    good = df.filter(pl.col("_src").is_not_null()).with_columns(
        source=pl.col("_src"),
        # (py-spy's `Process N: title` opens its dump even after `Pyspy dump for PID N (…):`:
        # the title names the dumped process, which the line before may not)
        starts_record=(BODY.str.contains(OPENS) & ~chained.fill_null(False))
        | BODY.str.contains(_PROCESS),
        link_pid=as_int(BODY.str.extract(_PROCESS, 1), pl.Int64()),
        proctitle=BODY.str.extract(_PROCESS, 2),
        tid=as_int(BODY.str.extract(_THREAD, 1), pl.Int64()),
    )
    return good.drop("_src"), bad


def _source() -> pl.Expr:
    starts = pl.any_horizontal
    return (
        pl.when(starts(BODY.str.starts_with(s) for s in _TRACEBACK_STARTS))
        .then(pl.lit("traceback"))
        .when(BODY.str.contains(_FILE_TB))
        .then(pl.lit("traceback"))
        .when(BODY.str.contains(_FILE_FH) | starts(BODY.str.starts_with(s) for s in _FAULT_STARTS))
        .then(pl.lit("faulthandler"))
        .when(
            BODY.str.contains(_PROCESS)
            | BODY.str.contains(r"^Python v\d")
            | BODY.str.contains(_THREAD)
            | BODY.str.contains(_PYSPY_FRAME)
        )
        .then(pl.lit("pyspy"))
        .when(BODY.str.contains(_EXC) | BODY.str.contains(r"^    \S|^\s+[\^~]+\s*$")
              | BODY.str.contains(OPENS))
        .then(pl.lit("traceback"))
    )
