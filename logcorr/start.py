"""The start of an analysis, which needs neither polars nor rich: the launch config checked
and its topology built, the files found, and pass 1 started on the core's workers.

`analyze` begins here. The command line begins here too, before it imports the modules the
rest of the analysis needs (about 0.3 s of one core, mostly polars): the core reads and
parses the files on the other core meanwhile, and `analyze` goes on with the pass already
under way (`Started`)."""

from __future__ import annotations

import atexit
import os
import secrets
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from logcorr import _core, cleanup
from logcorr.config import LaunchConfig, load_config
from logcorr.errors import InputError
from logcorr.ingest import MAX_ROWS, Skipped, Source, discover
from logcorr.topology import Topology, build_topology

# Bytes of lines in a chunk (and at most `ingest.MAX_ROWS` lines): each chunk costs Python a
# few sorts and stores besides its lines, and each of the core's workers holds one or two.
CHUNK_BYTES = 12 << 20
# Bytes of pass 1's parse (30 to 50 a line) kept in memory for pass 2, which takes each
# chunk's parse from there instead of parsing it again (the same columns either way); the
# rest is written to a folder under $TMPDIR and read back. 0: every chunk parsed again.
KEEP_PARSED = 64 << 20

Given = tuple[Topology, str]  # --config's topology, and where it came from


@dataclass
class Started:
    """An analysis whose pass 1 is under way: the topology given, the files and what finding
    them said, their bytes, and the core's set of files (`_core.LogSet`) reading them."""

    given: Given | None
    sources: list[Source]
    warnings: list[str]
    skipped: list[Skipped]
    total: int
    logs: Any


def given_topology(config: str | Path | LaunchConfig | None, version: str | None,
                   validate: bool) -> Given | None:
    """The topology of --config and where it came from; a bad config (or one past the
    sizes logcorr builds) is an input error, raised before anything else is read or built."""
    if config is None:
        return None
    launch = config if isinstance(config, LaunchConfig) else load_config(
        config, sglang_version=version, validate=validate)
    source = launch.source if isinstance(config, LaunchConfig) else f"--config {config}"
    return build_topology(launch, validate=validate), source


def start_reading(paths: Sequence[str | Path], given: Given | None, chunk_bytes: int | None,
                  threads: int | None) -> Started:
    """The files under `paths` found, and pass 1 started over them."""
    skipped: list[Skipped] = []
    sources, warnings = discover(paths, skipped)
    total = sum(_size(s) for s in sources)
    chunk = chunk_bytes if chunk_bytes is not None else CHUNK_BYTES
    # (the parse past KEEP_PARSED goes to a private folder under $TMPDIR, removed as the
    # spill folder is: at the end, or when the run is ended from outside)
    folder = os.path.join(tempfile.gettempdir(), f"logcorr-parsed-{secrets.token_hex(8)}")
    cleanup.register(folder)
    logs = _core.LogSet([(s.file_id, os.fsencode(s.path), s.display) for s in sources],
                        max(1, chunk), MAX_ROWS, threads or thread_count(), KEEP_PARSED,
                        folder if KEEP_PARSED else None)
    atexit.register(_remove_folder, folder)  # (the core removes it when the set is dropped)
    return Started(given, sources, warnings, skipped, total, logs)


def _remove_folder(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)
    cleanup.unregister(path)


def thread_count() -> int:
    """The core's workers: LOGCORR_THREADS when set (a whole number, at least 1), else one per
    core."""
    text = os.environ.get("LOGCORR_THREADS", "").strip()
    if not text:
        return max(1, os.cpu_count() or 1)
    if not text.isdigit() or int(text) < 1:
        raise InputError(f"LOGCORR_THREADS={text!r} is not a number of threads: give a whole "
                         "number, at least 1 (e.g. LOGCORR_THREADS=2)")
    return int(text)


def _size(source: Source) -> int:
    try:
        return source.path.stat().st_size
    except OSError:
        return 0
