"""The mechanics of bounded-memory analysis: chunks of lines, a spill folder, sorted runs and
their merge.

A log set is processed a chunk (a few MB of lines) at a time and never held whole: parsed
chunks are spilled to Arrow IPC files, attributed chunks are written as *runs* (each sorted by
the timeline key, cut into small *pieces*), and the timeline is the k-way merge of the runs,
read a piece at a time. Peak memory is one chunk's work plus one piece per run that is
open at a time.

The timeline key of a row is (`_sk`, file_id, line, part): `_sk` is the row's sort time in
microseconds (rows without one sort last), the rest keeps each file's own order and breaks
ties by file.
"""

from __future__ import annotations

import io
import itertools
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from logcorr.ingest import Source, iter_line_chunks

CHUNK_BYTES = 16 * 1024 * 1024
MERGE_ROWS = 1 << 19  # rows the merge may buffer over all runs together
PIECE_ROWS = (8192, 131072)  # the smallest and largest piece
SORT_COLUMNS = ("_sk", "file_id", "line", "part")
NO_TIME = 2**63 - 1  # the `_sk` of rows without a time: after every timed row
Key = tuple[int, int, int, int]


def compact(frame: pl.DataFrame) -> pl.DataFrame:
    """A copy of `frame` that owns just its own bytes. A filtered or sliced polars frame
    shares the string buffers of the frame it came from, so keeping a few rows of a chunk
    would keep the whole chunk's text alive."""
    buffer = io.BytesIO()
    frame.write_ipc(buffer, compression="uncompressed")
    buffer.seek(0)
    return pl.read_ipc(buffer)


def time_key(column: str = "_key") -> pl.Expr:
    """`_sk` from a datetime column: microseconds, or NO_TIME when null."""
    return pl.col(column).dt.epoch("us").fill_null(NO_TIME).alias("_sk")


class Workspace:
    """A private temporary folder for spilled chunks and runs; removed by `close`."""

    def __init__(self) -> None:
        self.path = Path(tempfile.mkdtemp(prefix="logcorr-"))
        self._numbers = itertools.count(1)  # next() is atomic: writers may be threads

    def write(self, frame: pl.DataFrame, stem: str) -> Path:
        path = self.path / f"{stem}-{next(self._numbers):06d}.arrow"
        frame.write_ipc(path, compression="lz4")
        return path

    def close(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def line_batches(sources: Sequence[Source], chunk_bytes: int, warnings: list[str]
                 ) -> Iterator[pl.DataFrame]:
    """LINES_SCHEMA frames of about `chunk_bytes` each, in (file, line) order: a large file is
    cut at line ends, small files are gathered (so 10,000 small files are not 10,000 chunks)."""
    gathered: list[pl.DataFrame] = []
    size = 0
    for frame in iter_line_chunks(sources, chunk_bytes, warnings):
        gathered.append(frame)
        size += int(frame.estimated_size())
        if size >= chunk_bytes:
            yield pl.concat(gathered)
            gathered, size = [], 0
    if gathered:
        yield pl.concat(gathered)


def _key_of(frame: pl.DataFrame, index: int) -> Key:
    row = frame.select(SORT_COLUMNS).row(index)
    return (int(row[0]), int(row[1]), int(row[2]), int(row[3]))


def _at_most(bound: Key) -> pl.Expr:
    """Rows whose timeline key is <= bound."""
    sk, file_id, line, part = (pl.col(c) for c in SORT_COLUMNS)
    b0, b1, b2, b3 = bound
    return (sk < b0) | ((sk == b0) & ((file_id < b1) | ((file_id == b1) & (
        (line < b2) | ((line == b2) & (part <= b3))))))


@dataclass
class Run:
    """Rows sorted by the timeline key, stored as pieces (see `piece_rows`)."""

    pieces: list[Path] = field(default_factory=list)
    first: Key | None = None
    rows: int = 0
    tail: list[pl.DataFrame] = field(default_factory=list)  # its last rows, for `tail`
    head: pl.DataFrame | None = None  # its first rows, for `head`


def piece_rows(runs: int) -> int:
    """Rows per piece when there will be about `runs` runs: the merge holds a piece of each
    open run, so many runs get small pieces and few runs large (fewer merge steps)."""
    smallest, largest = PIECE_ROWS
    return max(smallest, min(largest, MERGE_ROWS // max(1, runs)))


def write_run(workspace: Workspace, frame: pl.DataFrame, keep: int, rows: int) -> Run:
    """Store `frame`, sorted by the timeline key, as one run of pieces of `rows` rows; its
    first and last `keep` rows stay in memory too (the terminal view shows them without
    reading the runs)."""
    run = Run(rows=frame.height)
    if frame.height == 0:
        return run
    run.first = _key_of(frame, 0)
    for start in range(0, frame.height, rows):
        run.pieces.append(workspace.write(frame.slice(start, rows), "run"))
    run.head = compact(frame.head(keep))
    run.tail = [compact(frame.tail(keep))]
    return run


def merge(runs: Sequence[Run], columns: Sequence[str] | None = None) -> Iterator[pl.DataFrame]:
    """The rows of all runs in timeline-key order, a batch at a time (k-way merge of pieces).

    A run is opened only when the merge reaches its first key, so the runs of a log set that
    spans hours are not all in memory at once."""
    wanted = list(columns) if columns is not None else None
    if wanted is not None:
        wanted += [c for c in SORT_COLUMNS if c not in wanted]
    waiting = sorted((r for r in runs if r.pieces), key=lambda r: r.first or (NO_TIME,) * 4)
    active: list[tuple[Run, int, pl.DataFrame]] = []  # run, next piece, buffered rows

    def load(run: Run, index: int) -> pl.DataFrame:
        return pl.read_ipc(run.pieces[index], columns=wanted)

    while active or waiting:
        bound = min((_key_of(buf, buf.height - 1) for run, nxt, buf in active
                     if nxt < len(run.pieces)), default=None)
        if waiting and (bound is None or (waiting[0].first or bound) <= bound):
            run = waiting.pop(0)
            active.append((run, 1, load(run, 0)))
            continue
        taken: list[pl.DataFrame] = []
        still: list[tuple[Run, int, pl.DataFrame]] = []
        for run, nxt, buf in active:
            count = buf.height if bound is None else int(buf.select(_at_most(bound).sum()).item())
            if count:
                taken.append(buf.head(count))
            rest = buf.slice(count)
            if rest.height == 0 and nxt < len(run.pieces):
                rest, nxt = load(run, nxt), nxt + 1
            if rest.height:
                still.append((run, nxt, rest))
        active = still
        if taken:
            batch = pl.concat(taken) if len(taken) > 1 else taken[0]
            yield batch.sort(SORT_COLUMNS) if len(taken) > 1 else batch


def numbered(batches: Iterable[pl.DataFrame], start: int = 0) -> Iterator[pl.DataFrame]:
    """Batches with `order`: the row's position in the timeline."""
    for batch in batches:
        yield batch.with_columns(pl.int_range(start, start + batch.height, dtype=pl.UInt64)
                                 .alias("order"))
        start += batch.height


def head(runs: Sequence[Run], count: int) -> pl.DataFrame:
    """The first `count` rows of the merged timeline, from the rows each run keeps."""
    parts = [r.head for r in runs if r.head is not None]
    if not parts:
        return pl.DataFrame()
    return pl.concat(parts).sort(SORT_COLUMNS).head(count)


def tail(runs: Sequence[Run], count: int) -> pl.DataFrame:
    """The last `count` rows of the merged timeline: each lies in the last `count` rows of
    its own run."""
    parts = [t for r in runs for t in r.tail]
    if not parts:
        return pl.DataFrame()
    return pl.concat(parts).sort(SORT_COLUMNS).tail(count)
