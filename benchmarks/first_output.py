"""How soon the terminal view shows results: `python benchmarks/first_output.py DIR ARGS`.

Runs `logcorr analyze DIR --config ARGS --format rich` in this process (output to a null
terminal of 160 columns) and prints one JSON line with, in seconds from the start:

* parsing_done   the parse pass ended (the first chunk goes to attribution);
* analysis_done  attribution, alignment and diagnosis ended;
* first_row      the first timeline row reached the terminal;
* output_done    the view was complete;

and `rows_rendered`, the number of timeline rows drawn (the default --limit bounds it).
"""

from __future__ import annotations

import io
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from rich.console import Console

from logcorr import commands
from logcorr.api import analyze


class _Clocked(io.StringIO):
    """A terminal stand-in that notes when the first timeline row arrives."""

    def __init__(self, start: float) -> None:
        super().__init__()
        self.start = start
        self.first_row: float | None = None

    def write(self, text: str) -> int:
        if self.first_row is None and "[2" in text and ".log:" in text:
            self.first_row = time.perf_counter() - self.start
        return super().write(text)


def main(argv: list[str]) -> int:
    folder, config = argv[0], argv[1]
    start = time.perf_counter()
    marks: dict[str, float] = {}

    def progress(stage: str, done: int, total: int) -> None:
        if stage == "attributing" and "parsing_done" not in marks:
            marks["parsing_done"] = time.perf_counter() - start

    analysis = analyze([folder], config=config, progress=progress)
    marks["analysis_done"] = time.perf_counter() - start
    sink = _Clocked(start)
    console = Console(file=sink, width=160, force_terminal=True, soft_wrap=True)
    commands.print_timeline(console, analysis, None, "rich", 2000)
    marks["output_done"] = time.perf_counter() - start
    marks["first_row"] = sink.first_row if sink.first_row is not None else float("nan")
    rows = sink.getvalue().count(".log:")
    print(json.dumps({**{k: round(v, 2) for k, v in marks.items()}, "rows_rendered": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
