"""Paths a run must not leave behind if it is cut short: the spill folder, the temporary file
an output is written to before its rename. The modules that create them register them here;
the command line's signal watchdog (`cli`) removes what is registered before it ends a run
that did not unwind in time.
"""

from __future__ import annotations

import os
import shutil
import threading

_lock = threading.Lock()
_paths: set[str] = set()
_closing = threading.Event()


def register(path: str) -> None:
    """`path` (a file or folder) is removed if the run is ended from outside."""
    with _lock:
        _paths.add(path)


def unregister(path: str) -> None:
    with _lock:
        _paths.discard(path)


def closing() -> bool:
    """The run is being ended: write nothing more."""
    return _closing.is_set()


def remove_all() -> None:
    """Remove every registered path (twice: a worker thread may have written one more file
    into a folder while it was being removed)."""
    _closing.set()
    with _lock:
        paths = sorted(_paths)
    for _ in range(2):
        for path in paths:
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                try:
                    os.unlink(path)
                except OSError:
                    pass
