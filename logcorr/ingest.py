"""Paths -> sources -> physical lines.

`discover` turns the command-line paths into an ordered list of `Source`s (skipping, with a
warning and a `Skipped` entry, whatever cannot be read or whose first bytes name a format that
is not text: content decides, never the name). The bytes are read by the compiled core
(`logcorr._core`): gzip is recognised by its magic bytes and decoded; a damaged gzip keeps
every line that decoded before the damage. `read_lines` / `iter_line_chunks` turn sources
into rows of `LINES_SCHEMA` (undecodable bytes -> U+FFFD) without parsing them.

Line rules: a physical line ends at `\\n`; one `\\r` right before the `\\n` is removed (CRLF); a
final empty piece after a trailing `\\n` is not a line; a last line without `\\n` is kept whole
(a final lone `\\r` too); `\\r` inside a line and NUL bytes (runs of any length) are kept in the
text.

File names are bytes: `shown` writes one as text, a backslash as `\\\\` and each byte that is
not UTF-8 as `\\xHH`, so the name can be recovered exactly from what is shown.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from logcorr import _core
from logcorr.errors import InputError

# (polars is imported by the readers that make frames: finding the files needs none, and
# `analyze` starts reading before polars is loaded)
if TYPE_CHECKING:
    import polars as pl

CHUNK_BYTES = 64 * 1024 * 1024
SNIFF_BYTES = 8192
MAX_ROWS = 1 << 16  # lines a chunk holds at most (besides its bytes)

# First bytes of formats that are not text (a file is skipped for its content only). A gzip
# stream is decoded and its content judged the same way.
MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x7fELF", "ELF binary or core dump"),
    (b"PK\x03\x04", "zip archive (a PyTorch .pt/.pth checkpoint, .npz, wheel)"),
    (b"PK\x05\x06", "zip archive (empty)"),
    (b"\x80\x02", "Python pickle"), (b"\x80\x03", "Python pickle"),
    (b"\x80\x04", "Python pickle"), (b"\x80\x05", "Python pickle"),
    (b"\x89PNG\r\n\x1a\n", "PNG image"), (b"\xff\xd8\xff", "JPEG image"),
    (b"GIF87a", "GIF image"), (b"GIF89a", "GIF image"),
    (b"%PDF-", "PDF document"),
    (b"PAR1", "Parquet file"), (b"ARROW1", "Arrow file"),
    (b"SQLite format 3\x00", "SQLite database"),
    (b"\x93NUMPY", "NumPy array"), (b"\x89HDF\r\n\x1a\n", "HDF5 file"),
    (b"BZh", "bzip2 archive"), (b"\xfd7zXZ\x00", "xz archive"),
    (b"\x28\xb5\x2f\xfd", "zstd archive"), (b"7z\xbc\xaf\x27\x1c", "7z archive"),
    (b"\xca\xfe\xba\xbe", "Mach-O or Java class file"),
)


@dataclass(frozen=True)
class Source:
    """One input file: its index in sorted path order, where it is, and how to show it."""

    file_id: int
    path: Path
    display: str  # the name as given or found, `shown`


@dataclass(frozen=True)
class Skipped:
    """A file that was not read: how it is shown, its size in bytes (None if unknown), why."""

    display: str
    size: int | None
    reason: str

    def to_json(self) -> dict[str, object]:
        return {"file": self.display, "size": self.size, "reason": self.reason}


def shown(name: str | Path) -> str:
    """A file name as text: its UTF-8 characters, a backslash as `\\\\`, any other byte as
    `\\xHH` (reversible: read it back by undoing the two escapes).

    >>> shown(os.fsdecode(b"a\\\\b\\xff.log"))
    'a\\\\\\\\b\\\\xff.log'
    """
    raw = os.fsencode(name).replace(b"\\", b"\\\\")
    return raw.decode("utf-8", errors="backslashreplace")


# ---------------------------------------------------------------------------------------------
# discover


def discover(paths: Sequence[str | Path], skipped: list[Skipped] | None = None
             ) -> tuple[list[Source], list[str]]:
    """Expand files and directories (recursively, sorted) into sources; also return warnings.

    A path that does not exist raises `InputError`; unusable files are skipped with a warning
    (and listed in `skipped` when given).
    """
    found: list[tuple[Path, str]] = []
    warnings: list[str] = []
    lost: list[Skipped] = skipped if skipped is not None else []
    for raw in paths:
        root = Path(raw)
        if not root.exists() and not root.is_symlink():
            raise InputError(
                f"{shown(raw)}: no such file or directory; check the path "
                "(pass log files or folders that contain them)"
            )
        if root.is_dir():
            found.extend(_walk(root, warnings, lost))
        else:
            found.append((root, shown(raw)))
    found = _distinct(found, warnings)
    sources: list[Source] = []
    for path, display in sorted(found, key=lambda item: (item[1], str(item[0]))):
        problem = _unusable(path)
        if problem is not None:
            _skip(display, problem, path, warnings, lost)
            continue
        sources.append(Source(len(sources), path, display))
    return sources, warnings


def _skip(display: str, reason: str, path: Path | None, warnings: list[str],
          skipped: list[Skipped]) -> None:
    size: int | None = None
    if path is not None:
        with contextlib.suppress(OSError):
            size = path.stat().st_size if path.is_file() else None
    warnings.append(f"{display}: skipped: {reason}")
    skipped.append(Skipped(display, size, reason))


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
    return [(path, shown(path) if names[display] > 1 else display) for path, display in unique]


def _walk(root: Path, warnings: list[str], skipped: list[Skipped]) -> list[tuple[Path, str]]:
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
            _skip(_rel(folder, root), _reason(exc), None, warnings, skipped)
            continue
        if key in seen:
            _skip(_rel(folder, root), "symlink loop", None, warnings, skipped)
            continue
        seen.add(key)
        subdirs: list[Path] = []
        for entry in entries:
            path = Path(entry.path)
            try:
                is_dir = entry.is_dir()
            except OSError as exc:
                _skip(_rel(path, root), _reason(exc), None, warnings, skipped)
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
    return shown(path.relative_to(root).as_posix() if path != root else root.as_posix())


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
        head, _ = _core.sniff(os.fsencode(path), SNIFF_BYTES)  # (a damaged gzip: what decoded)
    except OSError as exc:
        return _reason(exc)
    return not_text(head)


def not_text(head: bytes) -> str | None:
    """The format the first bytes of a file name when it is not text, else None."""
    for magic, name in MAGIC:
        if head.startswith(magic):
            return f"binary file: {name} (first bytes {head[:len(magic)]!r})"
    # safetensors: a little-endian header length, then the JSON header
    if len(head) >= 10 and head[8:10] == b'{"' and 0 < int.from_bytes(head[:8], "little") < 1 << 32:
        return "binary file: safetensors (a JSON header behind its length)"
    if len(head) > 262 and head[257:262] == b"ustar":
        return "binary file: tar archive"
    return None


# ---------------------------------------------------------------------------------------------
# read


def read_lines(
    sources: Sequence[Source], chunk_bytes: int = CHUNK_BYTES
) -> tuple[pl.DataFrame, list[str]]:
    """All physical lines of `sources` as one `LINES_SCHEMA` frame, plus warnings."""
    import polars as pl

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
    """Yield `LINES_SCHEMA` frames of about `chunk_bytes` of text each, in order (small files
    gathered, a large file cut at line ends).

    Warnings (unreadable or corrupt files) are appended to `warnings` when given.
    """
    import polars as pl

    sink: list[str] = warnings if warnings is not None else []
    reader = _core.LineReader([(s.file_id, os.fsencode(s.path), s.display) for s in sources],
                              max(chunk_bytes, 1), MAX_ROWS)
    while (batch := reader.next_chunk()) is not None:
        frame = pl.DataFrame(batch)
        if frame.height:
            yield frame
    sink += reader.take_warnings()


def empty_lines() -> pl.DataFrame:
    """A frame with the `LINES_SCHEMA` columns and no rows."""
    import polars as pl

    from logcorr.model import LINES_SCHEMA

    return pl.DataFrame(schema=LINES_SCHEMA)
