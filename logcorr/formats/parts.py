"""Split physical lines that hold several records (glued output) into parts.

A split happens only before a strong header that is not at the start of the body: a SGLang
`[YYYY-MM-DD HH:MM:SS(.mmm)?( TOKEN)*] ` prefix, or a full NCCL `host:pid:tid [d] NCCL ` token
(optionally behind a bare SGLang time stamp, which then stays with it). Part 0 keeps the wrapper
prefix, so the texts of the parts concatenate to the physical line. Only lines that contain a
literal hint (`[20` or ` NCCL ` past the first character) reach the regex.

An NCCL header inside a line (two processes writing into one line) has no visible start when
it is glued to other text (`…166015g183:161258:166018 [1] NCCL …`, `… | 512g183:…`): the regex
takes the longest host it can (`166015g183`, `512g183`). The part's host is trusted only when
an NCCL line of the same chunk starts with it; when such a host ends the run (`g183`), the part
starts there; otherwise the part keeps its pid, thread and device but `_host_unknown` marks its
host as not to be trusted. A part that is only a `host:pid:tid` before such a header is marked
`_frag` (an NCCL line's start whose message was cut off).

A line is cut into at most MAX_PARTS parts: the text after the last cut stays one part, marked
`capped` (counted and reported), so a line of a million glued records costs a small multiple
of its own size.
"""

from __future__ import annotations

import polars as pl

from logcorr.formats._common import NCCL_HEADER, NCCL_HOST, SENTINEL, SGL_HEADER, SGL_STAMP

SPLIT = rf"(?:\[{SGL_STAMP}\] )?{NCCL_HEADER}|{SGL_HEADER}"
# a torch c10 line glued after another (`… before timing[rank5]:[E1129 10:11:09.12 …`): the
# character before is kept in place (not `:` or `]`, which chain `[rank5]:[rank5]:` prefixes)
_TORCH_SPLIT = r"([^:\]])((?:\[rank\d+\]:)+\[[IWEF]\d{3,4} \d\d:\d\d:\d\d)"
_TORCH_RANKS = r"^(?:\[rank(\d+)\]:)+"
HINTS = ["[20", " NCCL "]
MAX_PARTS = 4096
_NCCL_AT_START = rf"^(?:\[{SGL_STAMP}\] )?{NCCL_HEADER}"
_NCCL_BARE_START = rf"^{NCCL_HEADER}"
FRAGMENT = rf"^{NCCL_HOST}:\d+:\d+$"  # an NCCL header's `host:pid:tid` alone
_NCCL_HOST_AT_START = rf"^(?:\[{SGL_STAMP}\] )?({NCCL_HOST}):\d+:\d+ \[\d+\] "


def hint(text: pl.Expr) -> pl.Expr:
    """Cheap test: the line may hold a header past its first character."""
    tail = text.str.slice(1)
    return tail.str.contains(HINTS[0], literal=True) | tail.str.contains(HINTS[1], literal=True)


def _nccl_glue(body: pl.Expr) -> pl.Expr:
    """An NCCL header somewhere other than the start, or two of them."""
    return body.str.contains(" NCCL ", literal=True) & (
        ~body.str.contains(_NCCL_AT_START) | (body.str.count_matches(" NCCL ", literal=True) > 1)
    )


def split(df: pl.DataFrame, hosts: pl.Series | None = None) -> pl.DataFrame:
    """Explode glued lines into parts; adds `part` (UInt16), rewrites `text` and `body` per part.
    `hosts`: NCCL hosts seen on clean lines (to find where a glued NCCL header starts)."""
    body = pl.col("body")
    maybe = (body.str.slice(1).str.contains("[20", literal=True) | _nccl_glue(body)
             | body.str.slice(1).str.contains("[rank", literal=True)) & ~body.str.contains(
        SENTINEL, literal=True
    )
    if "_json" in df.columns:  # a Docker json-file line: the parts' texts could not make up
        maybe &= ~pl.col("_json").fill_null(False)  # the line read, so it stays whole
    glued = df.select(maybe.fill_null(False)).to_series()  # (tested once: read twice)
    single = df.filter(~glued).with_columns(part=pl.lit(0, pl.UInt16), _frag=pl.lit(False))
    multi = df.filter(glued)
    if multi.height == 0:
        return single
    starts = df.select(body.str.extract(_NCCL_HOST_AT_START, 1)).to_series()  # line starts
    hosts = starts if hosts is None else pl.concat([hosts, starts])
    marked = body.str.replace_all(SPLIT, SENTINEL + "${0}").str.replace_all(
        _TORCH_SPLIT, "${1}" + SENTINEL + "${2}")
    # (as lists, so that a line of a million pieces is capped before it becomes rows)
    pieces = marked.str.split(SENTINEL).list.eval(pl.element().filter(pl.element() != ""))
    many = pieces.list.len() > MAX_PARTS
    multi = (
        multi.with_columns(_pieces=pl.when(many).then(pl.concat_list(
            pieces.list.head(MAX_PARTS - 1), pieces.list.slice(MAX_PARTS - 1).list.join("")))
            .otherwise(pieces), capped=many)
        # (the line's own text and body go before the explode: each part would carry them,
        # a copy of the whole line per part)
        .drop("text", "body")
        .explode("_pieces")
        .with_columns(part=pl.int_range(pl.len(), dtype=pl.UInt16).over("_row"))
        .with_columns(capped=pl.col("capped") & (pl.col("part") == MAX_PARTS - 1))
    )
    later = pl.col("part") > 0
    # a later part is its own writer's line: its torch rank is its own `[rankN]:` (peeled
    # here as `wrappers.peel` did for the line's start) or none, never the line's
    current = (pl.col("_w_torch_rank") if "_w_torch_rank" in multi.columns
               else pl.lit(None, pl.Int32))
    multi = multi.with_columns(
        body=pl.when(later).then(pl.col("_pieces").str.replace(_TORCH_RANKS, ""))
        .otherwise(pl.col("_pieces")),
        text=pl.when(pl.col("part") == 0)
        .then(pl.concat_str([pl.col("_wrap"), pl.col("_pieces")]))
        .otherwise(pl.col("_pieces")),
        _w_torch_rank=pl.when(later).then(
            pl.col("_pieces").str.extract(_TORCH_RANKS, 1).cast(pl.Int32, strict=False))
        .otherwise(current.cast(pl.Int32)),
    ).drop("_pieces")
    return pl.concat([single, _glued_hosts(multi, hosts)], how="diagonal_relaxed")


def _glued_hosts(multi: pl.DataFrame, hosts: pl.Series | None) -> pl.DataFrame:
    """Parts after the first that begin with an NCCL header: move the start of the part to
    the longest known host that ends the header's host run, else mark the host unknown."""
    inside = ((pl.col("_row").shift(1) == pl.col("_row"))  # (behind a stamp: clearly cut)
              & pl.col("body").str.contains(_NCCL_BARE_START)).fill_null(False)
    multi = multi.with_columns(_token=pl.when(inside).then(
        pl.col("body").str.extract(r"^([^:]+):", 1)))
    known = [h for h in (hosts.drop_nulls().unique().to_list() if hosts is not None else [])
             if h]
    longest = pl.lit(None, pl.String)
    for host in sorted(known, key=len):  # the longest matching host is tried last and wins
        longest = pl.when(pl.col("_token").str.ends_with(host)).then(pl.lit(host)).otherwise(
            longest)
    cut = (pl.col("_token").str.len_chars() - pl.col("_found").str.len_chars()).fill_null(0)
    multi = multi.with_columns(_found=longest).with_columns(_cut=cut)
    moved = pl.col("body").str.slice(0, pl.col("_cut"))
    give = pl.when(pl.col("_row").shift(-1) == pl.col("_row")).then(
        moved.shift(-1)).otherwise(pl.lit("")).fill_null("")
    multi = multi.with_columns(
        text=pl.concat_str([pl.col("text").str.slice(pl.col("_cut")), give]),
        body=pl.concat_str([pl.col("body").str.slice(pl.col("_cut")), give]),
        _host_unknown=pl.col("_token").is_not_null() & pl.col("_found").is_null(),
    ).drop("_token", "_found", "_cut")
    # a bare `host:pid:tid` right before a glued NCCL header: the start of a line whose message
    # another process's line cut off (`g183:161264:166015g183:161258:166018 [1] NCCL …`)
    followed = (pl.col("_row").shift(-1) == pl.col("_row")) & pl.col("body").shift(-1).str.contains(
        _NCCL_BARE_START)
    return multi.with_columns(_frag=(followed & pl.col("body").str.contains(FRAGMENT))
                              .fill_null(False))
