"""Rich renderables and plain text for `logcorr analyze`: what to show, never how to print.

Log text is data: it is never read as rich markup, and terminal control sequences (colours,
cursor movement, OSC 8 / OSC 52, the bell, bidi overrides) are shown as inert `\\x1b`-style
escapes in the terminal views. Machine formats keep the text byte for byte.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import polars as pl
import regex
from rich.cells import cell_len
from rich.console import Console, RenderableType
from rich.console import Group as RichGroup
from rich.segment import Segment, Segments
from rich.style import Style
from rich.table import Table
from rich.text import Text

from logcorr.diagnose.ranges import ranges, world_ranks
from logcorr.render_topology import summary_line

if TYPE_CHECKING:
    from logcorr.api import Analysis
    from logcorr.diagnose import Finding
    from logcorr.topology import Topology

# C0 controls except tab, DEL, C1 controls, and the Unicode bidi/format controls.
_UNSAFE = regex.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_PALETTE = ("cyan", "magenta", "green", "yellow", "blue", "red", "bright_cyan",
            "bright_magenta", "bright_green", "bright_yellow", "bright_blue", "bright_red")
# (in the order of SGLang's prefix: DP, PP, ATTN_CP, MOE_DP, TP, EP)
_TAG_COLUMNS = (("node_rank", "n"), ("gpu_id", "g"), ("replica", "r"), ("world_rank", "w"),
                ("dp_rank", "DP"), ("pp_rank", "PP"), ("attn_cp_rank", "ATTN_CP"),
                ("moe_dp_rank", "MOE_DP"), ("tp_rank", "TP"), ("moe_ep_rank", "EP"))


def inert(text: str) -> str:
    """Make terminal control characters visible instead of active.

    >>> inert("a\\x1b[31mred\\x07")
    'a\\\\x1b[31mred\\\\x07'
    """
    return str(_UNSAFE.sub(_escape, text))


def _escape(match: regex.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def tag_expr(topology: Topology | None = None) -> pl.Expr:
    """A compact coordinate tag per row: `n1 g2 w10 DP5 TP10 EP10`, `main`, or empty.
    With a topology, dimensions of width 1 are left out."""
    widths = topology.tag_widths() if topology is not None else {}
    parts = [pl.when(pl.col(col).is_not_null()).then(pl.lit(label) + pl.col(col).cast(pl.String))
             for col, label in _TAG_COLUMNS if widths.get(col, 2) > 1]
    coords = pl.concat_str(parts, separator=" ", ignore_nulls=True)
    # (a torch job's rank has a world rank and no role of SGLang's)
    scheduler = (pl.col("role") == "scheduler") | (
        pl.col("role").is_null() & pl.col("world_rank").is_not_null())
    return (pl.when(scheduler).then(coords)
            .when(pl.col("role").is_not_null()).then(pl.col("role"))
            .otherwise(pl.lit(""))).fill_null("")


def header(analysis: Analysis, selected: int | None, limit: int) -> RenderableType:
    """Topology, files, line counts, attribution by evidence, what is unattributed and why.
    `selected`: the lines the view draws from (None: a filter, counted as it is read)."""
    lines: list[Text] = []
    if analysis.topology is not None:
        lines.append(Text(f"topology: {summary_line(analysis.topology)} "
                          f"(from {inert(str(analysis.topology_source))})", style="bold"))
    else:
        lines.append(Text("topology: unknown (no --config and no readable server_args line in the "
                          "logs); coordinates are only what the lines print", style="bold yellow"))
    total = analysis.tally.lines
    evidence = analysis.evidence_counts()
    attributed = sum(evidence.values())
    if selected is None:
        shown = f"the selected lines{f', at most {limit}' if limit > 0 else ''}"
    else:
        shown = str(min(selected, limit) if limit > 0 else selected)
    lines.append(Text(f"files: {len(analysis.sources)}   lines: {total}   shown: {shown}"))
    if analysis.skipped:
        size = sum(s.size or 0 for s in analysis.skipped)
        lines.append(Text(f"files skipped: {len(analysis.skipped)} ({size} bytes): " + inert(
            "; ".join(f"{s.display} ({s.reason})" for s in analysis.skipped[:5]))
            + (f"; and {len(analysis.skipped) - 5} more" if len(analysis.skipped) > 5 else ""),
            style="yellow"))
    notes = analysis.tally.notes
    if notes:
        lines.append(Text("lines noted: " + ", ".join(f"{why} {n}" for why, n in
                                                      sorted(notes.items()))))
    lines.append(Text(f"attributed to a process: {attributed} ({_percent(attributed, total)}) "
                      "by " + (", ".join(f"{k} {v}" for k, v in sorted(evidence.items()))
                               or "nothing")))
    reasons = analysis.unattributed_reasons()
    if reasons:
        lines.append(Text("not attributed: " + ", ".join(
            f"{why} {n}" for why, n in sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0])))))
    for contradiction in analysis.contradictions:
        where = f" ({contradiction['file']}:{contradiction['line']})" if contradiction.get(
            "file") else ""
        said = "note" if contradiction.get("note") else "contradiction"
        lines.append(Text(inert(f"{said}: {contradiction['detail']}{where}"),
                          style="yellow" if contradiction.get("note") else "red"))
    for warning in analysis.warnings:
        lines.append(Text(f"warning: {inert(warning)}", style="yellow"))
    return RichGroup(*lines)


def _percent(part: int, total: int) -> str:
    return f"{100.0 * part / total:.1f}%" if total else "0%"


_HEADERS = ("#", "time", "process", "source", "file:line", "text")
# each column's padding (rich's default of one cell each side, none at the table's edges)
_PADS = ((0, 1), (1, 1), (1, 1), (1, 1), (1, 1), (1, 0))
_TAG = 2  # the process tag's column (styled by its tag)


def timeline_table(frame: pl.DataFrame, topology: Topology | None = None) -> Table:
    """The timeline rows as a table: order, time, process tag, source, text."""
    table = Table(box=None, pad_edge=False, show_header=True, header_style="bold")
    for column in _HEADERS:
        table.add_column(column, no_wrap=column != "text",
                         justify="right" if column == "#" else "left",
                         overflow="fold" if column == "text" else "ellipsis")
    for cells in _row_cells(frame, topology):
        table.add_row(*(Text(c, style=_tag_style(c)) if i == _TAG else Text(c)
                        for i, c in enumerate(cells)))
    return table


def _row_cells(frame: pl.DataFrame, topology: Topology | None) -> Iterator[tuple[str, ...]]:
    rows = frame.with_columns(tag_expr(topology).alias("_tag")).select(
        "order", "ts", "_tag", "source", "file", "line", "text")
    for order, ts, tag, source, name, line, text in rows.iter_rows():
        yield (str(order), ts or "", tag, source or "", inert(f"{name}:{line}"),
               inert(text or ""))


def _tag_style(tag: str) -> str:
    return _PALETTE[hash(tag) % len(_PALETTE)] if tag else "dim"


def timeline_view(frame: pl.DataFrame, topology: Topology | None, console: Console
                  ) -> RenderableType:
    """`timeline_table` as `console` lays it out (the same cells, column widths, wrapping and
    styles), made line by line: rich's table measures and renders every cell through its
    generic machinery, about 1.3 ms a row (2.6 s for the default view's 2,000 rows). Where
    rich would shrink more than the text column (a terminal too narrow for the others) or a
    cell holds a tab, it is rich's table itself."""
    rows = list(_row_cells(frame, topology))
    width = console.options.max_width
    lengths = [max([_cells(header), *(_cells(r[i]) for r in rows)])
               for i, header in enumerate(_HEADERS)]
    # (rich: a column is as wide as its widest cell and padding, at most the console; past
    # the console the text column alone gives up the excess)
    widths = [min(n + sum(pad), width) or 1 for n, pad in zip(lengths, _PADS)]
    excess = sum(widths) - width
    if excess > 0:
        widths[-1] -= excess
    # (the text column at least as wide as its header: rich folds a narrower one's header,
    # and sets the header row's other cells at its foot)
    if (widths[-1] - sum(_PADS[-1]) < len(_HEADERS[-1])
            or any(w - sum(p) < 1 for w, p in zip(widths, _PADS))
            or any("\t" in c for r in rows for c in r)):
        return timeline_table(frame, topology)
    inner = [w - sum(pad) for w, pad in zip(widths, _PADS)]
    bold = Style(bold=True)
    segments: list[Segment] = []
    for i, header in enumerate(_HEADERS):
        segments.append(Segment(_pad(header, i, inner[i]), bold))
    segments.append(Segment.line())
    left, right = _PADS[_TAG]
    blank = " " * (sum(widths[:-1]) + _PADS[-1][0])  # (a wrapped row's next lines)
    for row in rows:
        lines = _wrapped(console, row[-1], inner[-1])
        tag = row[_TAG].rstrip()
        before = "".join(_pad(c, i, inner[i]) for i, c in enumerate(row[:_TAG]))
        after = "".join(_pad(c, i + _TAG + 1, inner[i + _TAG + 1])
                        for i, c in enumerate(row[_TAG + 1:-1]))
        segments += [Segment(before + " " * left),
                     Segment(tag + " " * (inner[_TAG] - _cells(tag)),
                             Style.parse(_tag_style(row[_TAG]))),
                     Segment(" " * right + after + " " * _PADS[-1][0] + lines[0]), Segment.line()]
        for more in lines[1:]:
            segments += [Segment(blank + more), Segment.line()]
    return Segments(segments)


def _pad(cell: str, column: int, width: int) -> str:
    """A cell that needs no wrapping, justified in its column's width (rich strips its
    trailing space first), with the column's padding."""
    left, right = _PADS[column]
    text = cell.rstrip()
    room = " " * (width - _cells(text))
    text = room + text if column == 0 else text + room
    return " " * left + text + " " * right


def _wrapped(console: Console, text: str, width: int) -> list[str]:
    """The text column's lines for one row, as rich's `Text.wrap` makes them (folded, each
    stripped at its end and padded to `width`): a line of printable ASCII that fits is
    padded here."""
    if len(text) <= width and text.isascii() and text.isprintable():
        kept = text.rstrip()
        return [kept + " " * (width - len(kept))]
    return [line.plain for line in Text(text).wrap(console, width, justify="left",
                                                   overflow="fold")]


def head_tail(analysis: Analysis, batches: Iterable[pl.DataFrame] | None, limit: int
              ) -> Iterator[pl.DataFrame | str]:
    """At most `limit` rows: the first and last halves with a marker between (0 = all).

    `batches` are filtered timeline rows (read as they come: the head shows before the end
    is reached), or None for the whole timeline, whose head and tail need no merge at all."""
    half = limit // 2
    if batches is None:
        total = analysis.tally.lines
        if limit <= 0 or total <= limit:
            yield from analysis.batches()
            return
        yield analysis.head(half)
        yield _marker(total - 2 * half)
        yield analysis.tail(half)
        return
    if limit <= 0:
        yield from batches
        return
    first: list[pl.DataFrame] = []
    seen = 0
    stream = iter(batches)
    for batch in stream:
        first.append(batch)
        seen += batch.height
        if seen > limit:
            break
    rows = pl.concat(first) if first else pl.DataFrame()
    if seen <= limit:
        if rows.height:
            yield rows
        return
    yield rows.head(half)
    last = rows.slice(half)
    for batch in stream:
        seen += batch.height
        last = pl.concat([last, batch]).tail(half)
    yield _marker(seen - 2 * half)
    yield last.tail(half)


def _marker(hidden: int) -> str:
    return f"... {hidden} lines not shown (use --limit 0 to show all) ..."


def text_lines(frame: pl.DataFrame, topology: Topology | None = None) -> Iterator[str]:
    """Plain text view: `order ts [process] source file:line | text` per row, tabs expanded
    to stops of TAB_CELLS terminal cells (as a terminal, or rich, shows them)."""
    rows = frame.with_columns(tag_expr(topology).alias("_tag")).select(
        "order", "ts", "_tag", "source", "file", "line", "text")
    for order, ts, tag, source, name, line, text in rows.iter_rows():
        yield expand_tabs(
            inert(f"{order}\t{ts or '-'}\t[{tag}]\t{source}\t{name}:{line}\t| {text or ''}"))


TAB_CELLS = 8


def expand_tabs(line: str) -> str:
    """`line` with each tab turned into the spaces up to the next tab stop, counted in
    terminal cells (a wide character takes two).

    >>> expand_tabs("12\\tab\\t|")
    '12      ab      |'
    """
    if "\t" not in line:
        return line
    *parts, last = line.split("\t")
    out = []
    cells = 0
    for part in parts:
        cells += _cells(part)
        pad = TAB_CELLS - cells % TAB_CELLS
        out.append(part + " " * pad)
        cells += pad
    out.append(last)
    return "".join(out)


def _cells(text: str) -> int:
    """The terminal cells of `text`, as rich counts them: a printable ASCII text takes one a
    character (counted without asking rich, which costs microseconds per call)."""
    return len(text) if text.isascii() and text.isprintable() else cell_len(text)


_SEVERITY_STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def findings_view(analysis: Analysis) -> RenderableType:
    """The findings panel: culprits with full coordinates, evidence lines, per-group progress."""
    if not analysis.findings:
        return Text("findings: none (no crash, hang, missing process or contradiction found)",
                    style="green")
    parts: list[RenderableType] = [Text(f"findings: {len(analysis.findings)}", style="bold")]
    for number, finding in enumerate(analysis.findings, start=1):
        parts += _finding_view(number, finding)
    return RichGroup(*parts)


# lists of at most this many processes are shown as tables, longer ones as ranges
TABLE_ROWS = 8


def _finding_view(number: int, finding: Finding) -> list[RenderableType]:
    """One finding: its summary, stream, culprits, who waited, what followed, evidence."""
    style = _SEVERITY_STYLE.get(finding.severity, "")
    parts: list[RenderableType] = [
        Text(f"{number}. [{finding.severity}] {finding.kind}: ", style=style)
        + Text(inert(finding.summary))]
    if finding.stream:
        parts.append(Text("   stream: ") + Text(inert(finding.stream)))
    if finding.processes:
        parts += _people_view("culprit" if finding.severity == "error" else "process",
                              finding.processes, table=True, head=True)
    for title, people in (("waiting", finding.waiting), ("unknown (no logs)", finding.unknown)):
        if people:
            parts += _people_view(title, people, table=not finding.progress)
    for then in finding.consequences:
        parts.append(Text(f"   followed by {then['kind']}: ", style="dim")
                     + Text(inert(str(then["summary"]))[:300], style="dim"))
    if finding.progress:
        parts.append(_progress_table(finding))
    for cite in finding.evidence[:6]:
        parts.append(Text(f"   evidence: {inert(str(cite['file']))}:{cite['line']}",
                          style="dim"))
    return parts


def _people_view(title: str, people: list[dict[str, object]], table: bool,
                 head: bool = False) -> list[RenderableType]:
    """A short list as a table of coordinates (when `table`); a long one, or one a progress
    table already shows, as ranges of world ranks (after the table of its first ones, with
    `head`)."""
    if table and len(people) <= TABLE_ROWS:
        return [_people_table(title, people)]
    line = Text(f"   {title}: {len(people)} process(es): {world_ranks(people)}")
    return [_people_table(title, people[:TABLE_ROWS]), line] if head else [line]


def _people_table(title: str, people: list[dict[str, object]]) -> Table:
    table = Table(box=None, pad_edge=False, header_style="bold")
    columns: tuple[str, ...] = ("replica", "world_rank", "node_rank", "host", "pid", "gpu_id",
                                "tp_rank", "dp_rank", "pp_rank", "attn_dp_rank", "attn_tp_rank",
                                "moe_ep_rank")
    # context parallelism and MoE data parallelism, when some member has a rank other than 0
    columns += tuple(c for c in ("attn_cp_rank", "moe_dp_rank")
                     if any(person.get(c) not in (None, 0) for person in people))
    table.add_column(f"   {title}")
    for column in columns:
        table.add_column(column.replace("_rank", ""), justify="right")
    for person in people[:TABLE_ROWS]:
        table.add_row("", *(Text(inert("-" if person.get(c) is None else str(person.get(c))))
                            for c in columns))
    return table


def _progress_table(finding: Finding, limit: int = 24) -> Table:
    """The members' progress, members in the same state on one line as ranges of world ranks
    (a 256-member group is a few lines), culprits first, so the odd one out shows at a
    glance."""
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in ("   members (world rank)", "timed out", "SeqNum", "last enqueued",
                   "last completed", "last line"):
        table.add_column(column, justify="right")
    culprits = {p["world_rank"] for p in finding.processes}
    states: dict[tuple[object, ...], list[dict[str, object]]] = {}
    for row in finding.progress:
        key = (row["world_rank"] not in culprits, not row["timed_out"], row["seq"],
               row["last_enqueued"], row["last_completed"])
        states.setdefault(key, []).append(row)
    ordered = sorted(states.items(), key=lambda kv: (kv[0][0], kv[0][1],
                                                     min(int(str(r["world_rank"])) for r in kv[1])))
    if len(ordered) > limit:
        table.caption = f"{len(ordered) - limit} more state(s) not shown"
    for (other, _, seq, enqueued, completed), rows in ordered[:limit]:
        times = sorted(str(r["last_line_ts"]) for r in rows if r["last_line_ts"])
        when = (times[0] if times and times[0] == times[-1] else
                f"{times[0]} to {times[-1]}" if times else None)
        style = "" if other else "bold red"
        table.add_row(*(Text("-" if v is None else str(v), style=style) for v in (
            ranges(int(str(r["world_rank"])) for r in rows),
            "yes" if rows[0]["timed_out"] else "no", seq, enqueued, completed, when)))
    return table
