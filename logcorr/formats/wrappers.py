"""Outer prefixes added by launchers, collectors and viewers, peeled before parsing.

The `text` column is never changed: `peel` adds `_wrap` (the peeled prefix, "" when none), `body`
(the rest of the line) and the wrapper's fields; `clean` derives `pbody` (what the family parsers
read) by removing colour codes and Ray's dedup suffix wherever they are.

Shapes (outermost first; every piece optional):

    pdsh host        rdma-gpu-train-worker-0: <line with a header>
    docker compose   sglang-1  | <line>
    srun --label     0: <line>
    NULs / ANSI      ^@^@  \\x1b[0m
    viewer number    [80746]
    kubectl --prefix [pod/sglang-0/sglang]
    CRI              2025-07-25T07:53:08.21748708+08:00 stdout F
    kubectl --timestamps  2025-07-25T07:53:08.217487080Z
    Loki             1779264164797<TAB>2026-05-20T08:02:44.797Z<TAB>
    collector        [2025-02-27T16:30:43.48675097Z]
    local collector  2025-03-27 17:31:09.952  sm228-a100-40g-23
    Python logging   2025-03-08 02:04:48,693 - __main__ - INFO -   (a caller relaying output)
    vLLM-style       ERROR 02-09 16:43:26 tp_worker_overlap_thread.py:112]   (SGLang 0.4.2; no year)
    milabench        dinov2-giant-nodes.cn-d004 [stderr]
    Ray              \\x1b[36m(RayWorkerWrapper pid=270291, ip=10.175.94.190)\\x1b[0m  (or lost-ESC [36m)
    torchrun/NeMo    1067:[default0]:[rank0]:   nemo.collections.llm.api.pretrain/0 [default0]:

Docker's json-file driver (`{"log":"<line>\\n","stream":"stderr","time":"<RFC 3339 UTC>"}`,
what collectors ship from /var/lib/docker/containers) is an envelope, not a prefix: its `log`
string is decoded first and the shapes above are peeled from that.
"""

from __future__ import annotations

import polars as pl

from logcorr.formats._common import NCCL_HOST, as_int, datetime_from, month_day_stamp

_COLOUR = r"(?:\x1b\[[0-9;?]*[A-Za-z]|\[[0-9;]{1,6}m)"
_ISO = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?"

PDSH = (
    r"^([A-Za-z][\w.\-]*): (?:" + NCCL_HOST + r":\d+:\d+ \[\d+\] |\[\d{4}-\d\d-\d\d[ T]"
    r"|\[rank\d+\]:|\[[IWEF]\d{3,4} |\[\d\d:\d\d:\d\d[ \]]|\[default\d+\]:)"
)

WRAP = (
    r"^(?P<wrap>"
    r"(?:(?P<compose>[A-Za-z][\w.\-]*[-_]\d+) +\| )?"
    r"(?:(?P<task>\d{1,5}): )?"
    r"(?:\x00|\x1b\[[0-9;?]*[A-Za-z])*"
    r"(?:\[\d{1,9}\] )?"
    r"(?:\[(?P<kpod>pod/[^/\]\s]+)/[^\]\s]+\] )?"
    r"(?:(?P<cri>" + _ISO + r"(?:Z|[+-]\d\d:\d\d)) (?:stdout|stderr) [FP] "
    r"|(?P<kts>" + _ISO + r"(?:Z|[+-]\d\d:\d\d)) "
    r"|\d{10,16}\t(?P<loki>" + _ISO + r"Z)\t"
    r"|\[(?P<coll>" + _ISO + r"Z)\] ?"
    r"|(?P<lts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3})  (?P<lhost>[^\s\[\]]+) "
    r"|(?P<pylog>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) - [\w.<>\-]+ - "
    r"(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) - "
    r"|(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) (?P<vmd>\d\d)-(?P<vday>\d\d) "
    r"(?P<vhms>\d\d:\d\d:\d\d)(?:\.(?P<vfrac>\d+))? [\w.\-]+:\d+\] )?"
    r"(?:(?P<mhost>[\w.\-]+) \[(?:stdout|stderr)\] )?"
    r"(?: ?" + _COLOUR + r"?\((?P<ray>\w+ pid=\d+(?:, ip=[\w.\-:]+)?)\)(?: ?" + _COLOUR + r")? ?)?"
    r"(?: ?(?:(?:[\w.\-]+/\d+ |\d+:)?\[default\d+\]:)?(?:\[rank(?P<trank>\d+)\]:)+ ?"
    r"| ?(?:[\w.\-]+/\d+ |\d+:)?\[default\d+\]:)?"
    r")"
)

_DOCKER_LOG = r'^\{"log":"((?:[^"\\]|\\.)*)"'
_DOCKER_TIME = r'"time":"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?Z)"'
# JSON string escapes, read left to right (so `\\n` is a backslash and an n); Go's encoder
# writes <, > and & and control characters as \u escapes, other text as UTF-8
_ESCAPES = {"\\\\": "\\", '\\"': '"', "\\/": "/", "\\n": "\n", "\\r": "\r", "\\t": "\t",
            "\\b": "\b", "\\f": "\f", "\\u003c": "<", "\\u003e": ">", "\\u0026": "&",
            "\\u001b": "\x1b", "\\u0000": "\x00", "\\u2028": "\u2028", "\\u2029": "\u2029"}
_JUNK = r"\x1b\[[0-9;?]*[A-Za-z]|\[[0-9;]{1,6}m| ?\[repeated \d+x across cluster\]"
_JUNK_HINT = r"\x1b|\[repeated |\[[0-9;]{1,6}m"
# First characters a wrapped line can start with (a SGLang `[YYYY-MM-DD HH` line never is).
_WRAP_STARTS = r"^(?:(?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \d\d-\d\d |[A-Za-z][\w.\-]*[-_]\d+ +\| |[\x00\x1b(0-9]| [\[(\x1b]|\[(?:\d{1,9}\]|20\d\d-\d\d-\d\dT|default|rank|\d\dm|\d;|pod/)|[\w.\-]+ \[std|[\w.\-]+/\d+ \[def)"


def peel(df: pl.DataFrame) -> pl.DataFrame:
    """Add `_wrap`, `body`, `wrap_ts`, `_w_ts`, `_w_host`, `_w_torch_rank`, `_w_stream` (a
    kubectl pod `pod/NAME`, a Ray actor `WorkerDict pid=N, ip=…`, an srun task `task=N`, a
    docker compose service)."""
    df = df.with_columns(_pdsh=pl.col("text").str.extract(PDSH, 1))
    df = df.with_columns(
        _inner=pl.when(pl.col("_pdsh").is_null())
        .then(pl.col("text"))
        .otherwise(pl.col("text").str.slice(pl.col("_pdsh").str.len_chars() + 2))
    )
    docker = df.select(pl.col("_inner").str.starts_with('{"log":"').any()).item()
    if docker:
        df = _docker(df)
    maybe = pl.col("_inner").str.contains(_WRAP_STARTS)
    wrapped = df.filter(maybe)
    plain = df.filter(~maybe)
    wrapped = _wrapper_fields(wrapped)
    df = pl.concat([plain, wrapped], how="diagonal_relaxed")
    prefix = pl.col("_pdsh").str.len_chars().fill_null(-2) + 2 + pl.col("_wlen").fill_null(0)
    df = df.with_columns(
        _wrap=pl.col("text").str.slice(0, prefix),
        body=pl.col("text").str.slice(prefix),
        _w_host=pl.coalesce("_pdsh", "_w_host") if "_w_host" in df.columns else pl.col("_pdsh"),
    )
    if docker:  # the decoded line is the body (`_json` keeps it whole: see `parts.split`)
        enveloped = pl.col("_json")
        wrap_ts = pl.col("wrap_ts") if "wrap_ts" in df.columns else pl.lit(None)
        df = df.with_columns(
            _wrap=pl.when(enveloped).then(pl.lit("")).otherwise("_wrap"),
            body=pl.when(enveloped).then(pl.col("_inner").str.slice(pl.col("_wlen").fill_null(0)))
            .otherwise("body"),
            wrap_ts=pl.coalesce(wrap_ts, pl.col("_jtime")),
        ).drop("_jtime")
    return df.drop("_pdsh", "_inner", "_wlen", strict=False)


def _docker(df: pl.DataFrame) -> pl.DataFrame:
    """Decode the `log` string of Docker json-file lines into `_inner` (without its final
    newline); `_jtime` is the envelope's UTC time, `_json` marks the lines."""
    inner = pl.col("_inner")
    raw = inner.str.extract(_DOCKER_LOG, 1)
    decoded = (raw.str.replace(r"(?:\\r)?(?:\\n)?$", "")
               .str.replace_many(list(_ESCAPES), list(_ESCAPES.values())))
    return df.with_columns(
        _json=raw.is_not_null(),
        _jtime=inner.str.extract(_DOCKER_TIME, 1).str.to_datetime(
            "%Y-%m-%dT%H:%M:%S%.fZ", time_unit="us", strict=False).dt.replace_time_zone("UTC"),
        _inner=pl.coalesce(decoded, inner),
    )


def _wrapper_fields(df: pl.DataFrame) -> pl.DataFrame:
    """Extract the wrapper pieces of rows whose first characters look wrapped."""
    groups = pl.col("_inner").str.extract_groups(WRAP)
    df = df.with_columns(_g=groups).unnest("_g")
    cri = pl.col("cri")
    return df.with_columns(
        _wlen=pl.col("wrap").str.len_chars(),
        wrap_ts=pl.coalesce(
            pl.coalesce(cri, "kts").str.replace(r"Z$", "+00:00").str.to_datetime(
                "%Y-%m-%dT%H:%M:%S%.f%:z", time_unit="us", strict=False),
            pl.coalesce("loki", "coll").str.to_datetime(
                "%Y-%m-%dT%H:%M:%S%.fZ", time_unit="us", strict=False
            ).dt.replace_time_zone("UTC"),
        ).dt.convert_time_zone("UTC"),
        _w_ts=pl.coalesce(datetime_from(pl.col("lts"), "%Y-%m-%d %H:%M:%S%.3f"),
                          datetime_from(pl.col("pylog").str.replace(",", ".", literal=True),
                                        "%Y-%m-%d %H:%M:%S%.3f"),
                          month_day_stamp(pl.col("vmd") + pl.col("vday"), pl.col("vhms"),
                                          pl.col("vfrac"))),
        _w_no_year=pl.col("vmd").is_not_null(),
        _w_host=pl.coalesce("lhost", "mhost"),
        _w_torch_rank=as_int(pl.col("trank"), pl.Int32()),
        _w_stream=pl.coalesce("kpod", "ray",
                              pl.lit("task=") + pl.col("task"), "compose"),
    ).drop("wrap", "cri", "kts", "loki", "coll", "lts", "lhost", "mhost", "ray", "trank",
           "kpod", "task", "compose", "pylog", "vmd", "vday", "vhms", "vfrac")


def clean(body: pl.Expr) -> pl.Expr:
    """`body` without colour codes and Ray dedup suffixes (only rows holding a hint are touched)."""
    return (
        pl.when(body.str.contains(_JUNK_HINT))
        .then(body.str.replace_all(_JUNK, ""))
        .otherwise(body)
    )
