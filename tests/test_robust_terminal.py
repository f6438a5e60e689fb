"""Terminal safety: log text is shown inert in rich/text views, kept byte for byte in machine formats.

Inert means: rich markup in a line is displayed literally (never interpreted, never raises),
and terminal control sequences (colour, cursor movement, OSC 8 hyperlinks, OSC 52 clipboard
writes, the bell, C1 controls) and bidi controls never reach the terminal raw; they are shown
as `\\x1b`-style escapes.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from test_robustness import expected_lines, run_cli

from logcorr.cli import main
from logcorr.render_timeline import expand_tabs, inert

MARKUP = ("[bold]loud[/bold]", "[/tmp/x]", "[link=https://evil.example]click[/link]", "[red]")
HOSTILE = {
    "colour": "\x1b[38;5;201mpink\x1b[0m",
    "cursor": "\x1b[2J\x1b[H\x1b[5A\x1b[10;20H",
    "osc8": "\x1b]8;;https://evil.example\x1b\\click\x1b]8;;\x1b\\",
    "osc52": "\x1b]52;c;ZXZpbA==\x07",
    "bell": "ding\x07",
    "c1_csi": "\x9b31mcsi",
    "backspace": "abc\x08\x08\x08xyz",
    "bidi": "\u202eevil\u202c \u2066iso\u2069 \u200fmark \u061carabic",
}
# Raw forms that must never reach the terminal.
FORBIDDEN = ("\x07", "\x1b]", "\x1b[2J", "\x1b[H", "\x1b[5A", "\x1b[10;20H", "\x1b[38;5;201m",
             "\x9b", "\x08", "\u202e", "\u202c", "\u2066", "\u2069", "\u200f", "\u061c")
EVIL_NAME = "evil\x1b]52;c;ZXZpbA==\x07\u202e.log"


def _lines() -> list[str]:
    lines = ["[2026-11-29 10:00:00] server_args=ServerArgs(tp_size=2, dp_size=1, nnodes=1)"]
    lines += [f"[2026-11-29 10:00:01 TP0] {m} markup" for m in MARKUP]
    lines += [f"[2026-11-29 10:00:02 TP1] {name}: {seq} end" for name, seq in HOSTILE.items()]
    lines += [f"plain {seq}" for seq in HOSTILE.values()]
    return lines


@pytest.fixture()
def logs(tmp_path: Path) -> Path:
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / "node0.log").write_text("\n".join(_lines()) + "\n", encoding="utf-8")
    # A hostile file name whose server_args line disagrees: it reaches the header twice.
    (folder / EVIL_NAME).write_text(
        "[2026-11-29 10:00:00] server_args=ServerArgs(tp_size=4, dp_size=1, nnodes=1)\n"
        f"[2026-11-29 10:00:03 TP1] {HOSTILE['osc52']}\n", encoding="utf-8")
    return folder


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _check_inert(output: str) -> None:
    for raw in FORBIDDEN:
        assert raw not in output, f"raw {raw!r} reached the terminal"
    for markup in MARKUP:
        assert markup in output, f"markup {markup!r} was not shown literally"
    assert "\\x1b[38;5;201mpink" in output
    assert "\\u202eevil" in output


class TestTerminalViews:
    def test_text_format(self, logs: Path) -> None:
        """--format text: markup literal, control and bidi characters escaped."""
        code, out, err = run_cli(["analyze", str(logs), "--format", "text", "--limit", "0"])
        assert code == 0, err
        _check_inert(out)

    def test_rich_format_to_file(self, logs: Path, tmp_path: Path) -> None:
        """--format rich -o FILE: the same guarantees without a terminal."""
        target = tmp_path / "out.txt"
        code, _, err = run_cli(["analyze", str(logs), "--format", "rich", "-o", str(target)])
        assert code == 0, err
        _check_inert(target.read_text(encoding="utf-8"))

    def test_rich_format_on_a_colour_terminal(self, logs: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
        """On a colour terminal only rich's own styles are emitted, never the log's."""
        monkeypatch.setenv("TERM", "xterm-256color")
        monkeypatch.setenv("COLORTERM", "truecolor")
        monkeypatch.setenv("COLUMNS", "400")
        monkeypatch.delenv("NO_COLOR", raising=False)
        terminal = _Terminal()
        with contextlib.redirect_stdout(terminal), contextlib.redirect_stderr(io.StringIO()):
            assert main(["analyze", str(logs)]) == 0
        output = terminal.getvalue()
        assert "\x1b[" in output  # it really is the colour view
        _check_inert(output)

    def test_inert_covers_every_control(self) -> None:
        """Every C0/C1 control but tab, DEL, and every bidi control is escaped."""
        controls = [chr(c) for c in [*range(9), *range(10, 32), *range(0x7F, 0xA0)]]
        bidi = ["\u061c", "\u200e", "\u200f", *map(chr, range(0x202A, 0x202F)),
                *map(chr, range(0x2066, 0x206A))]
        for char in controls + bidi:
            assert char not in inert(f"a{char}b"), repr(char)
        assert inert("tab\there [b]x[/b]") == "tab\there [b]x[/b]"


class TestMachineFormats:
    def _expected(self, logs: Path) -> dict[str, list[str]]:
        return {p.name: expected_lines(p.read_bytes()) for p in logs.iterdir()}

    def _by_file(self, rows: list[dict[str, object]]) -> dict[str, list[str]]:
        found: dict[str, list[str]] = {}
        for row in sorted(rows, key=lambda r: (str(r["file"]), int(r["line"]), int(r["part"]))):  # type: ignore[arg-type]
            lines = found.setdefault(str(row["file"]), [])
            if int(row["part"]) == 0:  # type: ignore[arg-type]
                lines.append(str(row["text"]))
            else:
                lines[-1] += str(row["text"])
        return found

    @pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
    def test_text_byte_for_byte(self, logs: Path, tmp_path: Path, fmt: str) -> None:
        """jsonl/csv/parquet keep escapes, markup and bidi characters unchanged in `text`."""
        target = tmp_path / f"out.{fmt}"
        code, _, err = run_cli(["analyze", str(logs), "--format", fmt, "-o", str(target)])
        assert code == 0, err
        if fmt == "jsonl":
            rows = [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines()]
        elif fmt == "csv":
            with target.open(encoding="utf-8", newline="") as stream:
                rows = list(csv.DictReader(stream))
        else:
            rows = pl.read_parquet(target).to_dicts()
        assert self._by_file(rows) == self._expected(logs)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(["a", " ", "\t", "\u4e2d", "\u00e9", "e\u0301", "\U0001f642",
                                 "\u200b", "\uff8a", "x" * 9, "|"]), max_size=40).map("".join))
def test_plain_view_lines_are_what_rich_printed(line: str) -> None:
    """The plain view writes its lines itself (rich's per-line rendering cost ~0.3 ms a line);
    what it writes is what rich's `Console.out` printed: tabs to stops of 8 cells, wide
    characters counting two, nothing else changed."""
    buffer = io.StringIO()
    Console(file=buffer, soft_wrap=True, highlight=False, force_terminal=False,
            width=160).out(line, highlight=False)
    assert expand_tabs(line) + "\n" == buffer.getvalue()


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from([chr(c) for c in range(0x80)]
                                + ["\u00e9", "\u4e2d", "e\u0301", "\u200b", "\x9b"]),
                max_size=30).map("".join))
def test_a_texts_cells_are_counted_as_rich_counts_them(text: str) -> None:
    """The plain view counts a printable ASCII text's cells itself (one a character); any
    other text (controls, DEL, wide or zero-width characters) is counted by rich."""
    from rich.cells import cell_len

    from logcorr.render_timeline import _cells

    assert _cells(text) == cell_len(text)
    assert all(_cells(chr(c)) == cell_len(chr(c)) for c in range(0x80))
