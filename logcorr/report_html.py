"""`analyze --html FILE`: one self-contained HTML file that shows the incident.

Sections: the header (topology, coverage: lines, attributed and by which evidence, what was not
and why), the findings (kind, severity, summary, culprits with coordinates, the cited lines with
their text, the group's progress per member, a link to the moment on the swimlanes), the
swimlanes (one row per process in topology order, line density over time in bins, event marks,
the first error as a vertical line, pan and zoom, the incident framed on opening), and the state
grids (attention DP x attention TP, MoE DP x MoE EP, node x GPU).

Everything is inline (style, script, data); the page's Content-Security-Policy forbids any
request. Log text is data, never markup: the server-side parts are HTML-escaped, the data block
is JSON with `<`, `>` and `&` escaped, and the script only ever sets `textContent`. Control and
bidi characters are shown as `\\x..` / `\\u....` escapes. Each process row carries
`data-replica`, `data-world-rank`, `data-role` (culprits also `data-culprit`), each finding
`data-kind`.
"""

from __future__ import annotations

import html
import json
import math
from pathlib import Path
from typing import Any

import polars as pl

from logcorr import __version__
from logcorr.diagnose.ranges import ranges, world_ranks
from logcorr.digest import KINDS, Digest, Row, coords_label, rows_of, to_us
from logcorr.perfetto import wait_spans
from logcorr.render_timeline import inert
from logcorr.render_topology import summary_line
from logcorr.topology import Topology

CELLS = 300_000  # density cells (rows x bins) in the file, per level (two levels)
MIN_BINS, MAX_BINS = 200, 2_000
MARKS = 8_000  # event marks in the file (besides the cited lines and each kind's last)
MARK_CHARS = 200  # characters of a mark's text kept (the length is said when cut)
EVIDENCE_CHARS = 4_000
CSP = ("default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
       "base-uri 'none'; form-action 'none'")
STATES = ("healthy", "waiting", "unknown", "suspect", "culprit", "crashed", "missing")
STATE_TEXT = {"healthy": "healthy", "waiting": "waiting (victim)", "unknown": "progress unknown",
              "suspect": "suspect", "culprit": "culprit", "crashed": "crashed",
              "missing": "logs missing"}


def write_html(analysis: Any, digest: Digest, path: str | Path) -> None:
    """Render and write atomically (a partial file never carries the name)."""
    from logcorr.output import write_text

    write_text(render(analysis, digest), str(path))


def render(analysis: Any, d: Digest) -> str:
    topology: Topology | None = analysis.topology
    window = _window(d)
    data = _data(d, window)
    parts = [_HEAD.replace("{csp}", CSP).replace("{style}", _STYLE),
             _header(analysis, d), _findings(d), _lanes(d), _grids(d, topology),
             '<script type="application/json" id="logcorr-data">', _json(data), "</script>",
             "<script>", _SCRIPT, "</script></body></html>\n"]
    return "".join(parts)


def e(value: object) -> str:
    """Text for HTML: control and bidi characters made visible, then escaped."""
    return html.escape(inert("" if value is None else str(value)), quote=True)


def _json(data: object) -> str:
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return (text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
            .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029"))


# ------------------------------------------------------------------------------ sections


def _header(analysis: Any, d: Digest) -> str:
    topology = analysis.topology
    cov = analysis.coverage()
    lines = cov["lines"]
    attributed = cov["lines_attributed"]
    pct = f"{100.0 * attributed / lines:.1f}%" if lines else "0%"
    evidence = ", ".join(f"{e(k)} {v:,}" for k, v in sorted(analysis.evidence_counts().items()))
    reasons = ", ".join(f"{e(k)} {v:,}" for k, v in sorted(
        analysis.unattributed_reasons().items(), key=lambda kv: (-kv[1], kv[0])))
    topo = (f"{e(summary_line(topology))} <span class=dim>(from "
            f"{e(analysis.topology_source)})</span>" if topology is not None else
            "unknown (no --config and no readable server_args line): coordinates are only "
            "what the lines print")
    errors = sum(1 for f in d.findings if f.get("severity") == "error")
    out = [f'<header><h1>logcorr report: {len(d.findings)} finding(s), {errors} error(s)</h1>',
           '<dl class="coverage">',
           f"<dt>topology</dt><dd>{topo}</dd>",
           f"<dt>time</dt><dd>{e(d.iso(d.base_us))} to {e(d.iso(d.end_us))}</dd>",
           f"<dt>files</dt><dd>{cov['files']:,}</dd>",
           (f"<dt>lines</dt><dd>{lines:,} ({d.timed_lines:,} print their time; the others are "
           "drawn at the time of the line before them)</dd>"),
           (f"<dt>processes</dt><dd>{cov['processes_seen']:,} seen of "
           f"{cov['expected_processes']:,} expected</dd>"),
           f"<dt>attributed</dt><dd>{attributed:,} ({pct}) by {evidence or 'nothing'}</dd>"]
    if reasons:
        out.append(f"<dt>not attributed</dt><dd>{reasons}</dd>")
    for c in getattr(analysis, "contradictions", []):
        where = f" ({e(c.get('file'))}:{e(c.get('line'))})" if c.get("file") else ""
        said, style = ("note", "") if c.get("note") else ("contradiction", " class=bad")
        out.append(f"<dt>{said}</dt><dd{style}>{e(c.get('detail'))}{where}</dd>")
    for warning in getattr(analysis, "warnings", []):
        out.append(f"<dt>warning</dt><dd>{e(warning)}</dd>")
    out.append(f"</dl><p class=dim>logcorr {e(__version__)}</p></header>")
    return "".join(out)


def _findings(d: Digest) -> str:
    out = ['<section id="findings"><h2>Findings</h2>']
    if not d.findings:
        out.append("<p>No findings: no crash, hang, timeout or missing process in these logs."
                   "</p>")
    for i, f in enumerate(d.findings):
        severity = str(f.get("severity") or "info")
        out.append(f'<article class="finding sev-{e(severity)}" id="finding-{i + 1}" '
                   f'data-kind="{e(f.get("kind"))}" data-severity="{e(severity)}">')
        out.append(f"<h3>{i + 1}. <span class=sev>{e(severity)}</span> {e(f.get('kind'))}</h3>")
        out.append(f"<p class=summary>{e(f.get('summary'))}</p>")
        if f.get("stream"):
            out.append(f"<p>stream: <code>{e(f.get('stream'))}</code></p>")
        when = " to ".join(e(f.get(k)) for k in ("first_ts", "last_ts") if f.get(k))
        if when:
            out.append(f"<p class=dim>at {when}</p>")
        out.append(f'<p><a href="#lanes" class="goto" data-finding="{i}">show on the '
                   "swimlanes</a></p>")
        for title, field in (("culprit", "processes"), ("waiting", "waiting"),
                             ("progress unknown", "unknown_processes")):
            processes = f.get(field) or []
            if processes:
                out.append(_process_table(title, processes, d))
        if f.get("consequences"):
            out.append(_consequences(f["consequences"]))
        if f.get("progress"):
            out.append(_progress(f, d))
        cited = f.get("evidence") or []
        if cited:
            out.append(f"<details open><summary>evidence: {len(cited)} line(s)</summary>"
                       "<div class=evidence>")
            for c in cited:
                key = (str(c.get("file")), int(c.get("line") or 0))
                text = d.evidence.get(key, "")
                cut = text[:EVIDENCE_CHARS]
                more = (f" <span class=dim>({len(text):,} characters, "
                        f"{len(text) - len(cut):,} not shown)</span>") if len(cut) < len(text) else ""
                out.append(f"<div class=cite><span class=where>{e(key[0])}:{key[1]}</span> "
                           f"<code>{e(cut)}</code>{more}</div>")
            out.append("</div></details>")
        out.append("</article>")
    out.append("</section>")
    return "".join(out)


_PROCESS_COLUMNS = ("host", "pid", "node_rank", "gpu_id", "replica", "world_rank", "tp_rank",
                    "dp_rank", "pp_rank", "attn_dp_rank", "attn_tp_rank", "moe_ep_rank",
                    "moe_dp_rank", "attn_cp_rank", "role")


def _process_table(title: str, processes: list[dict[str, Any]], d: Digest) -> str:
    columns = [c for c in _PROCESS_COLUMNS if any(p.get(c) is not None for p in processes)]
    rows = rows_of(d, processes)
    labels = {id(p): d.rows[r].label for p, r in zip(processes, rows)} if len(rows) == len(
        processes) else {}
    head = "".join(f"<th>{e(c)}</th>" for c in ("process", *columns))
    body = "".join("<tr>" + f"<td>{e(labels.get(id(p), ''))}</td>" + "".join(
        f"<td>{e(p.get(c))}</td>" for c in columns) + "</tr>" for p in processes[:64])
    more = (f"<p class=dim>{len(processes) - 64} more</p>" if len(processes) > 64 else "")
    return (f"<details {'open' if title == 'culprit' else ''}><summary>{e(title)}: "
            f"{len(processes)} process(es): {e(world_ranks(processes))}</summary>"
            f"<table class=procs><thead><tr>{head}"
            f"</tr></thead><tbody>{body}</tbody></table>{more}</details>")


def _consequences(records: list[dict[str, Any]]) -> str:
    """What followed from a root, one line per kind, with a sample line of each."""
    items = "".join(
        f"<li><b>{e(r.get('kind'))}</b>: {e(r.get('summary'))}"
        + "".join(f"<div class=cite><span class=where>{e(s.get('file'))}:{e(s.get('line'))}"
                  f"</span> <code>{e(str(s.get('text'))[:EVIDENCE_CHARS])}</code></div>"
                  for s in (r.get("samples") or [])[:1])
        + "</li>" for r in records)
    return (f"<details open><summary>followed by: {len(records)} kind(s)</summary>"
            f"<ul class=consequences>{items}</ul></details>")


def _progress(f: dict[str, Any], d: Digest) -> str:
    """Members x the SeqNum each reached: members in the same state share a line (so a
    1,024-member group is a few lines), the ones behind first, with a bar for how far they
    got and their last line's time."""
    members = f.get("progress") or []

    def reached(m: dict[str, Any]) -> int | None:
        for key in ("seq", "last_enqueued", "last_completed"):
            if m.get(key) is not None:
                return int(m[key])
        return None

    top = max((reached(m) or 0 for m in members), default=0) or 1
    states: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for m in members:
        state = (bool(m.get("timed_out")), m.get("seq"), m.get("last_enqueued"),
                 m.get("last_completed"))
        states.setdefault(state, []).append(m)
    out = [(f"<details open><summary>group progress: {e(f.get('group'))} "
            f"{e(f.get('op') or '')} SeqNum {e(f.get('seq'))}, {len(members)} members"
            "</summary>"),
           ("<table class=progress><thead><tr><th>members (world rank)</th><th>timed out</th>"
            "<th>SeqNum</th><th>last enqueued</th><th>last completed</th><th>last line</th>"
            "<th>SeqNum reached</th></tr></thead><tbody>")]
    for (timed_out, seq, enqueued, completed), group in sorted(
            states.items(), key=lambda kv: (kv[0][0], len(kv[1]))):
        behind = not timed_out
        value = reached(group[0])
        width = 0.0 if value is None else 100.0 * value / top
        bar = (f'<div class="bar{" behind" if behind else ""}" style="width:{width:.1f}%">'
               "</div>") if value is not None else "<span class=bad>none reported</span>"
        ranks = ranges(sorted(int(m["world_rank"]) for m in group
                               if m.get("world_rank") is not None))
        times = sorted(str(m.get("last_line_ts")) for m in group if m.get("last_line_ts"))
        when = (times[0] if times and times[0] == times[-1] else
                f"{times[0]} to {times[-1]}" if times else "-")

        def dash(value: object) -> str:
            return e(value if value is not None else "-")

        out.append(f'<tr class="{"behind" if behind else ""}"><td>{e(ranks)} '
                   f"<span class=dim>({len(group)})</span></td>"
                   f"<td>{'yes' if timed_out else 'no'}</td><td>{dash(seq)}</td>"
                   f"<td>{dash(enqueued)}</td><td>{dash(completed)}</td>"
                   f"<td>{e(when)}</td><td class=barcell>{bar}</td></tr>")
    out.append("</tbody></table></details>")
    return "".join(out)


def _row_attributes(row: Row, index: int) -> str:
    attrs = [f'data-row="{index}"', f'data-role="{e(row.role or "unattributed")}"',
             f'data-state="{e(row.state)}"']
    for name, key in (("data-replica", "replica"), ("data-world-rank", "world_rank"),
                      ("data-tp-rank", "tp_rank"), ("data-node-rank", "node_rank"),
                      ("data-host", "host")):
        value = row.coords.get(key)
        if value is not None:
            attrs.append(f'{name}="{e(value)}"')
    if row.state in ("culprit", "crashed", "suspect"):
        attrs.append(f'data-culprit="{e(row.state)}"')
    return " ".join(attrs)


def _row_title(row: Row) -> str:
    coords = ", ".join(f"{k} {v}" for k, v in row.coords.items() if v is not None)
    parts = [row.label, STATE_TEXT.get(row.state, row.state), f"{row.lines:,} lines"]
    if coords:
        parts.append(coords)
    if row.last_line is not None:
        file, line, text = row.last_line
        parts.append(f"last line {file}:{line}: {text[:300]}")
    return " | ".join(parts)


def _lanes(d: Digest) -> str:
    out = ['<section id="lanes"><h2>Swimlanes</h2>',
           '<div class="toolbar"><button type="button" data-view="incident">incident</button>'
           '<button type="button" data-view="all">whole log</button>'
           '<button type="button" data-view="in">zoom in</button>'
           '<button type="button" data-view="out">zoom out</button>'
           '<span class="legend">' + "".join(
               f'<span class="key k-{k}">{e(k)}</span>' for k in KINDS) +
           '<span class="key first-error">first error</span></span>'
           '<span id="view-range" class="dim"></span></div>',
           ('<p class="dim">Each row: lines per time bin (darker: more; blank: silent), marks '
           "for events. Wheel or +/- to zoom, drag to pan, hover for the line.</p>"),
           ('<div id="axis-row"><span class="label"></span><canvas id="axis" height="22">'
           "</canvas></div><div id=\"rows\">")]
    for i, row in enumerate(d.rows):
        out.append(f'<div class="lane st-{e(row.state)}" {_row_attributes(row, i)}>'
                   f'<span class="label" title="{e(_row_title(row))}">{e(row.label)}</span>'
                   '<canvas height="16"></canvas></div>')
    out.append('</div><div id="tip" hidden></div></section>')
    return "".join(out)


def _grids(d: Digest, topology: Topology | None) -> str:
    if topology is None:
        return ('<section id="grids"><h2>State grids</h2><p>No topology: pass --config (or '
                "logs with a server_args line) for the grids.</p></section>")
    rows = {r.key: r for r in d.rows}
    s = topology.sizes
    out = ['<section id="grids"><h2>State grids</h2><p class="legend">' + "".join(
        f'<span class="cell st-{st}"></span>{e(STATE_TEXT[st])} ' for st in STATES) + "</p>"]
    specs = [("attention DP x attention TP", "attn_dp_rank", "attn_tp_rank"),
             ("MoE DP x MoE EP", "moe_dp_rank", "moe_ep_rank"),
             ("node x GPU", "node_rank", "gpu_id")]
    for title, ry, rx in specs:
        by_block: dict[tuple[int, int], list[Any]] = {}
        for p in topology.processes:
            block = (p.replica, p.pp_rank) if ry != "node_rank" else (0, 0)
            by_block.setdefault(block, []).append(p)
        for (replica, pp), procs in sorted(by_block.items()):
            ys = sorted({getattr(p, ry) for p in procs})
            xs = sorted({getattr(p, rx) for p in procs})
            if len(ys) * len(xs) > 4096:
                continue
            name = title
            if ry != "node_rank" and (s.replicas > 1 or s.pp > 1):
                name += f" (replica {replica}, PP {pp})"
            out.append(f'<div class="grid"><h3>{e(name)}</h3><table class="grid"><thead><tr>'
                       f"<th>{e(ry)} \\ {e(rx)}</th>" + "".join(f"<th>{x}</th>" for x in xs)
                       + "</tr></thead><tbody>")
            cells: dict[tuple[int, int], list[Any]] = {}
            for p in procs:
                cells.setdefault((getattr(p, ry), getattr(p, rx)), []).append(p)
            for y in ys:
                out.append(f"<tr><th>{y}</th>")
                for x in xs:
                    out.append("<td>")
                    for p in cells.get((y, x), []):
                        row = rows.get(("s", p.replica, p.world_rank))
                        state = row.state if row is not None else "missing"
                        coords = {c: getattr(p, c) for c in ("node_rank", "gpu_id", "replica",
                                                             "world_rank", "tp_rank",
                                                             "dp_rank", "pp_rank",
                                                             "attn_cp_rank", "moe_dp_rank",
                                                             "moe_ep_rank")}
                        tip = (f"{coords_label(coords, topology)} | {STATE_TEXT[state]} | "
                               f"attn_dp {p.attn_dp_rank} attn_tp {p.attn_tp_rank} "
                               f"moe_dp {p.moe_dp_rank} moe_ep {p.moe_ep_rank}")
                        out.append(f'<span class="cell st-{state}" data-world-rank='
                                   f'"{p.world_rank}" data-replica="{p.replica}" '
                                   f'title="{e(tip)}">{p.world_rank}</span>')
                    out.append("</td>")
                out.append("</tr>")
            out.append("</tbody></table></div>")
    out.append("</section>")
    return "".join(out)


# ---------------------------------------------------------------------------------- data


def _window(d: Digest) -> tuple[int, int]:
    """The incident on opening: the findings' times, the culprits' last lines, the waits
    before the timeouts and the first error; padded. The whole log without findings."""
    if not d.findings:
        return d.base_us, d.end_us
    moments: list[int] = []
    for f in d.findings:
        moments += [t for t in (to_us(f.get("first_ts")), to_us(f.get("last_ts")))
                    if t is not None]
    involved = {i for i, r in enumerate(d.rows) if r.findings}
    for i in involved:
        row = d.rows[i]
        if row.state in ("culprit", "crashed", "suspect") and row.last_us is not None:
            moments.append(row.last_us)
    for waiter, start, stop in wait_spans(d):
        if waiter in involved:
            moments += [start, stop]
    if d.first_error is not None:
        moments.append(d.first_error[0])
    moments = [t for t in moments if d.base_us <= t <= d.end_us]
    if not moments:
        return d.base_us, d.end_us
    low, high = min(moments), max(moments)
    pad = max((high - low) // 20, 2_000_000)
    span = d.end_us - d.base_us
    # (the view may reach a little past the log's ends, so that marks there are not on the edge)
    return max(d.base_us - span // 20, low - pad), min(d.end_us + span // 20, high + pad)


def _bins(d: Digest, low: int, high: int) -> tuple[int, list[list[int]]]:
    """Counts per row in bins of [low, high]: (bin width µs, per row run-length encoded
    counts: a negative number -k stands for k empty bins)."""
    rows = max(1, len(d.rows))
    count = max(MIN_BINS, min(MAX_BINS, CELLS // rows))
    width = max(d.bin_us, math.ceil((high - low + 1) / count))
    count = max(1, math.ceil((high - low + 1) / width))
    binned = (d.density.filter((pl.col("bin") >= low - d.bin_us) & (pl.col("bin") <= high))
              .with_columns(((pl.col("bin") - low).clip(0) // width).clip(0, count - 1)
                            .alias("i"))
              .group_by("row", "i").agg(pl.col("n").sum()).sort("row", "i"))
    dense = [[0] * count for _ in d.rows]
    for row, i, n in binned.iter_rows():
        dense[row][i] = int(n)
    return width, [_rle(r) for r in dense]


def _rle(values: list[int]) -> list[int]:
    out: list[int] = []
    zeros = 0
    for v in values:
        if v == 0:
            zeros += 1
            continue
        if zeros:
            out.append(-zeros)
            zeros = 0
        out.append(v)
    if zeros:
        out.append(-zeros)
    return out


def _marks(d: Digest) -> list[list[Any]]:
    """[row, t, kind, file:line, text, chars, n]: every cited line, the rest thinned evenly per
    row and kind to stay within MARKS (and the last of each row and kind)."""
    marks = d.marks
    if marks.height == 0:
        return []
    per = max(1, MARKS // max(1, marks.select(pl.struct("row", "kind").n_unique()).item()))
    marks = marks.with_columns(pl.int_range(pl.len()).over("row", "kind").alias("_i"),
                               pl.len().over("row", "kind").alias("_n"))
    step = (pl.col("_n") / per).ceil().cast(pl.Int64).clip(1)
    kept = marks.filter((pl.col("kind") == "evidence") | (pl.col("_i") % step == 0)
                        | (pl.col("_i") == pl.col("_n") - 1))
    kinds = {k: i for i, k in enumerate(KINDS)}
    return [[int(row), int(t) - d.base_us, kinds[kind], f"{file}:{line}",
             inert(text[:MARK_CHARS]), int(chars) if (chars or 0) > MARK_CHARS else 0, int(n)]
            for row, t, kind, file, line, text, chars, n in kept.select(
                "row", "t", "kind", "file", "line", "text", "chars", "n").iter_rows()]


def _parts(us: int) -> list[int]:
    from datetime import datetime, timedelta

    t = datetime(1970, 1, 1) + timedelta(microseconds=us)
    return [t.year, t.month, t.day, t.hour, t.minute, t.second, t.microsecond // 1000]


def _data(d: Digest, window: tuple[int, int]) -> dict[str, Any]:
    base = d.base_us
    all_width, all_bins = _bins(d, d.base_us, d.end_us)
    detail_width, detail_bins = _bins(d, window[0], window[1])
    findings = []
    for f in d.findings:
        t0 = to_us(f.get("first_ts"))
        t1 = to_us(f.get("last_ts"))
        findings.append({"t0": None if t0 is None else t0 - base,
                         "t1": None if t1 is None else t1 - base,
                         "rows": rows_of(d, [*(f.get("processes") or []),
                                             *(f.get("waiting") or [])])})
    first_error = None
    if d.first_error is not None:
        t, file, line, text = d.first_error
        first_error = [t - base, f"{file}:{line}", inert(text[:MARK_CHARS])]
    return {
        "start": d.iso(base), "startParts": _parts(base), "span": d.end_us - base, "kinds": list(KINDS),
        "all": {"t0": 0, "width": all_width, "rows": all_bins},
        "detail": {"t0": window[0] - base, "width": detail_width, "rows": detail_bins},
        "window": [window[0] - base, window[1] - base],
        "marks": _marks(d), "firstError": first_error, "findings": findings,
        "states": [r.state for r in d.rows],
        "last": [None if r.last_line is None or r.last_us is None else
                 [r.last_us - base, f"{r.last_line[0]}:{r.last_line[1]}",
                  inert(r.last_line[2][:MARK_CHARS])] for r in d.rows],
    }


_HEAD = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="referrer" content="no-referrer">
<title>logcorr report</title>
<style>{style}</style></head><body>
"""

_STYLE = """
:root{--healthy:#4c9a6a;--waiting:#d9a400;--unknown:#9a9a9a;--suspect:#e67e22;
--culprit:#d62728;--crashed:#7b1010;--missing:#c8c8c8;--label:260px}
body{font:13px/1.4 system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 16px 40px;color:#1d1d1f;
background:#fff}
h1{font-size:20px;margin:14px 0 6px}h2{font-size:16px;margin:22px 0 6px;border-bottom:1px solid #ddd}
h3{font-size:14px;margin:6px 0}
.dim{color:#777}.bad{color:#b00}
dl.coverage{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:0}
dl.coverage dt{font-weight:600}dl.coverage dd{margin:0}
.finding{border-left:4px solid #999;padding:4px 12px;margin:8px 0;background:#fafafa}
.finding.sev-error{border-color:var(--culprit)}.finding.sev-warning{border-color:var(--suspect)}
.finding .sev{text-transform:uppercase;font-size:11px;padding:1px 5px;border-radius:3px;
background:#555;color:#fff}
.finding.sev-error .sev{background:var(--culprit)}.finding.sev-warning .sev{background:var(--suspect)}
.summary{font-weight:600;margin:4px 0}
table{border-collapse:collapse;margin:4px 0}th,td{padding:1px 6px;text-align:left;
border-bottom:1px solid #eee;font-variant-numeric:tabular-nums}
table.procs td:first-child{white-space:nowrap}
table.progress tr.behind td{background:#fde8e8;font-weight:600}
td.barcell{width:220px}.bar{height:8px;background:var(--waiting);border-radius:2px}
.bar.behind{background:var(--culprit)}
.evidence{max-height:200px;overflow:auto;background:#fff;border:1px solid #eee;padding:4px}
.cite{font:12px/1.35 ui-monospace,Menlo,Consolas,monospace;white-space:pre-wrap;
word-break:break-all}.cite .where{color:#555}
code{font:12px ui-monospace,Menlo,Consolas,monospace}
.toolbar{display:flex;gap:6px;align-items:center;flex-wrap:wrap;margin:4px 0}
.legend .key{display:inline-block;margin-right:8px;font-size:12px}
.legend .key::before{content:"";display:inline-block;width:3px;height:11px;margin-right:3px;
vertical-align:-1px;background:currentColor}
.k-evidence{color:#111}.k-watchdog{color:#ff7f0e}.k-error{color:#d62728}.k-pyspy{color:#9467bd}
.k-nccl-init{color:#1f77b4}.k-phase{color:#2ca02c}.k-warning{color:#c9a800}
.first-error{color:#d62728}
#axis-row,.lane{display:flex;align-items:center}
.label{flex:0 0 var(--label);width:var(--label);overflow:hidden;white-space:nowrap;
text-overflow:ellipsis;font:11px ui-monospace,Menlo,Consolas,monospace;padding-right:6px;
box-sizing:border-box}
.lane canvas,#axis{flex:1 1 auto;width:100%;min-width:0;display:block}
.lane canvas{height:16px;background:#f4f4f4;cursor:crosshair}
#axis{height:22px}
.lane{border-bottom:1px solid #fff}
.lane.st-culprit .label,.lane.st-crashed .label{color:#fff;background:var(--culprit);font-weight:700}
.lane.st-crashed .label{background:var(--crashed)}
.lane.st-suspect .label{background:var(--suspect);color:#fff}
.lane.st-waiting .label{background:#fff3c4}.lane.st-missing .label{color:#999;
text-decoration:line-through}
.lane.focus .label{outline:2px solid #1f77b4}
#tip{position:fixed;z-index:10;max-width:720px;background:#222;color:#fff;padding:6px 8px;
border-radius:4px;font:12px/1.35 ui-monospace,Menlo,Consolas,monospace;white-space:pre-wrap;
word-break:break-all;pointer-events:none}
div.grid{display:inline-block;vertical-align:top;margin:0 18px 12px 0}
table.grid td{padding:1px;border:1px solid #eee}
.cell{display:inline-block;min-width:18px;height:18px;line-height:18px;text-align:center;
font-size:10px;color:#fff;border-radius:2px;margin:1px;background:var(--healthy)}
.cell.st-waiting{background:var(--waiting)}.cell.st-unknown{background:var(--unknown)}
.cell.st-suspect{background:var(--suspect)}.cell.st-culprit{background:var(--culprit)}
.cell.st-crashed{background:var(--crashed)}.cell.st-missing{background:var(--missing);color:#555}
p.legend .cell{min-width:12px;height:12px;vertical-align:-2px}
button{font:12px system-ui,sans-serif}
"""

_SCRIPT = r"""
(function () {
  "use strict";
  var D = JSON.parse(document.getElementById("logcorr-data").textContent);
  var KIND_COLORS = {"evidence": "#111111", "watchdog": "#ff7f0e", "error": "#d62728",
    "pyspy": "#9467bd", "nccl-init": "#1f77b4", "phase": "#2ca02c", "warning": "#c9a800"};
  var STATE_COLORS = {"healthy": [76, 154, 106], "waiting": [196, 146, 0],
    "unknown": [120, 120, 120], "suspect": [230, 126, 34], "culprit": [214, 39, 40],
    "crashed": [123, 16, 16], "missing": [150, 150, 150]};
  var lanes = Array.prototype.slice.call(document.querySelectorAll("#rows .lane"));
  var canvases = lanes.map(function (l) { return l.querySelector("canvas"); });
  var axis = document.getElementById("axis");
  var tip = document.getElementById("tip");
  var range = document.getElementById("view-range");
  var P = D.startParts;
  var startMs = new Date(P[0], P[1] - 1, P[2], P[3], P[4], P[5], P[6]).getTime();
  var span = Math.max(1, D.span);
  var view = [D.window[0], D.window[1]];
  if (view[1] <= view[0]) { view = [0, span]; }

  function decode(level) {
    return level.rows.map(function (rle) {
      var out = [];
      for (var i = 0; i < rle.length; i++) {
        var v = rle[i];
        if (v < 0) { for (var k = 0; k < -v; k++) { out.push(0); } } else { out.push(v); }
      }
      return out;
    });
  }
  var levels = [D.all, D.detail].map(function (level) {
    var rows = decode(level);
    return {t0: level.t0, width: level.width, rows: rows, max: rows.map(function (r) {
      var m = 0; r.forEach(function (v) { if (v > m) { m = v; } }); return m;
    })};
  });
  var marksByRow = lanes.map(function () { return []; });
  D.marks.forEach(function (m) { if (marksByRow[m[0]]) { marksByRow[m[0]].push(m); } });

  function fmt(t) {
    var d = new Date(startMs + t / 1000);
    function p(n, w) { var s = String(n); while (s.length < w) { s = "0" + s; } return s; }
    return d.getFullYear() + "-" + p(d.getMonth() + 1, 2) + "-" + p(d.getDate(), 2) + " " +
      p(d.getHours(), 2) + ":" + p(d.getMinutes(), 2) + ":" + p(d.getSeconds(), 2) + "." +
      p(d.getMilliseconds(), 3);
  }
  function level() {
    var detail = levels[1];
    var end = detail.t0 + detail.width * (detail.rows.length ? detail.rows[0].length : 0);
    if (view[0] >= detail.t0 && view[1] <= end && detail.width < levels[0].width) {
      return detail;
    }
    return levels[0];
  }
  var laneWidth = 0;  // every lane canvas has the same width: read once per draw (no reflows)
  function size(c, width) {
    var w = Math.max(10, width || c.clientWidth), h = c === axis ? 22 : 16;
    var r = window.devicePixelRatio || 1;
    if (c.width !== Math.round(w * r)) { c.width = Math.round(w * r); }
    if (c.height !== Math.round(h * r)) { c.height = Math.round(h * r); }
    var ctx = c.getContext("2d");
    ctx.setTransform(r, 0, 0, r, 0, 0);
    return {ctx: ctx, w: w, h: h};
  }
  function x(t, w) { return (t - view[0]) / (view[1] - view[0]) * w; }
  function drawAxis() {
    var s = size(axis), ctx = s.ctx;
    ctx.clearRect(0, 0, s.w, s.h);
    ctx.fillStyle = "#555"; ctx.font = "11px sans-serif";
    var len = view[1] - view[0];
    var steps = [1e3, 2e3, 5e3, 1e4, 2e4, 5e4, 1e5, 2e5, 5e5, 1e6, 2e6, 5e6, 1e7, 3e7, 6e7,
                 1.2e8, 3e8, 6e8, 1.8e9, 3.6e9, 7.2e9, 2.16e10, 8.64e10, 1.728e11, 6.048e11];
    var step = steps[steps.length - 1];
    for (var i = 0; i < steps.length; i++) { if (len / steps[i] <= s.w / 110) { step = steps[i]; break; } }
    var first = Math.ceil((view[0] + startMs * 1000 % step) / step) * step - startMs * 1000 % step;
    for (var t = first; t <= view[1]; t += step) {
      var px = x(t, s.w);
      ctx.fillRect(px, 14, 1, 8);
      var label = fmt(t).slice(11, step < 1e6 ? 23 : 19);
      if (step >= 8.64e10) { label = fmt(t).slice(0, 10); }
      ctx.fillText(label, Math.min(px + 2, s.w - 60), 11);
    }
    range.textContent = " " + fmt(view[0]) + " to " + fmt(view[1]);
  }
  function drawRow(i) {
    var s = size(canvases[i], laneWidth), ctx = s.ctx;
    ctx.clearRect(0, 0, s.w, s.h);
    var lv = level(), counts = lv.rows[i] || [], max = Math.max(1, lv.max[i] || 0);
    var rgb = STATE_COLORS[D.states[i]] || STATE_COLORS.healthy;
    var lmax = Math.log(1 + max);
    var firstBin = Math.max(0, Math.floor((view[0] - lv.t0) / lv.width));
    var lastBin = Math.min(counts.length - 1, Math.floor((view[1] - lv.t0) / lv.width));
    for (var b = firstBin; b <= lastBin; b++) {
      var n = counts[b];
      if (!n) { continue; }
      var x0 = x(lv.t0 + b * lv.width, s.w), x1 = x(lv.t0 + (b + 1) * lv.width, s.w);
      var a = 0.25 + 0.75 * Math.log(1 + n) / lmax;
      ctx.fillStyle = "rgba(" + rgb[0] + "," + rgb[1] + "," + rgb[2] + "," + a.toFixed(3) + ")";
      ctx.fillRect(x0, 3, Math.max(1, x1 - x0), s.h - 6);
    }
    marksByRow[i].forEach(function (m) {
      if (m[1] < view[0] || m[1] > view[1]) { return; }
      var px = Math.round(x(m[1], s.w));
      ctx.fillStyle = KIND_COLORS[D.kinds[m[2]]] || "#000";
      if (D.kinds[m[2]] === "evidence") {
        ctx.beginPath(); ctx.moveTo(px, 1); ctx.lineTo(px + 4, s.h / 2); ctx.lineTo(px, s.h - 1);
        ctx.lineTo(px - 4, s.h / 2); ctx.closePath(); ctx.fill();
      } else {
        ctx.fillRect(px - 1, 0, 2, s.h);
      }
    });
    if (D.firstError) {
      ctx.fillStyle = "rgba(214,39,40,0.9)";
      ctx.fillRect(Math.round(x(D.firstError[0], s.w)), 0, 1, s.h);
    }
  }
  var pending = false;
  // only the lanes on screen (and near it) are drawn, now; the others when they scroll into
  // view (the positions are all read before anything is drawn: one layout)
  var observer = "IntersectionObserver" in window ? new IntersectionObserver(function (seen) {
    seen.forEach(function (entry) {
      var i = Number(entry.target.parentNode.getAttribute("data-row"));
      visible[i] = entry.isIntersecting;
      if (visible[i]) {
        if (!laneWidth) { laneWidth = canvases[0].clientWidth; }
        drawRow(i);
      }
    });
  }, {rootMargin: "400px 0px"}) : null;
  var visible = canvases.map(function (c) {
    var r = c.getBoundingClientRect();
    return !observer || (r.bottom > -400 && r.top < window.innerHeight + 400);
  });
  if (observer) { canvases.forEach(function (c) { observer.observe(c); }); }
  function drawAll() {
    laneWidth = canvases.length ? canvases[0].clientWidth : 0;
    drawAxis();
    for (var i = 0; i < canvases.length; i++) { if (visible[i]) { drawRow(i); } }
  }
  function draw() {
    if (pending) { return; }
    pending = true;
    window.requestAnimationFrame(function () { pending = false; drawAll(); });
  }
  function setView(a, b) {
    var len = Math.max(1000, b - a);
    a = Math.max(-len * 0.05, a); b = a + len;
    if (b > span * 1.05) { b = span * 1.05; a = Math.max(-len * 0.05, b - len); }
    view = [a, b];
    draw();
  }
  function zoom(factor, at) {
    var len = view[1] - view[0];
    var c = at === undefined ? (view[0] + view[1]) / 2 : at;
    var k = (c - view[0]) / len;
    var n = len * factor;
    setView(c - k * n, c - k * n + n);
  }
  document.querySelectorAll(".toolbar button").forEach(function (btn) {
    btn.addEventListener("click", function () {
      var v = btn.getAttribute("data-view");
      if (v === "incident") { setView(D.window[0], D.window[1]); }
      else if (v === "all") { setView(0, span); }
      else if (v === "in") { zoom(0.5); }
      else { zoom(2); }
    });
  });
  var rowsBox = document.getElementById("rows");
  rowsBox.addEventListener("wheel", function (ev) {
    if (!ev.target || ev.target.tagName !== "CANVAS") { return; }
    ev.preventDefault();
    var r = ev.target.getBoundingClientRect();
    var at = view[0] + (ev.clientX - r.left) / r.width * (view[1] - view[0]);
    zoom(ev.deltaY > 0 ? 1.25 : 0.8, at);
  }, {passive: false});
  var drag = null;
  rowsBox.addEventListener("mousedown", function (ev) {
    if (ev.target && ev.target.tagName === "CANVAS") {
      drag = {x: ev.clientX, view: view.slice(), w: ev.target.getBoundingClientRect().width};
    }
  });
  window.addEventListener("mouseup", function () { drag = null; });
  window.addEventListener("mousemove", function (ev) {
    if (!drag) { return; }
    var dt = (ev.clientX - drag.x) / drag.w * (drag.view[1] - drag.view[0]);
    setView(drag.view[0] - dt, drag.view[1] - dt);
  });
  function showTip(ev, lines) {
    tip.textContent = lines.join("\n");
    tip.hidden = false;
    var left = Math.min(ev.clientX + 12, window.innerWidth - 740);
    tip.style.left = Math.max(4, left) + "px";
    tip.style.top = (ev.clientY + 14) + "px";
  }
  canvases.forEach(function (c, i) {
    c.addEventListener("mousemove", function (ev) {
      if (drag) { tip.hidden = true; return; }
      var r = c.getBoundingClientRect();
      var px = ev.clientX - r.left;
      var t = view[0] + px / r.width * (view[1] - view[0]);
      var best = null, bestD = 5;
      marksByRow[i].forEach(function (m) {
        var d = Math.abs(x(m[1], r.width) - px);
        if (d < bestD) { best = m; bestD = d; }
      });
      var label = lanes[i].querySelector(".label").textContent;
      if (best) {
        var more = best[5] ? "\n(" + best[5] + " characters, cut)" : "";
        var many = best[6] > 1 ? "\n(" + best[6] + " " + D.kinds[best[2]] +
          " lines in this bin; the first shown)" : "";
        showTip(ev, [label + "  " + D.kinds[best[2]] + "  " + fmt(best[1]), best[3],
                     best[4] + more + many]);
        return;
      }
      var lv = level(), b = Math.floor((t - lv.t0) / lv.width);
      var n = (lv.rows[i] || [])[b] || 0;
      var lines = [label + "  " + fmt(lv.t0 + b * lv.width) + " +" +
                   (lv.width / 1e6).toPrecision(3) + " s: " + n + " line(s)"];
      var last = D.last[i];
      if (last && t > last[0]) {
        lines.push("silent since " + fmt(last[0]) + "; last line " + last[1] + ":", last[2]);
      }
      showTip(ev, lines);
    });
    c.addEventListener("mouseleave", function () { tip.hidden = true; });
  });
  document.querySelectorAll("a.goto").forEach(function (a) {
    a.addEventListener("click", function () {
      var f = D.findings[Number(a.getAttribute("data-finding"))];
      if (!f) { return; }
      lanes.forEach(function (l) { l.classList.remove("focus"); });
      f.rows.forEach(function (r) { if (lanes[r]) { lanes[r].classList.add("focus"); } });
      var t0 = f.t0 === null ? D.window[0] : f.t0, t1 = f.t1 === null ? D.window[1] : f.t1;
      var a0 = Math.min(t0, D.window[0]), a1 = Math.max(t1, D.window[1]);
      var pad = Math.max((a1 - a0) * 0.05, 1e6);
      setView(a0 - pad, a1 + pad);
    });
  });
  window.addEventListener("resize", draw);
  drawAll();
  document.documentElement.setAttribute("data-rendered", "1");
  document.documentElement.setAttribute("data-render-ms", String(Math.round(performance.now())));
}());
"""
