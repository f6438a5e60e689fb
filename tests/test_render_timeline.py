"""The rich timeline view is laid out line by line (`render_timeline.timeline_view`): it must
show what rich's own table of the same rows shows, character for character and style for
style, at every width, and fall back to that table where rich would shrink more than the
text column."""

from __future__ import annotations

import io
from typing import Any

import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.segment import Segments
from rich.style import Style

from logcorr.render_timeline import timeline_table, timeline_view

# words of real lines, and the hard cases: wide characters, a word longer than any column,
# markup, a control sequence (shown inert), trailing spaces, empty text
WORDS = ["Decode", "batch.", "#running-req:", "12,", "token usage:", "0.35,", "gen throughput",
         "(token/s):", "NCCL", "INFO", "comm", "0x7f3a2c", "rank", "\u6570\u636e\u5e76\u884c",
         "\u00e9t\u00e9", "\U0001f642", "a" * 90, "/sgl/python/sglang/srt/managers/scheduler.py",
         "[bold]x[/bold]", "\x1b[31mred", "", "  "]
COORDINATES = ("node_rank", "gpu_id", "replica", "world_rank", "dp_rank", "pp_rank",
               "attn_cp_rank", "moe_dp_rank", "tp_rank", "moe_ep_rank")


@st.composite
def timelines(draw: Any) -> pl.DataFrame:
    rows = []
    for order in range(draw(st.integers(1, 12))):
        text = " ".join(draw(st.lists(st.sampled_from(WORDS), max_size=25)))
        rows.append({
            "order": order * draw(st.sampled_from([1, 1000, 10**9])),
            "ts": draw(st.sampled_from([None, "2026-11-29T10:00:00.123456", "2026-11-29T10:00:01"])),
            "source": draw(st.sampled_from([None, "sglang", "nccl", "python"])),
            "file": draw(st.sampled_from(["node0.log", "logs/a/very/long/folder/name/node12.log",
                                          "\u65e5\u5fd7.log", "trailing .log "])),
            "line": draw(st.integers(1, 10**7)),
            "text": text + draw(st.sampled_from(["", "   ", "\ttab"])),
            "role": draw(st.sampled_from([None, "scheduler", "main"])),
            **{c: draw(st.one_of(st.none(), st.integers(0, 511))) for c in COORDINATES}})
    return pl.DataFrame(rows, schema_overrides={"order": pl.UInt64})


def _shown(console: Console, renderable: Any) -> list[tuple[str, Style | None]]:
    """What a terminal shows: each character with its style (no style and a style that sets
    nothing look alike)."""
    return [(char, segment.style or None) for segment in console.render(renderable)
            for char in segment.text]


@settings(max_examples=300, deadline=None)
@given(timelines(), st.sampled_from([24, 40, 60, 80, 100, 120, 160, 240, 400]))
def test_the_view_shows_what_rich_s_table_shows(frame: pl.DataFrame, width: int) -> None:
    console = Console(file=io.StringIO(), width=width, color_system="256", force_terminal=True)
    assert _shown(console, timeline_view(frame, None, console)) == _shown(
        console, timeline_table(frame))


def test_the_view_is_made_line_by_line_where_the_columns_fit() -> None:
    """The default view's rows at a usual width take the line-by-line path; a narrow
    terminal and a tab (which rich expands as it renders) take rich's table."""
    frame = pl.DataFrame({
        "order": [0, 1], "ts": ["2026-11-29T10:00:00", None], "source": ["sglang", None],
        "file": ["node0.log", "node1.log"], "line": [1, 2],
        "text": ["[2026-11-29 10:00:00 DP5 TP10 EP10] Decode batch. #running-req: 12 " * 3, ""],
        "role": ["scheduler", None],
        **{c: [10 if c in ("tp_rank", "world_rank") else None, None] for c in COORDINATES}},
        schema_overrides={"order": pl.UInt64, **{c: pl.Int32 for c in COORDINATES}})
    wide = Console(file=io.StringIO(), width=160)
    assert isinstance(timeline_view(frame, None, wide), Segments)
    narrow = Console(file=io.StringIO(), width=40)
    assert not isinstance(timeline_view(frame, None, narrow), Segments)
    tabbed = frame.with_columns(pl.col("text") + "\tx")
    assert not isinstance(timeline_view(tabbed, None, wide), Segments)
    wide.print(timeline_view(frame, None, wide))
    shown = wide.file.getvalue().splitlines()  # type: ignore[attr-defined]
    assert shown[0].split() == ["#", "time", "process", "source", "file:line", "text"]
    # (the first row wraps: its next line is blank up to the text column)
    column = shown[1].index("[2026-11-29 10:00:00 DP5")
    assert "w10 TP10" in shown[1] and shown[2][:column].strip() == "" and shown[2][column] != " "
    assert shown[-1].split() == ["1", "node1.log:2"]  # (no time, no process, no source)
