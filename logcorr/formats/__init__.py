"""Line families: `parse(lines)` turns physical lines into record parts with their fields.

The work is done per line by the compiled core (`logcorr._core`, see `rust/logcorr-scan`):

1. fast paths, dispatched on the first bytes: a line starting `[20` with no second header is
   cut at fixed offsets (SGLang stamp and rank tokens); a line with one ` NCCL ` and a plain
   `host:pid:tid [dev]` header has that header read;
2. the rest: wrappers peeled, glued lines split into parts, the body cleaned, then offered to
   each family in turn (NCCL, SGLang of other shapes, torch c10, glog, C++ abort, the small
   families, Python tracebacks / faulthandler / py-spy); what none takes is `other`; wrapper
   fields fill host, torch rank, time and stream where the line left them empty;
3. what a line says by itself: its role from message stems, whether it is an NCCL line of its
   process's main thread (`_main`) or opens an exception record (`_exc`).
"""

from __future__ import annotations

import polars as pl

from logcorr import _core
from logcorr.model import LINES_SCHEMA, PARSED_SCHEMA

# Columns the core adds beside the parsed schema: what a line says by itself.
LOCAL_COLUMNS: dict[str, pl.DataType] = {"_main": pl.Boolean(), "_exc": pl.Boolean()}

__all__ = ["LOCAL_COLUMNS", "parse"]


def parse(lines: pl.DataFrame, before: pl.DataFrame | None = None) -> pl.DataFrame:
    """Physical lines (LINES_SCHEMA) -> record parts with their fields (PARSED_SCHEMA, then
    LOCAL_COLUMNS). `before`: the last lines before them (LINES_SCHEMA), read only to tell
    whether the first lines are announced by a line ending with `:`."""
    if lines.height == 0:
        return pl.DataFrame(schema={**PARSED_SCHEMA, **LOCAL_COLUMNS})
    lines = lines.select(list(LINES_SCHEMA))
    context = [] if before is None else [tuple(r) for r in before.select(
        list(LINES_SCHEMA)).iter_rows()]
    batch = _core.parse_lines(lines.get_column("file_id").to_list(),
                              lines.get_column("line").to_list(),
                              lines.get_column("text").to_list(), context)
    return pl.DataFrame(batch)
