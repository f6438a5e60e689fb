"""Regenerate docs/report.png: the HTML report of the README's quick-start fixture, as headless
Chromium paints it.

    python tools/report_screenshot.py [--width 1280] [--height 1500]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from logcorr.cli import main as logcorr  # noqa: E402

CASE = Path("fixtures") / "analyze" / "tp16-dpattn8-ep-hang-per-node"  # (as the README runs it)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=1500)
    parser.add_argument("-o", "--output", type=Path, default=ROOT / "docs" / "report.png")
    args = parser.parse_args()
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if browser is None:
        sys.exit("report_screenshot: chromium is not installed")
    os.chdir(ROOT)
    with tempfile.TemporaryDirectory() as tmp:
        page = Path(tmp) / "report.html"
        code = logcorr(["analyze", str(CASE / "logs"), "--config", str(CASE / "args.json"),
                        "--html", str(page), "--format", "jsonl", "-o", str(Path(tmp) / "t.jsonl")])
        if code != 0:
            sys.exit(code)
        subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                        "--hide-scrollbars", f"--user-data-dir={tmp}/profile",
                        f"--window-size={args.width},{args.height}",
                        f"--screenshot={args.output.resolve()}", page.as_uri()],
                       check=True, capture_output=True)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
