"""Writing the timeline in machine formats, atomically, and reading the analyze options."""

from __future__ import annotations

import contextlib
import json
import math
import os
import secrets
import sys
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import datetime
from pathlib import Path
from typing import IO

import polars as pl
from polars.io.plugins import register_io_source

from logcorr import _core, cleanup
from logcorr.errors import CoreError, InputError
from logcorr.model import TIMELINE_SCHEMA

MACHINE_FORMATS = ("jsonl", "csv", "parquet")
_MAX_OFFSET_SECONDS = 1e9  # about 31 years; larger shifts overflow the time arithmetic
ROW_GROUP = 1 << 16  # parquet rows per row group
JSON_AHEAD = 2  # batches made into JSON lines ahead of the one being written


def parse_clock_offsets(items: list[str]) -> dict[str, float]:
    """`["node-1=2.5", "node-2=-1"]` -> {"node-1": 2.5, "node-2": -1.0}.

    >>> parse_clock_offsets(["h1=2.5"])
    {'h1': 2.5}
    """
    offsets: dict[str, float] = {}
    for item in items:
        host, sep, seconds = item.rpartition("=")
        try:
            offsets[host] = float(seconds)
        except ValueError:
            host = ""
        if host and not (math.isfinite(offsets[host])
                         and abs(offsets[host]) <= _MAX_OFFSET_SECONDS):
            host = ""
        if not sep or not host:
            raise InputError(f"cannot read --clock-offset {item!r}: write HOST=SECONDS "
                             "(a finite number of seconds, at most 1e9 either way), "
                             "e.g. --clock-offset node-1=-2.5")
    return offsets


def parse_time(text: str, option: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text.replace(" ", "T"))
    except ValueError:
        raise InputError(f"cannot read {option} {text!r}: write an ISO time such as "
                         "2026-11-29T10:00:00") from None
    if moment.tzinfo is not None:
        raise InputError(f"{option} {text!r} has a time zone, but log times are local times "
                         "without one: write the time as the logs print it, e.g. "
                         "2026-11-29T10:00:00")
    return moment


def time_condition(since: str | None, until: str | None) -> pl.Expr:
    """Rows whose own time is inside [since, until]; rows without a time do not match."""
    ts = pl.col("ts").str.to_datetime(strict=False, time_unit="us")
    condition = ts.is_not_null()
    if since is not None:
        condition &= ts >= parse_time(since, "--since")
    if until is not None:
        condition &= ts <= parse_time(until, "--until")
    return condition


def write_json(document: object, output: str) -> None:
    """Write a JSON document (sorted keys, stable) atomically to `output`."""
    text = json.dumps(document, indent=1, sort_keys=True, default=str) + "\n"
    _atomic(output, lambda stream: stream.write(text.encode()))


def write_text(text: str, output: str) -> None:
    """Write a rendered text view atomically to `output`."""
    _atomic(output, lambda stream: stream.write(text.encode("utf-8")))


def write_machine(batches: Iterable[pl.DataFrame], fmt: str, output: str | None) -> None:
    """Write timeline batches (TIMELINE_SCHEMA) as jsonl/csv/parquet to `output`, a batch at
    a time (atomically: a temporary file renamed at the end, so an interrupted run leaves no
    partial file under the final name) or to stdout."""
    if output is None:
        if fmt == "parquet":
            raise InputError("parquet output needs a file: add -o OUT.parquet")
        _write_text_batches(batches, fmt, sys.stdout.buffer)
        sys.stdout.buffer.flush()
        return
    _atomic(output, None, lambda path: _write(batches, fmt, path))


def _atomic(output: str, write: Callable[[IO[bytes]], object] | None,
            write_path: Callable[[str], object] | None = None) -> None:
    """Write through a temporary file renamed into place at the end (a device or a pipe,
    `-o /dev/null`, is written in place).

    The temporary name is chosen before the file is created, so a Ctrl-C at any point
    (even right after creation) finds it in `finally` and removes it. Mode 0o666 lets the
    umask decide the permissions, as for any new file.
    """
    target = Path(output)
    folder = target.parent if str(target.parent) else Path(".")
    if not folder.is_dir():
        raise InputError(f"cannot write {output}: folder {folder} does not exist")
    if target.is_dir():
        raise InputError(f"cannot write {output}: it is a folder; give a file name")
    if target.exists() and not target.is_file():
        # (a device or a pipe, `-o /dev/null`: written in place; renaming a file onto it
        # would replace /dev/null itself for a user allowed to)
        try:
            if write is not None:
                with open(target, "wb") as stream:
                    write(stream)
            if write_path is not None:
                write_path(str(target))
        except OSError as error:
            raise InputError(f"cannot write {output}: {error.strerror}") from None
        return
    temp = str(folder / f".{target.name}.{secrets.token_hex(6)}.partial")
    cleanup.register(temp)
    try:
        handle = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        with os.fdopen(handle, "wb") as stream:
            if write is not None:
                write(stream)
        if write_path is not None:
            write_path(temp)
        os.replace(temp, target)
    except OSError as error:
        raise InputError(f"cannot write {output}: {error.strerror}") from None
    finally:
        try:
            _discard(temp)
        except KeyboardInterrupt:  # one Ctrl-C during polars work can raise twice
            _discard(temp)
            raise
        finally:
            cleanup.unregister(temp)


def _discard(temp: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(temp)


def _write(batches: Iterable[pl.DataFrame], fmt: str, path: str) -> None:
    """To a file: parquet and csv through polars' streaming sinks (they serialise on all
    cores), jsonl by the core (`json_lines`)."""
    if fmt == "jsonl":
        with open(path, "wb") as stream:
            json_lines(batches, stream)
        return
    source = _source(batches)
    if fmt == "parquet":
        # row groups of 64k rows (polars defaults to 512k): the encoder buffers a row group,
        # and smaller ones keep the peak of a large write about 40 MB lower
        source.sink_parquet(path, row_group_size=ROW_GROUP)
    else:
        source.sink_csv(path)


def json_lines(batches: Iterable[pl.DataFrame], stream: IO[bytes]) -> None:
    """Write the batches as JSON lines: the bytes polars' `write_ndjson` writes, made by the
    core (about a third of polars' cost) on a thread of their own while the next batches
    are made (the core releases the GIL): straight to the stream's file descriptor, or as
    bytes to a stream that has none. At most JSON_AHEAD batches wait."""
    try:
        fd: int | None = stream.fileno()
    except (AttributeError, OSError, ValueError):  # (io.UnsupportedOperation: an OSError)
        fd = None
    stream.flush()
    with ThreadPoolExecutor(1, thread_name_prefix="logcorr-json") as pool:
        made: deque[Future[object]] = deque()

        def written(future: Future[object]) -> None:
            try:
                done = future.result()
            except RuntimeError as error:  # (a panic the core caught: a bug)
                raise CoreError(f"{error}; please report it") from None
            if isinstance(done, bytes):
                stream.write(done)

        try:
            for batch in batches:
                made.append(pool.submit(_core.write_json_lines, batch, fd) if fd is not None
                            else pool.submit(_core.json_lines_bytes, batch))
                while len(made) > JSON_AHEAD or (made and made[0].done()):
                    written(made.popleft())
            while made:
                written(made.popleft())
        finally:
            for waiting in made:
                waiting.cancel()


def _write_text_batches(batches: Iterable[pl.DataFrame], fmt: str, stream: IO[bytes]) -> None:
    if fmt == "jsonl":
        json_lines(batches, stream)
        return
    header = True
    for batch in batches:
        batch.write_csv(stream, include_header=header)
        header = False
    if header:  # no rows: the header alone
        pl.DataFrame(schema=TIMELINE_SCHEMA).write_csv(stream)


def _source(batches: Iterable[pl.DataFrame]) -> pl.LazyFrame:
    """The batches as a lazy frame that polars' streaming sinks read (a Python source)."""
    def source(with_columns: list[str] | None, predicate: pl.Expr | None, n_rows: int | None,
               batch_size: int | None) -> Iterator[pl.DataFrame]:
        yield from batches

    return register_io_source(source, schema=TIMELINE_SCHEMA)
