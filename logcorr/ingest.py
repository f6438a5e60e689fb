"""Paths -> sources -> physical lines.

`discover` turns the command-line paths into an ordered list of `Source`s (skipping, with a
warning, whatever is not a readable text log). `read_lines` / `iter_line_chunks` turn sources into
rows of `LINES_SCHEMA`: bytes are decoded once per chunk (UTF-8, undecodable bytes -> U+FFFD) and
split into lines inside polars, so no Python code runs per line.

Line rules: a physical line ends at `\\n`; one trailing `\\r` is removed (CRLF); a final empty
piece after a trailing `\\n` is not a line; a last line without `\\n` is kept; `\\r` inside a line
and NUL bytes are kept in the text.
"""

from __future__ import annotations

import errno
import io
import os
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import polars as pl

from logcorr.errors import InputError
from logcorr.model import LINES_SCHEMA

CHUNK_BYTES = 64 * 1024 * 1024
SNIFF_BYTES = 8192
_READ_PIECE = 1024 * 1024
_NUL_RATIO = 0.30  # a log may hold a few NULs (`^@^@^@[15:58:39 TP0] …`), a binary many
_CONTROL_RATIO = 0.30
_GZIP_MAGIC = b"\x1f\x8b"
_FIELD_SEP = b"\x1f"  # never in a block read by the CSV path
_BOM = b"\xef\xbb\xbf"  # the CSV reader would drop it; the text keeps it

BINARY_SUFFIXES: frozenset[str] = frozenset(
    {
        ".pt", ".pth", ".pkl", ".pickle", ".bin", ".so", ".whl", ".zip", ".tar", ".tgz",
        ".bz2", ".xz", ".zst", ".7z", ".npy", ".npz", ".safetensors", ".png", ".jpg", ".jpeg",
        ".gif", ".pdf", ".o", ".a", ".pyc", ".core", ".dmp", ".mdmp", ".onnx", ".h5", ".pb",
        ".sqlite", ".db", ".parquet", ".arrow", ".ckpt", ".exe", ".dll", ".ico", ".woff",
    }
)  # fmt: skip
# Text control bytes that logs legitimately carry: \t \n \v \f \r ESC, and backspace.
_TEXT_CONTROLS = frozenset({8, 9, 10, 11, 12, 13, 27})
_BINARY_BYTES = bytes(b for b in range(32) if b not in _TEXT_CONTROLS and b != 0) + b"\x7f"


@dataclass(frozen=True)
class Source:
    """One input file: its index in sorted path order, where it is, and how to show it."""

    file_id: int
    path: Path
    display: str


# ---------------------------------------------------------------------------------------------
# discover


def discover(paths: Sequence[str | Path]) -> tuple[list[Source], list[str]]:
    """Expand files and directories (recursively, sorted) into sources; also return warnings.

    A path that does not exist raises `InputError`; unusable files are skipped with a warning.
    """
    found: list[tuple[Path, str]] = []
    warnings: list[str] = []
    for raw in paths:
        root = Path(raw)
        if not root.exists() and not root.is_symlink():
            raise InputError(
                f"{raw}: no such file or directory; check the path "
                "(pass log files or folders that contain them)"
            )
        if root.is_dir():
            found.extend(_walk(root, warnings))
        else:
            found.append((root, str(raw)))
    found = _distinct(found, warnings)
    sources: list[Source] = []
    for path, display in sorted(found, key=lambda item: (item[1], str(item[0]))):
        problem = _unusable(path)
        if problem is not None:
            warnings.append(f"{display}: skipped: {problem}")
            continue
        sources.append(Source(len(sources), path, display))
    return sources, warnings


def _distinct(found: list[tuple[Path, str]], warnings: list[str]) -> list[tuple[Path, str]]:
    """One entry per file (a file named twice is read once), and one file per display name:
    two folders holding `node0.log` are told apart by the path each was found under."""
    seen: dict[str, str] = {}
    unique: list[tuple[Path, str]] = []
    for path, display in found:
        real = os.path.realpath(path)
        if real in seen:
            if seen[real] != display:
                warnings.append(f"{display}: skipped: the same file as {seen[real]}")
            continue
        seen[real] = display
        unique.append((path, display))
    names: dict[str, int] = {}
    for _, display in unique:
        names[display] = names.get(display, 0) + 1
    return [(path, str(path) if names[display] > 1 else display) for path, display in unique]


def _walk(root: Path, warnings: list[str]) -> list[tuple[Path, str]]:
    """Files under `root` in sorted relative-path order, following symlinks but not loops."""
    out: list[tuple[Path, str]] = []
    seen: set[tuple[int, int]] = set()
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            key = _inode(folder)
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            warnings.append(f"{_rel(folder, root)}: skipped: {_reason(exc)}")
            continue
        if key in seen:
            warnings.append(f"{_rel(folder, root)}: skipped: symlink loop")
            continue
        seen.add(key)
        subdirs: list[Path] = []
        for entry in entries:
            path = Path(entry.path)
            try:
                is_dir = entry.is_dir()
            except OSError as exc:
                warnings.append(f"{_rel(path, root)}: skipped: {_reason(exc)}")
                continue
            if is_dir:
                subdirs.append(path)
            else:
                out.append((path, _rel(path, root)))
        stack.extend(reversed(subdirs))
    out.sort(key=lambda item: item[1])
    return out


def _inode(path: Path) -> tuple[int, int]:
    st = path.stat()
    return (st.st_dev, st.st_ino)


def _rel(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix() if path != root else root.as_posix()


def _reason(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "symlink loop"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied (make it readable, e.g. chmod a+r)"
    return exc.strerror or str(exc)


def _unusable(path: Path) -> str | None:
    """Why `path` cannot be read as a text log, or None if it can."""
    try:
        if not path.exists():
            return "broken symlink or symlink loop"
        if not path.is_file():
            return "not a regular file"
        if path.suffix.lower() in BINARY_SUFFIXES:
            return f"binary file ({path.suffix})"
        head = _sniff(path)
    except OSError as exc:
        return _reason(exc)
    except GzipCorrupt:
        return None  # corrupt gzip: read_lines keeps what decodes and warns
    if _looks_binary(head):
        return "binary content"
    return None


def _sniff(path: Path) -> bytes:
    head = b""
    for piece in _raw_pieces(path, SNIFF_BYTES):
        head += piece
        if len(head) >= SNIFF_BYTES:
            break
    return head[:SNIFF_BYTES]


def _looks_binary(head: bytes) -> bool:
    """True when the first bytes are mostly NULs or non-text control bytes."""
    if not head:
        return False
    nuls = head.count(0)
    controls = len(head) - len(head.translate(None, _BINARY_BYTES))
    if nuls / len(head) > _NUL_RATIO or (nuls + controls) / len(head) > _CONTROL_RATIO:
        return True
    decoded = head.decode("utf-8", errors="replace")
    return decoded.count("\ufffd") / len(decoded) > _CONTROL_RATIO


def _raw_pieces(path: Path, size: int) -> Iterator[bytes]:
    """The (decompressed) bytes of `path` in pieces of about `size` bytes."""
    with path.open("rb") as handle:
        if handle.read(2) == _GZIP_MAGIC or path.suffix.lower() == ".gz":
            handle.seek(0)
            yield from _gunzip(handle, size)
            return
        handle.seek(0)
        while piece := handle.read(size):
            yield piece


def _gunzip(handle: BinaryIO, size: int) -> Iterator[bytes]:
    """Decompress all gzip members; raises `GzipCorrupt` after yielding what decoded."""
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    fed = False  # the current member has received input
    while compressed := handle.read(min(size, _READ_PIECE)):
        while compressed:
            fed = True
            try:
                piece = inflater.decompress(compressed)
            except zlib.error as exc:
                raise GzipCorrupt(str(exc)) from None
            if piece:
                yield piece
            if not inflater.eof:
                break
            compressed, fed = inflater.unused_data, False
            inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    if fed and not inflater.eof:
        if tail := inflater.flush():
            yield tail
        raise GzipCorrupt("compressed data ends before the end-of-stream marker")


class GzipCorrupt(Exception):
    """A gzip stream stopped decoding (internal; turned into a warning)."""


# ---------------------------------------------------------------------------------------------
# read


def read_lines(
    sources: Sequence[Source], chunk_bytes: int = CHUNK_BYTES
) -> tuple[pl.DataFrame, list[str]]:
    """All physical lines of `sources` as one `LINES_SCHEMA` frame, plus warnings."""
    warnings: list[str] = []
    frames = list(iter_line_chunks(sources, chunk_bytes, warnings))
    if not frames:
        return empty_lines(), warnings
    return pl.concat(frames, rechunk=False), warnings


def iter_line_chunks(
    sources: Iterable[Source],
    chunk_bytes: int = CHUNK_BYTES,
    warnings: list[str] | None = None,
) -> Iterator[pl.DataFrame]:
    """Yield `LINES_SCHEMA` frames of at most about `chunk_bytes` of text each, in order.

    Warnings (unreadable or corrupt files) are appended to `warnings` when given.
    """
    sink: list[str] = warnings if warnings is not None else []
    for source in sources:
        next_line = 1
        for block in _blocks(source, max(chunk_bytes, 1), sink):
            frame = _lines_frame(block, source.file_id, next_line)
            next_line += frame.height
            if frame.height:
                yield frame


def _blocks(source: Source, chunk_bytes: int, warnings: list[str]) -> Iterator[bytes]:
    """Raw byte blocks of one file, each ending at a newline (except possibly the last)."""
    carry = b""
    for piece in _pieces(source, chunk_bytes, warnings):
        carry += piece
        if len(carry) < chunk_bytes:
            continue
        cut = carry.rfind(b"\n") + 1
        if cut > 0:
            yield carry[:cut]
            carry = carry[cut:]
    if carry:
        yield carry


def _pieces(source: Source, size: int, warnings: list[str]) -> Iterator[bytes]:
    """The file's bytes in pieces; a corrupt gzip stops with a warning, keeping what decoded."""
    try:
        yield from _raw_pieces(source.path, size)
    except GzipCorrupt as exc:
        warnings.append(
            f"{source.display}: truncated or corrupt gzip ({exc}); kept the lines before it"
        )
    except OSError as exc:
        warnings.append(f"{source.display}: read failed: {_reason(exc)}")


def _lines_frame(block: bytes, file_id: int, first_line: int) -> pl.DataFrame:
    """Split one block (ending at a newline or at end of file) into numbered lines."""
    if not block:
        return empty_lines()
    lines = _split_lines(block)
    return pl.DataFrame(
        {
            "file_id": pl.repeat(file_id, len(lines), dtype=pl.UInt32, eager=True),
            "line": pl.int_range(
                first_line, first_line + len(lines), dtype=pl.UInt32, eager=True
            ),
            "text": lines,
        }
    )


def _split_lines(block: bytes) -> pl.Series:
    """Decode (lossy UTF-8) and split on `\\n`, removing one `\\r` before each `\\n`.

    Blocks without `\\r`, the unit separator or a leading BOM go through polars'
    multi-threaded CSV reader (one column, no quoting); the others through one `str.split`
    on the decoded text.
    """
    if _FIELD_SEP not in block and b"\r" not in block and not block.startswith(_BOM):
        frame = pl.read_csv(
            io.BytesIO(block),
            has_header=False,
            separator=_FIELD_SEP.decode(),
            quote_char=None,
            comment_prefix=None,
            new_columns=["text"],
            schema={"text": pl.String},
            encoding="utf8-lossy",
            raise_if_empty=False,
        )
        return frame.get_column("text").fill_null("")
    text = block.decode("utf-8", errors="replace")
    text = text.removesuffix("\n")
    lines = pl.Series("text", [text], dtype=pl.String).str.split("\n").explode()
    return lines.str.strip_suffix("\r")


def empty_lines() -> pl.DataFrame:
    """A frame with the `LINES_SCHEMA` columns and no rows."""
    return pl.DataFrame(schema=LINES_SCHEMA)
