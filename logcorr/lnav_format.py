"""An lnav format for the `analyze --format jsonl` timeline (`logcorr lnav-format`).

With it, lnav reads logcorr's jsonl as a log: the view shows each line's time, file:line and
text; every column is a field of the `logcorr_jsonl` SQL table (`SELECT ... WHERE tp_rank = 3`,
`:filter-expr :world_rank = 9`), and the coordinates can be shown under each line with
`:show-fields tp_rank world_rank`. The `order` column is left out of the table (an SQL keyword;
lnav's own order is the timeline's, by time). lnav needs a time on every line: the lines that print none
(NCCL INFO, the body of a traceback) are not shown there.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from logcorr.model import TIMELINE_SCHEMA

NAME = "logcorr_jsonl"
FILE_NAME = f"{NAME}.json"
_INTEGER = {"line", "part", "order", "node_rank", "pid", "tid", "device_id", "gpu_id", "replica",
            "world_rank", "dp_rank", "pp_rank", "tp_rank", "attn_dp_rank", "attn_cp_rank",
            "attn_tp_rank", "moe_dp_rank", "moe_ep_rank", "moe_tp_rank"}
_IDENTIFIERS = {"file", "source", "role", "host", "node_rank", "pid", "gpu_id", "replica",
                "world_rank", "dp_rank", "pp_rank", "tp_rank", "attn_dp_rank", "attn_cp_rank",
                "attn_tp_rank", "moe_dp_rank", "moe_ep_rank", "moe_tp_rank", "evidence"}


def lnav_format() -> dict[str, Any]:
    """The format document (lnav's format-v1 schema)."""
    values: dict[str, dict[str, Any]] = {}
    for column in TIMELINE_SCHEMA:
        if column in ("ts", "text", "order"):  # (`order` is an SQL keyword: no table with it)
            continue
        entry: dict[str, Any] = {"kind": "integer" if column in _INTEGER else "string",
                                 "hidden": column not in ("file", "line")}
        if column in _IDENTIFIERS:
            entry["identifier"] = True
        values[column] = entry
    return {
        "$schema": "https://lnav.org/schemas/format-v1.schema.json",
        NAME: {
            "title": "logcorr tagged timeline",
            "description": "The jsonl of `logcorr analyze --format jsonl`: one record per "
                           "physical log line of a multi-process SGLang deployment, tagged with "
                           "the process that wrote it (node, GPU, replica, world rank, TP/DP/PP/"
                           "EP ranks). Lines without a printed time are not shown.",
            "url": "https://github.com/sgl-project/sglang",
            "json": True,
            "hide-extra": True,
            "timestamp-field": "ts",
            "timestamp-format": ["%Y-%m-%dT%H:%M:%S.%f", "%Y-%m-%dT%H:%M:%S"],
            "body-field": "text",
            "level-field": "text",
            "level": {
                "fatal": "Fatal Python error|terminate called after|illegal memory access",
                "error": (r"\bERROR\b|Traceback \(most recent call last\)|:\[E\d{4}|"
                          r"CUDA error|NCCL WARN|Watchdog caught|[A-Za-z]+Error: |"
                          r"watchdog timeout"),
                "warning": r"\bWARNING\b|:\[W\d{4}|Warning: ",
            },
            "line-format": [
                {"field": "__timestamp__", "timestamp-format": "%Y-%m-%dT%H:%M:%S.%f"},
                " ",
                {"field": "file"},
                ":",
                {"field": "line"},
                " ",
                {"field": "text"},
            ],
            "value": values,
            "sample": [{"line": json.dumps({
                "file": "node1.log", "line": 108, "part": 0, "order": 220,
                "ts": "2026-11-29T10:11:10", "source": "sglang", "role": "scheduler",
                "host": "gpu-node-1", "node_rank": 1, "pid": None, "tid": None,
                "device_id": None, "gpu_id": 1, "replica": 0, "world_rank": 9, "dp_rank": 4,
                "pp_rank": 0, "tp_rank": 9, "attn_dp_rank": 4, "attn_cp_rank": 0,
                "attn_tp_rank": 1, "moe_dp_rank": 0, "moe_ep_rank": 9, "moe_tp_rank": 0,
                "evidence": "prefix",
                "text": "[2026-11-29 10:11:10 DP4 TP9 EP9] Pyspy dump for PID 3416069:"})}],
        },
    }


def lnav_format_text() -> str:
    return json.dumps(lnav_format(), indent=2) + "\n"


def config_dir() -> Path:
    """Where lnav reads its configuration: ~/.lnav when it exists, else
    $XDG_CONFIG_HOME/lnav (default ~/.config/lnav)."""
    home = Path(os.path.expanduser("~"))
    if (home / ".lnav").is_dir():
        return home / ".lnav"
    xdg = os.environ.get("XDG_CONFIG_HOME")
    return (Path(xdg) if xdg else home / ".config") / "lnav"


def install(directory: str | Path | None = None) -> Path:
    """Write the format into lnav's `formats/installed/` (or `directory`); the path written."""
    target = Path(directory) if directory is not None else config_dir() / "formats" / "installed"
    target.mkdir(parents=True, exist_ok=True)
    path = target / FILE_NAME
    temp = path.with_suffix(".json.tmp")
    temp.write_text(lnav_format_text(), encoding="utf-8")
    os.replace(temp, path)
    return path
