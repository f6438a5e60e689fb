"""`analyze --html`: the report rendered by headless Chromium on a generated multi-node hang.

Checked in the browser: the script runs without console errors, the page makes no network
request (Chromium's net log: no request started by the page), one row per process with its
coordinates as data attributes, the culprit row marked, a screenshot that is not blank; and log
lines written to attack the page (script tags, event handlers, `javascript:` links, a line that
closes the data block) stay text.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

from logcorr.api import analyze
from logcorr.cli import main
from logcorr.digest import Digest, Row
from logcorr.report_html import render

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
# .ci/run installs Chromium and sets LOGCORR_REQUIRE_BROWSER: there, a missing browser fails
REQUIRED = bool(os.environ.get("LOGCORR_REQUIRE_BROWSER"))
needs_chromium = pytest.mark.skipif(CHROMIUM is None and not REQUIRED,
                                    reason="chromium is not installed (.ci/run installs it)")
CULPRIT = (0, 21)
CONFIG = {"tp_size": 32, "dp_size": 8, "enable_dp_attention": True, "nnodes": 4,
          "moe_a2a_backend": "deepep", "model_path": "deepseek-ai/DeepSeek-V3"}


def chromium(url: str, tmp: Path, *extra: str) -> tuple[str, list[str], list[str]]:
    """Load `url` headless: (the DOM after scripts ran, console messages, URLs the page
    requested)."""
    assert CHROMIUM is not None
    net = tmp / f"net-{len(list(tmp.glob('net-*')))}.json"
    done = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={tmp}/prof",
         "--disable-background-networking", "--disable-component-update", "--no-first-run",
         "--disable-sync", "--disable-extensions", "--enable-logging=stderr", "--v=0",
         f"--log-net-log={net}", *extra, url],
        check=False, capture_output=True, text=True, timeout=120)
    console = [line for line in done.stderr.splitlines() if ":CONSOLE" in line]
    return done.stdout, console, page_requests(net)


def page_requests(net: Path) -> list[str]:
    """URLs of network requests a page started (Chromium's own background requests, which
    have no initiating origin, are not the page's)."""
    log = json.loads(net.read_text())
    types = {v: k for k, v in log["constants"]["logEventTypes"].items()}
    urls = []
    for event in log["events"]:
        params = event.get("params") or {}
        if (types.get(event["type"]) == "URL_REQUEST_START_JOB" and "url" in params
                and params.get("initiator") != "not an origin"):
            urls.append(params["url"])
    return urls


class Elements(HTMLParser):
    """Every start tag with its attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def elements(dom: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = Elements()
    parser.feed(dom)
    return parser.tags


@pytest.fixture(scope="module")
def hang(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A 4-node TP32 (attention DP8, DeepEP) deployment whose world rank 21 hangs."""
    out = tmp_path_factory.mktemp("hang")
    config = out / "config.json"
    config.write_text(json.dumps(CONFIG))
    subprocess.run([sys.executable, str(ROOT / "benchmarks" / "generate.py"), str(out),
                    "--config", str(config), "--incident", "hang", "--steps", "30",
                    "--culprit", f"{CULPRIT[0]}:{CULPRIT[1]}"], check=True)
    html = out / "report.html"
    assert main([
        "analyze", str(out / "logs"), "--config", str(config), "--html", str(html),
        "--format", "jsonl", "-o", str(out / "timeline.jsonl")]) == 0
    return out


@needs_chromium
def test_report_in_browser(hang: Path, tmp_path: Path) -> None:
    dom, console, requests = chromium((hang / "report.html").as_uri(), tmp_path, "--dump-dom")
    assert console == []
    assert requests == []
    tags = elements(dom)
    html_attrs = next(a for t, a in tags if t == "html")
    assert html_attrs.get("data-rendered") == "1"  # the script ran to its end
    lanes = [a for t, a in tags if t == "div" and "lane" in (a.get("class") or "").split()]
    schedulers = [a for a in lanes if a.get("data-role") == "scheduler"]
    assert len(schedulers) == 32
    keys = [(int(a["data-replica"] or -1), int(a["data-world-rank"] or -1)) for a in schedulers]
    assert sorted(keys) == [(0, w) for w in range(32)]
    # topology order: attention DP rank, then TP rank (world rank here)
    assert keys == sorted(keys)
    culprits = [a for a in lanes if "data-culprit" in a]
    assert [(int(a["data-replica"] or -1), int(a["data-world-rank"] or -1))
            for a in culprits] == [CULPRIT]
    assert {a.get("data-role") for a in lanes} >= {"scheduler", "main", "unattributed"}
    findings = [a for t, a in tags if t == "article"]
    assert [a.get("data-kind") for a in findings] == ["collective-hang"]
    # the state grid marks the culprit too
    cells = [a for t, a in tags if t == "span" and "cell" in (a.get("class") or "").split()
             and a.get("data-world-rank") == str(CULPRIT[1])]
    assert cells and all("st-culprit" in (a.get("class") or "") for a in cells)


@needs_chromium
def test_screenshot_not_blank(hang: Path, tmp_path: Path) -> None:
    """The page as Chromium paints it: many colours, the culprit's red, and the marks the
    script drew on the swimlanes (watchdog timeouts, orange)."""
    shot = tmp_path / "report.png"
    chromium((hang / "report.html").as_uri(), tmp_path, "--hide-scrollbars",
             "--window-size=1200,1500", f"--screenshot={shot}")
    stats = pixel_stats(shot, tmp_path)
    assert stats["width"] == 1200 and stats["height"] == 1500
    assert stats["colors"] > 100  # text, bars, marks: not one flat colour
    assert stats["white"] < 0.9 * stats["width"] * stats["height"]
    assert stats["red"] > 500  # the culprit's row label, the ERROR badge
    # the watchdog marks the script drew on the lanes' canvases (about 370 px; the legend alone,
    # with the lanes left blank, is about 60)
    assert stats["orange"] > 200


def pixel_stats(png: Path, tmp: Path) -> dict[str, int]:
    """Count colours of a PNG, decoded by Chromium itself (a data: image drawn on a canvas)."""
    import base64

    page = tmp / "pixels.html"
    data = base64.b64encode(png.read_bytes()).decode()
    page.write_text(
        f'<!doctype html><img id="i" src="data:image/png;base64,{data}"><pre id="out"></pre>'
        "<script>window.onload = function () {"
        " var img = document.getElementById('i'), c = document.createElement('canvas');"
        " c.width = img.naturalWidth; c.height = img.naturalHeight;"
        " var x = c.getContext('2d'); x.drawImage(img, 0, 0);"
        " var d = x.getImageData(0, 0, c.width, c.height).data, seen = new Set();"
        " var s = {width: c.width, height: c.height, white: 0, red: 0, orange: 0};"
        " function near(i, r, g, b) { return Math.abs(d[i] - r) < 10 &&"
        "   Math.abs(d[i + 1] - g) < 10 && Math.abs(d[i + 2] - b) < 10; }"
        " for (var i = 0; i < d.length; i += 4) {"
        "  seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);"
        "  if (d[i] === 255 && d[i + 1] === 255 && d[i + 2] === 255) { s.white++; }"
        "  if (near(i, 214, 39, 40)) { s.red++; }"
        "  if (near(i, 255, 127, 14)) { s.orange++; }"
        " }"
        " s.colors = seen.size;"
        " document.getElementById('out').textContent = JSON.stringify(s); };</script>")
    dom, console, _ = chromium(page.as_uri(), tmp, "--dump-dom")
    assert console == []
    out = dom.split('<pre id="out">', 1)[1].split("</pre>", 1)[0]
    return dict(json.loads(out))


def test_negative_control_is_detected(tmp_path: Path) -> None:
    """The console and network checks above do see a page that errs and fetches."""
    if CHROMIUM is None and not REQUIRED:
        pytest.skip("chromium is not installed (.ci/run installs it)")
    page = tmp_path / "bad.html"
    page.write_text('<!doctype html><img src="http://example.invalid/x.png">'
                    "<script>missingFunction()</script>")
    _, console, requests = chromium(page.as_uri(), tmp_path, "--dump-dom")
    assert any("missingFunction" in line for line in console)
    assert requests == ["http://example.invalid/x.png"]


HOSTILE = [
    "<script>document.documentElement.setAttribute('data-pwned','script')</script>",
    "<img src=x onerror=\"document.documentElement.setAttribute('data-pwned','img')\">",
    "<a href=\"javascript:document.documentElement.setAttribute('data-pwned','a')\">x</a>",
    "</script><script>document.documentElement.setAttribute('data-pwned','json')</script>",
    "<svg onload=\"document.title='pwned'\"></svg> \u202eevil\u202c <!-- -->",
]


@needs_chromium
def test_hostile_lines_stay_text(tmp_path: Path) -> None:
    """A crash whose lines carry markup: it appears as text in the findings, the marks and the
    row tooltips, and none of it runs."""
    case = tmp_path / "case"
    shutil.copytree(ROOT / "fixtures" / "analyze" / "tp8-crash-per-rank", case)
    log = case / "logs" / "rank5.log"
    lines = log.read_text().splitlines()
    crash = next(i for i, line in enumerate(lines) if "RuntimeError: CUDA error" in line)
    lines[crash] += " " + " ".join(HOSTILE)
    lines.append(f"[2026-11-29 10:01:10 TP5] WARNING {HOSTILE[1]} {HOSTILE[3]}")
    log.write_text("\n".join(lines) + "\n")
    html = tmp_path / "report.html"
    assert main(["analyze", str(case / "logs"), "--config", str(case / "args.json"),
                 "--html", str(html), "--format", "jsonl", "-o", str(tmp_path / "t.jsonl")]) == 0
    source = html.read_text()
    assert source.count("<script") == 2  # the data block and the page's own script
    assert "\u202e" not in source and "\\u202e" in source
    dom, console, requests = chromium(html.as_uri(), tmp_path, "--dump-dom")
    assert console == [] and requests == []
    tags = elements(dom)
    root = next(a for t, a in tags if t == "html")
    assert root.get("data-rendered") == "1" and "data-pwned" not in root
    assert [t for t, _ in tags if t in ("img", "svg", "iframe", "object")] == []
    for tag, attrs in tags:
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
        for name in ("href", "src", "action"):
            value = attrs.get(name) or ""
            assert not value or value.startswith("#"), (tag, attrs)
    assert "<title>logcorr report</title>" in dom
    # shown as text: in the evidence of the crash finding
    assert "&lt;script&gt;document.documentElement.setAttribute" in dom
    assert "&lt;img src=x onerror=" in dom


def test_size_stays_bounded_at_1024_processes() -> None:
    """1,024 processes with a dense second-by-second day of lines and thousands of marks per
    row (with long lines) render in well under 10 MB."""
    import polars as pl

    rows = [Row(("s", 0, w), f"w{w}", "scheduler", {"replica": 0, "world_rank": w},
                state="culprit" if w == 7 else "waiting", lines=10_000, first_us=0,
                last_us=86_400_000_000, last_line=("f.log", 1, "x" * 5_000)) for w in range(1024)]
    bins = 2_000
    width = 86_400_000_000 // bins
    density = pl.DataFrame({"row": pl.Series(range(1024), dtype=pl.UInt32).repeat_by(bins)
                            .explode(),
                            "bin": pl.Series([i * width for i in range(bins)] * 1024),
                            "n": pl.Series([5_000] * (1024 * bins), dtype=pl.UInt32)})
    per_row = 60
    count = 1024 * per_row
    kinds = ["warning", "error", "watchdog", "nccl-init", "phase", "pyspy"]
    marks = pl.DataFrame({
        "row": pl.Series([i // per_row for i in range(count)], dtype=pl.UInt32),
        "kind": [kinds[i % len(kinds)] for i in range(count)],
        "bin": [(i % per_row) * width for i in range(count)],
        "t": [(i % per_row) * width for i in range(count)],
        "file": ["node0.log"] * count,
        "line": pl.Series([i + 1 for i in range(count)], dtype=pl.UInt32),
        "text": ["<b>" + "y" * 1_000] * count,
        "chars": pl.Series([1_003] * count, dtype=pl.UInt32),
        "n": pl.Series([1] * count, dtype=pl.UInt32)})
    empty = pl.DataFrame(schema={"row": pl.UInt32, "t": pl.Int64, "timed": pl.Boolean,
                                 "file": pl.String, "line": pl.UInt32, "text": pl.String})
    metrics = pl.DataFrame(schema={"row": pl.UInt32, "bin": pl.Int64, "running": pl.Int64,
                                   "tokens": pl.Int64, "usage": pl.Float64})
    digest = Digest(rows, 0, 86_400_000_000, 1_000, density, marks, empty, metrics, {}, [],
                    None, 10_000_000, 10_000_000)

    class Stub:
        topology = None
        topology_source = None
        contradictions: tuple[()] = ()
        warnings: tuple[()] = ()

        def coverage(self) -> dict[str, int]:
            return {"expected_processes": 1024, "processes_seen": 1024, "files": 128,
                    "lines": 10_000_000, "lines_attributed": 9_000_000}

        def evidence_counts(self) -> dict[str, int]:
            return {"prefix": 9_000_000}

        def unattributed_reasons(self) -> dict[str, int]:
            return {"not a scheduler": 1_000_000}

    page = render(Stub(), digest)
    assert len(page.encode()) < 10_000_000
    assert page.count('class="lane ') == 1024
    assert "&lt;b&gt;" in page or "\\u003cb\\u003e" in page


def test_report_from_api(tmp_path: Path) -> None:
    """Without a browser: the page for a fixture names the culprit row and every process."""
    case = ROOT / "fixtures" / "analyze" / "tp16-dpattn8-ep-hang-per-node"
    from logcorr.digest import digest

    analysis = analyze([case / "logs"], config=case / "args.json")
    page = render(analysis, digest(analysis))
    tags = elements(page)
    lanes = [a for t, a in tags if t == "div" and "lane" in (a.get("class") or "").split()]
    assert len([a for a in lanes if a.get("data-role") == "scheduler"]) == 16
    assert [a.get("data-world-rank") for a in lanes if "data-culprit" in a] == ["9"]
    assert "Content-Security-Policy" in page and "default-src 'none'" in page


def test_untimed_lines_are_counted() -> None:
    """Lines of a set that prints no time at all (NCCL INFO only) are not drawn, but their
    processes are not called missing: they are counted, with their last line."""
    import polars as pl

    from logcorr.config import LaunchConfig
    from logcorr.digest import COLUMNS, _Gather
    from logcorr.model import TIMELINE_SCHEMA
    from logcorr.topology import build_topology

    texts = [f"gpu-node-0:{100 + w}:{100 + w} [{w}] NCCL INFO comm 0x{w}a rank {w} nranks 2 "
             "cudaDev 0 busId 1 commId 0x7 - Init START" for w in (0, 1)]
    batch = pl.DataFrame({"file": ["node0.log"] * 2, "line": [1, 2], "part": [0, 0],
                          "ts": [None, None], "source": ["nccl"] * 2, "role": ["scheduler"] * 2,
                          "host": ["gpu-node-0"] * 2, "pid": [100, 101], "replica": [0, 0],
                          "world_rank": [0, 1], "tp_rank": [0, 1], "text": texts},
                         schema_overrides={c: TIMELINE_SCHEMA[c] for c in (
                             "line", "part", "ts", "pid", "replica", "world_rank", "tp_rank")})
    batch = batch.with_columns(pl.lit(None, TIMELINE_SCHEMA[c]).alias(c)
                               for c in COLUMNS if c not in batch.columns).select(COLUMNS)
    gather = _Gather(set())
    gather.add(batch)
    digest = gather.finish(build_topology(LaunchConfig(tp_size=2)), [])
    schedulers = [r for r in digest.rows if r.role == "scheduler"]
    assert [(r.lines, r.state) for r in schedulers] == [(1, "healthy"), (1, "healthy")]
    assert schedulers[1].last_line == ("node0.log", 2, texts[1])
    assert digest.density.height == 0 and digest.lines == 2
