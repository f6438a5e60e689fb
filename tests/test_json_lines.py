"""The jsonl timeline is written by the core (`_core.write_json_lines`, to a file
descriptor; `_core.json_lines_bytes` for a stream without one): the same bytes polars'
`write_ndjson` writes, for any text and any number the timeline's columns can hold."""

from __future__ import annotations

import io
import os
import tempfile

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logcorr import _core
from logcorr.model import TIMELINE_SCHEMA
from logcorr.output import json_lines

# every code point but surrogates (not UTF-8): controls, quotes, backslashes, DEL, U+2028,
# wide and astral characters
TEXT = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=40)
BOUNDS = {pl.UInt16: (0, 2**16 - 1), pl.UInt32: (0, 2**32 - 1), pl.UInt64: (0, 2**64 - 1),
          pl.Int32: (-2**31, 2**31 - 1), pl.Int64: (-2**63, 2**63 - 1)}


def core_json(frame: pl.DataFrame) -> bytes:
    """Both ways the core writes JSON lines, which must agree."""
    with tempfile.TemporaryFile() as stream:
        written = _core.write_json_lines(frame, stream.fileno())
        stream.seek(0)
        to_file = stream.read()
    assert written == len(to_file)
    assert _core.json_lines_bytes(frame) == to_file
    return to_file


def polars_json(frame: pl.DataFrame) -> bytes:
    out = io.BytesIO()
    frame.write_ndjson(out)
    return out.getvalue()


@st.composite
def timelines(draw: st.DrawFn) -> pl.DataFrame:
    """A frame with the timeline's columns and types: any values, nulls anywhere."""
    height = draw(st.integers(0, 6))
    columns = {}
    for name, dtype in TIMELINE_SCHEMA.items():
        if dtype == pl.String:
            values = st.none() | TEXT
        else:
            low, high = BOUNDS[type(dtype)]
            values = st.none() | st.sampled_from([low, high, 0]) | st.integers(low, high)
        columns[name] = pl.Series(name, draw(st.lists(values, min_size=height,
                                                     max_size=height)), dtype=dtype)
    return pl.DataFrame(columns)


@settings(max_examples=150, deadline=None)
@given(timelines())
def test_a_timeline_is_written_as_polars_writes_it(frame: pl.DataFrame) -> None:
    assert core_json(frame) == polars_json(frame)


@settings(max_examples=60, deadline=None)
@given(st.lists(timelines(), min_size=1, max_size=4), st.integers(0, 5), st.integers(0, 8))
def test_frames_of_several_chunks_and_slices_are_written_whole(
        parts: list[pl.DataFrame], offset: int, length: int) -> None:
    frame = pl.concat(parts, rechunk=False).slice(offset, length)
    assert frame.n_chunks() >= 1
    assert core_json(frame) == polars_json(frame)


def test_the_text_of_real_lines_is_written_as_polars_writes_it() -> None:
    lines = [
        "[2026-11-29 10:00:03 DP0 TP0 EP0] Init torch distributed begin.",
        "gpu-node-0:3416006:3416006 [0] NCCL INFO comm 0xe3ec2094cac rank 0 nranks 64",
        '\x1b[31m[rank3]:[E1129 10:00:05.000000000 ProcessGroupNCCL.cpp:616] "quoted"\x1b[0m',
        "  File \"/sgl/python/sglang/srt/managers/scheduler.py\", line 1012, in event_loop",
        "\tC:\\path\\with\\backslashes\r", "", "\ufffd\ufffd bad bytes \x00 NUL \x7f DEL",
        "long " * 100,
    ]
    frame = pl.DataFrame({"file": ["node0.log"] * len(lines), "text": lines,
                          "line": pl.Series(range(1, len(lines) + 1), dtype=pl.UInt32)})
    assert core_json(frame) == polars_json(frame)


def test_batches_are_written_in_their_order_to_a_file_or_a_stream() -> None:
    frame = pl.DataFrame({"line": pl.Series(range(50_000), dtype=pl.UInt32),
                          "text": [f"line {i}" for i in range(50_000)]})
    batches = [frame.slice(start, 1000) for start in range(0, frame.height, 1000)]
    with tempfile.TemporaryFile() as stream:
        stream.write(b"before\n")  # (buffered by Python: flushed before the core writes)
        json_lines(batches, stream)
        stream.seek(0)
        assert stream.read() == b"before\n" + polars_json(frame)
    out = io.BytesIO()
    json_lines(batches, out)
    assert out.getvalue() == polars_json(frame)


def test_a_column_of_another_type_is_refused() -> None:
    with pytest.raises(ValueError, match="no JSON writer for a column of type"):
        _core.json_lines_bytes(pl.DataFrame({"x": [1.5]}))
    with tempfile.TemporaryFile() as stream, pytest.raises(ValueError):
        _core.write_json_lines(pl.DataFrame({"x": [1.5]}), stream.fileno())


def test_a_pipe_closed_by_its_reader_is_a_broken_pipe() -> None:
    read, write = os.pipe()
    os.close(read)
    try:
        with pytest.raises(BrokenPipeError):
            _core.write_json_lines(pl.DataFrame({"x": [1]}), write)
    finally:
        os.close(write)


def test_rows_across_the_core_s_blocks_are_written_whole() -> None:
    """The core writes a few hundred rows at a time, column by column: a frame of thousands
    of rows, with nulls in every column at places that fall on and around the blocks'
    edges, is written as polars writes it."""
    height = 2_600
    columns = {}
    for index, (name, dtype) in enumerate(TIMELINE_SCHEMA.items()):
        values = [None if (row * 7 + index) % (3 + index % 5) == 0 else row
                  for row in range(height)]
        if dtype == pl.String:
            columns[name] = pl.Series(name, [None if v is None else f"{name} {v} \"é\"\n"
                                             * (1 + v % 3) for v in values], dtype=dtype)
        else:
            columns[name] = pl.Series(name, values, dtype=dtype)
    frame = pl.DataFrame(columns)
    assert core_json(frame) == polars_json(frame)
    assert core_json(frame.slice(511, 1030)) == polars_json(frame.slice(511, 1030))
