"""The analysis over *parts* of a set (groups of whole files), for an engine that runs them on
other machines (logcorr.engine_ray). The functions hold no state between calls; what one
hands the next is a plain value that travels:

    scan_part(files, chunk_bytes) -> bytes            pass 1 over a group: key rows,
                                                      server_args lines, exception seconds,
                                                      first times, dated-time counts
    whole_tables(parts) -> SurveyParts                the groups' surveys merged in file
                                                      order (key rows numbered as one reader
                                                      numbers them); `api.whole_set` resolves
                                                      them as the local run does
    attribute_part(files, tables, write) -> AttributedPart
                                                      pass 2 over a group: its rows in
                                                      timeline order cut at the ranges'
                                                      bounds (each range to `write`), its
                                                      counts, its event rows
    merge_range(fragments, start) -> frame            one range's rows of every group in
                                                      timeline order, numbered from `start`

A group is whole files, so the state a file carries from chunk to chunk (its open records and
their grammar, its time so far, its rows that wait for a first time, the next line a wrapped
line reads) never leaves the task that reads it. Cutting a file into byte ranges without that
state changes answers (`AttributePart.forget` shows it in the tests).

Order without a global sort: pass 1's counts of fully dated times give bounds that cut the
timeline into ranges of about equal size; each group's rows come out of pass 2 sorted by the
timeline key, so a group cuts them at the bounds and counts them, the counts' prefix sums
give each range's first `order`, and each range is merged from every group's slice of it.
The bounds only balance the ranges; the rows and their order are the same for any bounds.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from logcorr import __version__, _core
from logcorr.api import (
    DETAIL_COLUMNS,
    Analysis,
    Tally,
    _attribute_pass,
    _rows_again,
)
from logcorr.errors import InputError
from logcorr.ingest import MAX_ROWS, Source
from logcorr.model import TIMELINE_SCHEMA
from logcorr.output import ROW_GROUP
from logcorr.stream import (
    BATCH_ROWS,
    SORT_COLUMNS,
    Workspace,
    memory_budget_for,
    merge,
    piece_rows,
)

# (file_id, path bytes, display name): a file as a task is given it
File = tuple[int, bytes, str]
GROUP_BYTES = 64 << 20  # a group's bytes of files at most (a larger file is a group alone)
# The columns a group's rows travel with: the contract's (but `order`), the detail and the
# sort key.
FRAGMENT_COLUMNS = [*(c for c in TIMELINE_SCHEMA if c != "order"), *DETAIL_COLUMNS, "_sk"]


def files_of(sources: Sequence[Source]) -> list[File]:
    """Sources as tasks are given them: absolute paths (every worker reads the same path)."""
    return [(s.file_id, os.fsencode(os.path.abspath(s.path)), s.display) for s in sources]


def size_of(file: File) -> int:
    try:
        return os.stat(file[1]).st_size
    except OSError:
        return 0


def groups(files: Sequence[File], size: int) -> list[list[File]]:
    """Files in file order cut into groups: a file of `size` bytes or more alone, smaller ones
    gathered until a group holds `size` bytes.

    >>> sizes = {b"a": 5, b"b": 5, b"c": 30, b"d": 2}
    >>> cut = groups([(i, p, p.decode()) for i, p in enumerate(sizes)], 10)
    >>> [[f[2] for f in g] for g in cut]  # (files not found weigh nothing)
    [['a', 'b', 'c', 'd']]
    """
    out: list[list[File]] = []
    held = 0
    for file in files:
        bytes_ = size_of(file)
        if bytes_ >= size or not out or held >= size:
            out.append([])
            held = 0
        out[-1].append(file)
        held += bytes_
        if bytes_ >= size:
            held = size  # (nothing joins a large file's group)
    return out


def visible(files: Iterable[File]) -> None:
    """Every file is where the driver found it; else an error naming the first missing one
    (the inputs must be at the same path on every worker: shared storage)."""
    for _, path, display in files:
        if not os.path.exists(path):
            raise InputError(
                f"{os.fsdecode(path)} ({display}) is not there on the Ray worker on "
                f"{socket.gethostname()}: every worker must see the inputs at the same path "
                "(shared storage mounted alike on every node)")


def same_version(version: str) -> None:
    """The worker runs the driver's logcorr."""
    if version != __version__:
        raise InputError(f"the Ray worker on {socket.gethostname()} runs logcorr "
                         f"{__version__}, the driver {version}: install the same version "
                         "on every node")


def scan_part(files: list[File], chunk_bytes: int, version: str = __version__) -> bytes:
    """Pass 1 over a group of whole files: what it found, as bytes (`SurveyParts.add`)."""
    same_version(version)
    visible(files)
    data: bytes = _core.survey_part(files, chunk_bytes, MAX_ROWS)
    return data


def whole_tables(parts: Iterable[bytes]) -> Any:
    """The groups' surveys (in file order) merged: a `_core.SurveyParts`."""
    merged = _core.SurveyParts()
    for part in parts:
        merged.add(part)
    return merged


@dataclass(frozen=True)
class Tables:
    """What every task of pass 2 is given once: the whole set's key rows (bytes), the
    arguments of `start_attribution` (plain values: `api.attribution_arguments`), the chunk
    size and the bounds (µs) that cut the timeline into ranges."""

    keys: bytes
    arguments: dict[str, Any]
    chunk_bytes: int
    bounds: tuple[int, ...]
    version: str = __version__

    def part(self, files: list[File]) -> Any:
        """A `_core.AttributePart` over `files`, started."""
        part = _core.AttributePart(files, self.chunk_bytes, MAX_ROWS, self.keys)
        part.start_attribution(self.arguments)
        return part


@dataclass
class AttributedPart:
    """What pass 2 over a group gives the driver besides its rows: each range's row count,
    the counts (`events` left empty) and the event rows, their repeats cut."""

    counts: list[int]
    tally: Tally
    events: pl.DataFrame


def attribute_part(files: list[File], tables: Tables,
                   write: Callable[[int, pl.DataFrame], None], forget: bool = False
                   ) -> AttributedPart:
    """Pass 2 over a group of whole files, as the local run does it (`api._attribute_pass`):
    its rows sorted by the timeline key and cut at `tables.bounds`, each range's rows handed
    to `write(range, rows)` (FRAGMENT_COLUMNS) once the range is complete, so that at most one
    range is held. `forget` (tests only): every chunk starts without the state the one before
    left."""
    same_version(tables.version)
    visible(files)
    part = tables.part(files)
    total = sum(size_of(f) for f in files)
    counts = [0] * (len(tables.bounds) + 1)
    workspace = Workspace(memory_budget_for(total))
    try:
        logs = _Forgetting(part) if forget else part
        runs, tally, _ = _attribute_pass(logs, total, [], workspace, piece_rows(len(files)),
                                         lambda stage, done, of: None)
        events = tally.events if tally.events is not None else pl.DataFrame()
        tally.events = None
        for index, rows in ranges(merge(runs, FRAGMENT_COLUMNS), tables.bounds):
            counts[index] = rows.height
            write(index, rows)
    finally:
        workspace.close()
    return AttributedPart(counts, tally, events)


class _Forgetting:
    """An AttributePart whose every chunk starts without the state the one before left."""

    def __init__(self, part: Any) -> None:
        self.part = part

    def attribute_step(self) -> Any:
        self.part.forget()
        return self.part.attribute_step()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.part, name)


def ranges(batches: Iterable[pl.DataFrame], bounds: Sequence[int]
           ) -> Iterator[tuple[int, pl.DataFrame]]:
    """Rows in timeline order (batches) cut into ranges: range i holds the rows whose sort
    time is at least bounds[i - 1] and below bounds[i]. Each range that has rows is given
    once, when the rows reach past it (or at the end)."""
    held: list[pl.DataFrame] = []
    current = 0
    probe = pl.Series(bounds, dtype=pl.Int64)
    for batch in batches:
        batch = batch.select(FRAGMENT_COLUMNS)
        ends = [*batch.get_column("_sk").search_sorted(probe, side="left").to_list(),
                batch.height]
        start = 0
        for index, end in enumerate(ends):
            if index < current or end <= start:
                continue
            if index > current:
                if held:
                    yield current, pl.concat(held)
                held, current = [], index
            held.append(batch.slice(start, end - start))
            start = end
    if held:
        yield current, pl.concat(held)


def _empty_fragment() -> pl.DataFrame:
    schema: dict[str, pl.DataType] = {**TIMELINE_SCHEMA, "file_id": pl.UInt32(),
                                      "proc": pl.UInt32(), "record": pl.UInt32(),
                                      "why": pl.String(), "_sk": pl.Int64()}
    return pl.DataFrame(schema=schema).select(FRAGMENT_COLUMNS)


def offsets(counts: Sequence[Sequence[int]]) -> list[int]:
    """Each range's first `order`, from every group's rows per range (counts[group][range]).

    >>> offsets([[2, 0, 1], [1, 3, 0]])
    [0, 3, 6]
    """
    starts, at = [], 0
    for index in range(len(counts[0]) if counts else 0):
        starts.append(at)
        at += sum(group[index] for group in counts)
    return starts


def merge_range(fragments: Sequence[pl.DataFrame], start: int, detail: bool = False
                ) -> pl.DataFrame:
    """One range's rows of every group (each sorted by the timeline key) in timeline order,
    numbered from `start`: the contract's columns (and DETAIL_COLUMNS with `detail`)."""
    full = [f for f in fragments if f.height]
    rows = pl.concat(full).sort(SORT_COLUMNS) if len(full) > 1 else \
        full[0] if full else _empty_fragment()
    rows = rows.with_columns(pl.int_range(start, start + rows.height, dtype=pl.UInt64)
                             .alias("order"))
    return rows.select([*TIMELINE_SCHEMA, *(DETAIL_COLUMNS if detail else ())])


def partition_name(index: int) -> str:
    return f"part-{index:05d}.parquet"


def write_partition(rows: pl.DataFrame, folder: str, index: int) -> str:
    """Write a range's rows as partition `index` of `folder` (through a temporary name, so
    that a task Ray runs again, or one cut short, never leaves half a file under the name)."""
    path = os.path.join(folder, partition_name(index))
    temp = os.path.join(folder, f".{partition_name(index)}.{os.getpid()}.partial")
    _write_through(temp, path, lambda to: rows.write_parquet(to, row_group_size=ROW_GROUP))
    return path


def _write_through(temp: str, path: str, write: Callable[[str], object]) -> None:
    """`write` to `temp`, then renamed to `path` (a task cut short or run again never leaves
    half a file under the name); a failure is one error line naming the file and host."""
    try:
        write(temp)
        os.replace(temp, path)
    except OSError as error:
        raise InputError(f"cannot write {path} on {socket.gethostname()}: "
                         f"{error.strerror or error} (the output folder must be shared "
                         "storage every worker can write)") from None
    finally:
        if os.path.exists(temp):
            os.unlink(temp)


EXCHANGE = ".exchange"  # the output folder's subfolder of the groups' slices of each range


def _fragment_path(folder: str, group: int, index: int) -> str:
    return os.path.join(folder, EXCHANGE, f"g{group:05d}-r{index:05d}.arrow")


def write_fragment(folder: str, group: int, index: int, rows: pl.DataFrame) -> None:
    """A group's rows of range `index`, as an Arrow file (lz4) in `folder`'s exchange
    (through a temporary name: a task run again writes the same bytes again)."""
    os.makedirs(os.path.join(folder, EXCHANGE), exist_ok=True)
    path = _fragment_path(folder, group, index)
    _write_through(f"{path}.{os.getpid()}.partial", path,
                   lambda to: rows.write_ipc(to, compression="lz4"))


def read_fragments(folder: str, index: int, groups: Sequence[int]) -> list[pl.DataFrame]:
    """Range `index`'s rows written by `groups` (left in place: a merge Ray runs again reads
    them again; the driver removes the exchange at the end)."""
    return [pl.read_ipc(_fragment_path(folder, g, index)) for g in groups]


def merged_tally(parts: Iterable[Tally]) -> Tally:
    """The counts of every group as one `Tally` (each table's rows of every group: the
    diagnosis reduces them as it reduces one run's chunks)."""
    out = Tally()
    for part in parts:
        out.lines += part.lines
        for mine, theirs in ((out.evidence, part.evidence), (out.why, part.why),
                             (out.notes, part.notes)):
            for name, count in theirs.items():
                mine[name] = mine.get(name, 0) + count
        out.procs |= part.procs
        out.file_procs += part.file_procs
        out.people += part.people
        out.last += part.last
        out.progress += part.progress
    return out


@dataclass
class PartitionedAnalysis(Analysis):
    """An analysis whose timeline is a folder of parquet partitions (`partitions`, in
    timeline order: `order` runs on from one to the next). The diagnosis's lookups read the
    files again on the driver (`logs`: an AttributePart over every file)."""

    partitions: list[Path] = field(default_factory=list)
    detail_stored: bool = False

    def batches(self, columns: Sequence[str] | None = None) -> Iterator[pl.DataFrame]:
        wanted = list(TIMELINE_SCHEMA) if columns is None else list(columns)
        if not self.detail_stored and set(wanted) - set(TIMELINE_SCHEMA):
            raise InputError("the partitions hold the export's columns only: the detail "
                             "columns come with analyze(engine='ray') without an output folder")
        for path in self.partitions:
            frame = pl.read_parquet(path, columns=wanted)
            for start in range(0, frame.height, BATCH_ROWS):
                yield frame.slice(start, BATCH_ROWS)

    def rows_of(self, files: list[int]) -> pl.LazyFrame:
        return _rows_again(self.logs, files)

    def head(self, count: int) -> pl.DataFrame:
        return _first(self.batches(), count)

    def tail(self, count: int) -> pl.DataFrame:
        frames: list[pl.DataFrame] = []
        held = 0
        for path in reversed(self.partitions):
            frames.insert(0, pl.read_parquet(path, columns=list(TIMELINE_SCHEMA)))
            held += frames[0].height
            if held >= count:
                break
        return _first(iter(frames), held).tail(count)


def _first(batches: Iterator[pl.DataFrame], count: int) -> pl.DataFrame:
    taken: list[pl.DataFrame] = []
    held = 0
    for batch in batches:
        if held >= count:
            break
        taken.append(batch.head(count - held))
        held += taken[-1].height
    return pl.concat(taken) if taken else pl.DataFrame(schema=TIMELINE_SCHEMA)
