"""Rich renderables for `logcorr check`: a short, readable diff per fixture."""

from __future__ import annotations

from rich.console import Group as RichGroup
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from logcorr.diagnose.ranges import world_ranks
from logcorr.fixtures import Comparison
from logcorr.render_timeline import inert


def render_comparison(result: Comparison) -> RenderableType:
    """`ok` for a matching fixture; else the changed findings and lines."""
    if result.matches:
        return Text(f"ok       {result.fixture}", style="green")
    parts: list[RenderableType] = [Text(f"DIFFERS  {result.fixture}", style="bold red")]
    for finding in result.findings_changed:
        culprits = world_ranks(finding["culprits"], replicas=True) or "no process"
        parts.append(Text(f"  finding {finding['change']}: {finding['kind']} "
                          f"({finding['severity']}) group={finding['group']} culprits: {culprits}"))
    if result.lines_changed:
        parts.append(Text(f"  {result.lines_changed} line(s) changed attribution; first ones:"))
        table = Table(box=None, pad_edge=False, header_style="bold")
        for column in ("    file:line", "old", "new", "text"):
            table.add_column(column, overflow="fold")
        for example in result.line_examples:
            table.add_row(Text(inert(f"    {example['file']}:{example['line']}")),
                          Text(_coords(example["old"])), Text(_coords(example["new"])),
                          Text(inert(str(example["text"]))))
        parts.append(table)
    if result.lines_added or result.lines_removed:
        parts.append(Text(f"  lines added: {result.lines_added}, removed: {result.lines_removed}"))
    for change in result.other_changes:
        parts.append(Text(f"  {inert(change)}"))
    return RichGroup(*parts)


def _coords(values: dict[str, object]) -> str:
    return " ".join(f"{k}={v}" for k, v in values.items()) or "-"
