"""The mechanics of bounded-memory analysis: chunks of lines, a spill folder, sorted runs and
their merge.

A log set is processed a chunk (a few MB of lines) at a time and never held whole: the line
core reads and parses each chunk (twice: a survey pass, then the attribution), attributed
chunks are written as *runs* (each sorted by the timeline key, cut into small *pieces*, held in
memory under a budget or spilled to Arrow IPC files), and the timeline is the k-way merge of
the runs, read a piece at a time. Peak memory is the chunks in the core's workers plus one
piece per run that is open at a time.

The timeline key of a row is (`_sk`, file_id, line, part): `_sk` is the row's sort time in
microseconds (rows without one sort last), the rest keeps each file's own order and breaks
ties by file.
"""

from __future__ import annotations

import bisect
import io
import itertools
import os
import secrets
import shutil
import tempfile
import threading
import weakref
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from logcorr import _core, cleanup
from logcorr.errors import CoreError, InputError

MERGE_ROWS = 1 << 17  # rows the merge may buffer over all runs together
BATCH_ROWS = 1 << 15  # rows the merge emits at most per batch
PIECE_ROWS = (8192, 32768)  # the smallest and largest piece
SORT_COLUMNS = ("_sk", "file_id", "line", "part")
MEMORY_BUDGET = 128 << 20  # bytes of chunks and runs held in memory before spilling
MEMORY_PER_BYTE = 4  # bytes of parsed chunks and runs held per byte of logs (about)
MEMORY_PER_LINE = 256  # and per line, whatever its length (about)
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


class Piece:
    """A stored frame: held in memory while the workspace's memory budget allows, else
    spilled to an Arrow file. Columns that are null throughout (most of a chunk's fields) are
    not stored but made again on reading. Readers see the same frame either way."""

    def __init__(self, frame: pl.DataFrame | None, path: Path | None, size: int,
                 schema: pl.Schema, empty: dict[str, pl.DataType]) -> None:
        self._frame = frame
        self.path = path
        self.size = size  # bytes held in memory (0 when spilled)
        self._schema = schema  # the whole frame's columns, in order
        self._empty = empty  # the columns not stored: null throughout

    def read(self, columns: Sequence[str] | None = None, n_rows: int | None = None
             ) -> pl.DataFrame:
        names = list(self._schema) if columns is None else list(columns)
        stored = [c for c in names if c not in self._empty]
        if self._frame is not None:
            frame = self._frame.select(stored)
            if n_rows is not None:
                frame = frame.head(n_rows)
        else:
            frame = pl.read_ipc(self._file(), columns=stored, n_rows=n_rows)
        if len(stored) == len(names):
            return frame
        height = frame.height
        return frame.with_columns(
            pl.Series(c, [None], dtype=self._empty[c]).new_from_index(0, height)
            for c in names if c in self._empty).select(names)

    def _file(self) -> Path:
        if self.path is None:
            raise ValueError("a released piece was read")  # a bug, never the input's fault
        return self.path

    @property
    def in_memory(self) -> bool:
        return self._frame is not None

    def scan(self) -> pl.LazyFrame:
        lazy = self._frame.lazy() if self._frame is not None else pl.scan_ipc(self._file())
        if not self._empty:
            return lazy
        return lazy.with_columns(pl.lit(None, dtype).alias(c) for c, dtype in
                                 self._empty.items()).select(list(self._schema))


class Workspace:
    """Where chunks and runs are stored between passes: in memory up to `memory_budget`
    bytes (MEMORY_BUDGET by default; a small set never touches the disk), the rest in a
    private temporary folder (under $TMPDIR) created on first use. The folder is removed by
    `close`, when the workspace is garbage-collected, or at interpreter exit - the removal is
    registered before the folder exists, so no interrupt can leave it behind. Spilling needs
    roughly a quarter to a half of the spilled part's size on disk."""

    def __init__(self, memory_budget: int | None = None) -> None:
        self.budget = memory_budget_from_env() if memory_budget is None else memory_budget
        self.held = 0  # bytes of the pieces held in memory
        self._lock = threading.Lock()
        root = tempfile.gettempdir()
        self._root = root
        self.path = Path(root) / f"logcorr-{secrets.token_hex(8)}"
        self._remove = weakref.finalize(self, _remove_folder, str(self.path))
        cleanup.register(str(self.path))
        self._made = False
        self._numbers = itertools.count(1)  # next() is atomic: writers may be threads

    def write(self, frame: pl.DataFrame, stem: str) -> Piece:
        if cleanup.closing():  # the run is being ended: no file after the folder's removal
            raise KeyboardInterrupt
        schema = frame.schema
        empty = {c: schema[c] for c, n in zip(frame.columns, frame.null_count().row(0))
                 if n == frame.height and frame.height}
        frame = frame.drop(list(empty)) if empty else frame
        size = int(frame.estimated_size())
        with self._lock:
            keep = self.held + size <= self.budget
            if keep:
                self.held += size
            else:
                self._make()
        if keep:
            return Piece(frame, None, size, schema, empty)
        path = self.path / f"{stem}-{next(self._numbers):06d}.arrow"
        try:
            frame.write_ipc(path, compression="lz4")
        except OSError as error:
            raise _no_room(str(self.path), error) from None
        return Piece(None, path, 0, schema, empty)

    def release(self, piece: Piece) -> None:
        """`piece` will not be read again: its memory (or file) is freed."""
        with self._lock:
            self.held -= piece.size
            piece.size = 0
            piece._frame = None
        if piece.path is not None:
            piece.path.unlink(missing_ok=True)
            piece.path = None

    def _make(self) -> None:
        if not self._made:
            try:
                self.path.mkdir(mode=0o700)
            except OSError as error:
                raise _no_room(self._root, error) from None
            self._made = True

    def close(self) -> None:
        self._remove()


def memory_budget_for(total: int, lines: int | None = None) -> int:
    """The budget for a set of `total` bytes of logs in `lines` lines (when known):
    LOGCORR_MEMORY_BUDGET when set, else MEMORY_BUDGET when the whole set's chunks and runs fit
    in it (about a quarter of it in logs, and a few hundred thousand lines: a row costs its
    columns however short its text), else none - held pieces cost more than their frames' size
    (a piece keeps the buffers of the frame it was cut from) and save no time once most pieces
    spill (measured: the 10M set peaks at 1.14 GB with the budget, 0.9 GB without, in the same
    time; 4M empty lines at 1.9 GB with it, 0.7 GB without)."""
    if os.environ.get("LOGCORR_MEMORY_BUDGET", "").strip():
        return memory_budget_from_env()
    held = total * MEMORY_PER_BYTE + (lines or 0) * MEMORY_PER_LINE
    return MEMORY_BUDGET if held <= MEMORY_BUDGET else 0


def memory_budget_from_env() -> int:
    """MEMORY_BUDGET, or the bytes LOGCORR_MEMORY_BUDGET names (`0` spills everything)."""
    text = os.environ.get("LOGCORR_MEMORY_BUDGET", "").strip()
    if not text:
        return MEMORY_BUDGET
    scale = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}.get(text[-1].lower(), 1)
    try:
        value = int(float(text[:-1] if scale > 1 else text) * scale)
    except ValueError:
        value = -1
    if value < 0:
        raise InputError(f"LOGCORR_MEMORY_BUDGET={text!r} is not a size: give bytes, or a "
                         "number with k, m or g (e.g. 256m; 0 spills everything to TMPDIR)")
    return value


def _remove_folder(path: str) -> None:
    shutil.rmtree(path, True)
    cleanup.unregister(path)


def _no_room(folder: str, error: OSError) -> InputError:
    return InputError(f"cannot write temporary files in {folder}: "
                      f"{error.strerror or error}; point TMPDIR at a folder with free space "
                      "(about half the size of the logs)")


def sorted_by_key(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` sorted by the timeline key; as it is when it already is (an attributed chunk
    of one file in time order: a test over the key columns, about a tenth of the sort)."""
    after = pl.lit(True)
    for name in reversed(SORT_COLUMNS):  # each row's key after the one before it
        column = pl.col(name)
        before = column.shift(1)
        after = (column > before) | ((column == before) & after)
    if frame.select(after.fill_null(True).all()).item():
        return frame
    return frame.sort(SORT_COLUMNS)


def key_of(frame: pl.DataFrame, index: int) -> Key:
    """The timeline key of row `index` of `frame`."""
    return _Keys(frame)[index]


class _Keys:
    """The timeline keys of a frame's rows as a sequence, read on demand (for `bisect`) by
    scalar gets: a `select` would run the query engine, about 0.2 ms per call."""

    def __init__(self, frame: pl.DataFrame) -> None:
        self._columns = [frame.get_column(name) for name in SORT_COLUMNS]
        self._height = frame.height

    def __len__(self) -> int:
        return self._height

    def __getitem__(self, index: int) -> Key:
        sk, file_id, line, part = (column[index] for column in self._columns)
        return (int(sk), int(file_id), int(line), int(part))


@dataclass
class Run:
    """Rows sorted by the timeline key, stored as pieces (see `piece_rows`)."""

    pieces: list[Piece] = field(default_factory=list)
    first: Key | None = None
    last: Key | None = None
    rows: int = 0


def piece_rows(runs: int) -> int:
    """Rows per piece when about `runs` runs will be open at once: the merge holds a piece of
    each, so many runs get small pieces and few runs large ones (fewer merge steps)."""
    smallest, largest = PIECE_ROWS
    return max(smallest, min(largest, MERGE_ROWS // max(1, runs)))


def write_run(workspace: Workspace, frame: pl.DataFrame, runs: list[Run], rows: int) -> None:
    """Store `frame`, sorted by the timeline key, in pieces of `rows` rows: at the end of the
    last of `runs` when it starts after that run ends (the next chunk of the same file
    does), else as a new run."""
    if frame.height == 0:
        return
    first = key_of(frame, 0)
    last_run = runs[-1] if runs else None
    if last_run is None or last_run.last is None or first <= last_run.last:
        last_run = Run(first=first)
        runs.append(last_run)
    run = last_run
    for start in range(0, frame.height, rows):
        run.pieces.append(workspace.write(frame.slice(start, rows), "run"))
    run.rows += frame.height
    run.last = key_of(frame, frame.height - 1)


def merge(runs: Sequence[Run], columns: Sequence[str] | None = None) -> Iterator[pl.DataFrame]:
    """The rows of all runs in timeline-key order, a batch at a time (k-way merge of pieces).

    Each step emits the buffered rows up to the smallest last key among the runs that have
    more pieces (no row still on disk can come before it), BATCH_ROWS at most, the smallest
    keys first (the core's k-way step, `_merge_step`), then refills the runs it emptied.
    A run is opened only when the merge reaches its first key, so the runs of a log set that
    spans hours are not all in memory at once."""
    wanted = list(columns) if columns is not None else None
    if wanted is not None:
        wanted += [c for c in SORT_COLUMNS if c not in wanted]
    waiting = sorted((r for r in runs if r.pieces), key=lambda r: r.first or (NO_TIME,) * 4)
    active: list[_Open] = []

    def load(run: Run, index: int) -> _Open:
        frame = run.pieces[index].read(wanted)
        return _Open(run, index + 1, frame, key_of(frame, frame.height - 1),
                     _core.RunKeys(frame[list(SORT_COLUMNS)]))  # (no query: a tenth of a select's)

    while active or waiting:
        bound = min((o.last for o in active if o.next < len(o.run.pieces)), default=None)
        if waiting and (bound is None or (waiting[0].first or bound) <= bound):
            active.append(load(waiting.pop(0), 0))
            continue
        counts, order = _merge_step(active, bound)
        taken: list[pl.DataFrame] = []
        still: list[_Open] = []
        for o, count in zip(active, counts):
            if count:
                taken.append(o.rows.head(count))
            o.rows = o.rows.slice(count)
            if o.rows.height == 0 and o.next < len(o.run.pieces):
                o = load(o.run, o.next)
            if o.rows.height:
                still.append(o)
        active = still
        if taken:
            if order is None:
                yield pl.concat(taken) if len(taken) > 1 else taken[0]
            else:  # (one chunk first: a gather over several costs four times as much)
                yield pl.concat(taken, rechunk=True)[pl.DataFrame(order).to_series()]


def _merge_step(active: list[_Open], bound: Key | None
                ) -> tuple[list[int], _core.ArrowBatch | None]:
    """The core's merge step over the runs' buffered rows: how many leading rows of each it
    takes (their keys at most `bound`, BATCH_ROWS at most; each run's keys move past them)
    and their order (None: as laid end to end)."""
    try:
        return _core.merge_step([o.keys for o in active], bound, BATCH_ROWS)
    except RuntimeError as error:
        raise CoreError(f"{error}; please report it") from None


@dataclass
class _Open:
    """A run being merged: its next piece, the buffered rows, the key of its last row, and
    the keys of the buffered rows (read once, when the piece is loaded)."""

    run: Run
    next: int
    rows: pl.DataFrame
    last: Key
    keys: _core.RunKeys


def count_before(rows: pl.DataFrame, bound: Key) -> int:
    """How many leading rows of sorted `rows` have a key < bound (as `count_at_most`)."""
    return bisect.bisect_left(_Keys(rows), bound)


def count_at_most(rows: pl.DataFrame, bound: Key) -> int:
    """How many leading rows of sorted `rows` have a key <= bound: a binary search over
    scalar reads (about 15 probes for a piece; `Series.search_sorted` runs the query engine
    for each call, about 0.2 ms)."""
    return bisect.bisect_right(_Keys(rows), bound)


def numbered(batches: Iterable[pl.DataFrame], start: int = 0) -> Iterator[pl.DataFrame]:
    """Batches with `order`: the row's position in the timeline."""
    for batch in batches:
        yield batch.with_columns(pl.int_range(start, start + batch.height, dtype=pl.UInt64)
                                 .alias("order"))
        start += batch.height
