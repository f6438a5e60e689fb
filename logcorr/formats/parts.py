"""Split physical lines that hold several records (glued output) into parts.

A split happens only before a strong header that is not at the start of the body: a SGLang
`[YYYY-MM-DD HH:MM:SS(.mmm)?( TOKEN)*] ` prefix, or a full NCCL `host:pid:tid [d] NCCL ` token
(optionally behind a bare SGLang time stamp, which then stays with it). Part 0 keeps the wrapper
prefix, so the texts of the parts concatenate to the physical line. Only lines that contain a
literal hint (`[20` or ` NCCL ` past the first character) reach the regex.
"""

from __future__ import annotations

import polars as pl

from logcorr.formats._common import NCCL_HEADER, SENTINEL, SGL_HEADER, SGL_STAMP

SPLIT = rf"(?:\[{SGL_STAMP}\] )?{NCCL_HEADER}|{SGL_HEADER}"
HINTS = ["[20", " NCCL "]
_NCCL_AT_START = rf"^(?:\[{SGL_STAMP}\] )?{NCCL_HEADER}"


def hint(text: pl.Expr) -> pl.Expr:
    """Cheap test: the line may hold a header past its first character."""
    tail = text.str.slice(1)
    return tail.str.contains(HINTS[0], literal=True) | tail.str.contains(HINTS[1], literal=True)


def _nccl_glue(body: pl.Expr) -> pl.Expr:
    """An NCCL header somewhere other than the start, or two of them."""
    return body.str.contains(" NCCL ", literal=True) & (
        ~body.str.contains(_NCCL_AT_START) | (body.str.count_matches(" NCCL ", literal=True) > 1)
    )


def split(df: pl.DataFrame) -> pl.DataFrame:
    """Explode glued lines into parts; adds `part` (UInt16), rewrites `text` and `body` per part."""
    body = pl.col("body")
    maybe = (body.str.slice(1).str.contains("[20", literal=True) | _nccl_glue(body)) & ~body.str.contains(
        SENTINEL, literal=True
    )
    single = df.filter(~maybe).with_columns(part=pl.lit(0, pl.UInt16))
    multi = df.filter(maybe)
    if multi.height == 0:
        return single
    marked = body.str.replace_all(SPLIT, SENTINEL + "${0}")
    multi = (
        multi.with_columns(_pieces=marked.str.split(SENTINEL))
        .explode("_pieces")
        .filter(pl.col("_pieces") != "")
        .with_columns(part=pl.int_range(pl.len(), dtype=pl.UInt16).over("_row"))
    )
    multi = multi.with_columns(
        body=pl.col("_pieces"),
        text=pl.when(pl.col("part") == 0)
        .then(pl.concat_str([pl.col("_wrap"), pl.col("_pieces")]))
        .otherwise(pl.col("_pieces")),
    ).drop("_pieces")
    return pl.concat([single, multi], how="diagonal_relaxed")
