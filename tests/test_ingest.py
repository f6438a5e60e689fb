"""Tests for logcorr.ingest: discovery, decoding, line splitting, chunking."""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import polars as pl
import pytest

from logcorr.errors import InputError
from logcorr.ingest import Skipped, Source, discover, iter_line_chunks, read_lines
from logcorr.model import LINES_SCHEMA


def _lines(tmp_path: Path, data: bytes, name: str = "a.log", **kw: int) -> list[str]:
    path = tmp_path / name
    path.write_bytes(data)
    sources, _ = discover([path])
    frame, _ = read_lines(sources, **kw)
    return frame.get_column("text").to_list()


class TestReadLines:
    def test_schema(self, tmp_path: Path) -> None:
        """The frame has exactly the LINES_SCHEMA columns and dtypes."""
        (tmp_path / "a.log").write_bytes(b"x\ny\n")
        frame, _ = read_lines(discover([tmp_path])[0])
        assert dict(frame.schema) == LINES_SCHEMA
        assert frame.get_column("line").to_list() == [1, 2]

    def test_crlf(self, tmp_path: Path) -> None:
        """One trailing CR is removed; a CR inside a line stays."""
        assert _lines(tmp_path, b"a\r\nb\rc\r\n\r\nd\r\r\n") == ["a", "b\rc", "", "d\r"]

    def test_no_trailing_newline(self, tmp_path: Path) -> None:
        """The last line without a newline is kept; a trailing newline adds no empty line."""
        assert _lines(tmp_path, b"a\nlast") == ["a", "last"]
        assert _lines(tmp_path, b"a\n\n", name="b.log") == ["a", ""]

    def test_empty_file(self, tmp_path: Path) -> None:
        """An empty file has zero lines, a lone newline one empty line."""
        assert _lines(tmp_path, b"") == []
        assert _lines(tmp_path, b"\n", name="b.log") == [""]

    def test_invalid_utf8_and_nul(self, tmp_path: Path) -> None:
        """Undecodable bytes become U+FFFD; NUL bytes are kept."""
        assert _lines(tmp_path, b"\x00\x00[15:58:39 TP0] x\n\xff\xfeok\n") == [
            "\x00\x00[15:58:39 TP0] x",
            "\ufffd\ufffdok",
        ]

    def test_unit_separator_kept(self, tmp_path: Path) -> None:
        """A 0x1f byte (the CSV path's separator) does not split or lose text."""
        assert _lines(tmp_path, b"a\x1fb\nc\n") == ["a\x1fb", "c"]

    def test_gzip(self, tmp_path: Path) -> None:
        """.gz files are read transparently."""
        assert _lines(tmp_path, gzip.compress(b"g1\ng2\n"), name="x.log.gz") == ["g1", "g2"]

    def test_corrupt_gzip_keeps_prefix(self, tmp_path: Path) -> None:
        """A truncated gzip keeps the lines decoded before the damage and warns."""
        data = gzip.compress(b"".join(b"line %d\n" % i for i in range(100000)))
        path = tmp_path / "t.gz"
        path.write_bytes(data[: len(data) // 2])
        frame, warnings = read_lines(discover([path])[0])
        texts = frame.get_column("text").to_list()
        assert len(texts) > 1000 and texts[:2] == ["line 0", "line 1"]
        assert any("corrupt gzip" in w for w in warnings)

    @pytest.mark.parametrize("chunk", [1, 3, 7, 64])
    def test_chunk_boundaries(self, tmp_path: Path, chunk: int) -> None:
        """Small chunks give the same lines and line numbers as one chunk."""
        data = b"alpha\r\nbeta\n\ngamma \xff\nd\x00e\nlast"
        path = tmp_path / "c.log"
        path.write_bytes(data)
        sources = discover([path])[0]
        whole, _ = read_lines(sources)
        chunked, _ = read_lines(sources, chunk_bytes=chunk)
        assert chunked.equals(whole)
        assert whole.get_column("line").to_list() == [1, 2, 3, 4, 5, 6]

    def test_iterator_streams(self, tmp_path: Path) -> None:
        """iter_line_chunks yields several frames whose concatenation is read_lines."""
        (tmp_path / "a.log").write_bytes(b"".join(b"line %d\n" % i for i in range(1000)))
        (tmp_path / "b.log").write_bytes(b"x\ny")
        sources = discover([tmp_path])[0]
        frames = list(iter_line_chunks(sources, chunk_bytes=500))
        assert len(frames) > 3
        assert pl.concat(frames).equals(read_lines(sources)[0])


class TestDiscover:
    def test_missing_path(self, tmp_path: Path) -> None:
        """A path that does not exist is an InputError saying how to fix it."""
        with pytest.raises(InputError, match="no such file"):
            discover([tmp_path / "nope"])

    def test_directory_display_and_order(self, tmp_path: Path) -> None:
        """Directories are walked recursively, sorted; display is relative and POSIX."""
        (tmp_path / "b").mkdir()
        (tmp_path / "b" / "z.log").write_text("z\n")
        (tmp_path / "a.log").write_text("a\n")
        (tmp_path / "b" / "c.log").write_text("c\n")
        sources, warnings = discover([tmp_path])
        assert [s.display for s in sources] == ["a.log", "b/c.log", "b/z.log"]
        assert [s.file_id for s in sources] == [0, 1, 2]
        assert warnings == []

    def test_file_display_as_given(self, tmp_path: Path) -> None:
        """A file argument is displayed as given."""
        (tmp_path / "a.log").write_text("a\n")
        sources, _ = discover([str(tmp_path / "a.log")])
        assert sources == [Source(0, tmp_path / "a.log", str(tmp_path / "a.log"))]

    def test_binary_skipped(self, tmp_path: Path) -> None:
        """Files whose first bytes name a format that is not text are skipped with one
        warning each and listed with their size; a mostly-NUL file is text (a hole)."""
        (tmp_path / "model.pt").write_bytes(b"PK\x03\x04")
        (tmp_path / "core").write_bytes(b"\x7fELF" + b"\x00" * 4000)
        (tmp_path / "hole.log").write_bytes(b"\x00" * 4000 + b"abc")
        (tmp_path / "ok.log").write_bytes(b"\x00\x00\x00[15:58:39 TP0] fine\n" * 10)
        skipped: list[Skipped] = []
        sources, warnings = discover([tmp_path], skipped)
        assert [s.display for s in sources] == ["hole.log", "ok.log"]
        assert len(warnings) == 2
        assert [(s.display, s.size) for s in skipped] == [("core", 4004), ("model.pt", 4)]
        assert "ELF" in skipped[0].reason and "zip" in skipped[1].reason

    def test_symlink_loop(self, tmp_path: Path) -> None:
        """A directory symlink loop is skipped with a warning, not followed forever."""
        (tmp_path / "d").mkdir()
        (tmp_path / "d" / "x.log").write_text("x\n")
        os.symlink(tmp_path, tmp_path / "d" / "loop")
        os.symlink(tmp_path / "self", tmp_path / "self")
        sources, warnings = discover([tmp_path])
        assert [s.display for s in sources] == ["d/x.log"]
        assert any("loop" in w for w in warnings)

    @pytest.mark.skipif(os.geteuid() == 0, reason="root can read anything")
    def test_unreadable(self, tmp_path: Path) -> None:
        """An unreadable file is skipped with a warning."""
        path = tmp_path / "secret.log"
        path.write_text("x\n")
        path.chmod(0)
        sources, warnings = discover([tmp_path])
        assert sources == [] and "permission" in warnings[0]


def test_same_name_in_two_folders_and_a_file_named_twice(tmp_path: Path) -> None:
    """Two folders with node0.log stay apart; a file given twice is read once."""
    from logcorr.ingest import discover

    for host in ("host1", "host2"):
        (tmp_path / host).mkdir()
        (tmp_path / host / "node0.log").write_text(f"[2026-11-29 10:00:00] {host}\n")
    sources, warnings = discover([tmp_path / "host1", tmp_path / "host2",
                                  tmp_path / "host1" / "node0.log"])
    displays = sorted(s.display for s in sources)
    assert len(sources) == 2 and len(set(displays)) == 2
    assert all(d.endswith("node0.log") and ("host1" in d or "host2" in d) for d in displays)
    assert warnings == [f"{tmp_path / 'host1' / 'node0.log'}: skipped: the same file as node0.log"]
