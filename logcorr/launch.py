"""The console entry point, light enough that a Ctrl-C while the heavy modules (polars, rich)
are still being imported ends with `logcorr: interrupted` and exit 130, not a traceback."""

from __future__ import annotations

import sys


def main() -> None:
    try:
        from logcorr.cli import main_entry
    except KeyboardInterrupt:
        sys.stderr.write("logcorr: interrupted\n")
        sys.exit(130)
    main_entry()
