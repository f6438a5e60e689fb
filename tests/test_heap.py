"""Freed memory is handed back to the system during a long read (logcorr.heap)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from logcorr import api, heap
from logcorr.api import analyze

ROOT = Path(__file__).resolve().parent.parent / "fixtures" / "analyze"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc_trim")
def test_free_pages_are_handed_back_only_above_the_limit() -> None:
    assert heap.resident() > 10 << 20  # (this process: Python, polars and the core)
    assert not heap.release_if_above(1 << 50)
    assert heap.release_if_above(0)


def test_each_step_of_the_core_checks_the_resident_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """Both passes give memory back between chunks (a step each), and the answers do not
    change when they do at every step."""
    path = ROOT / "tp8-crash-per-rank"
    before = analyze([path / "logs"], config=path / "args.json", chunk_bytes=3000)
    calls: list[int] = []
    release = heap.release_if_above

    def every_step(limit: int | None = None) -> bool:
        calls.append(heap.RESIDENT_LIMIT if limit is None else limit)
        return release(0)

    monkeypatch.setattr(api.heap, "release_if_above", every_step)
    after = analyze([path / "logs"], config=path / "args.json", chunk_bytes=3000)
    assert len(calls) > 5
    assert after.timeline.equals(before.timeline)
    assert [f.to_json() for f in after.findings] == [f.to_json() for f in before.findings]


def test_pass_2_gives_its_pages_back_before_stored_event_rows_are_read(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """At the end of pass 2 the freed pages are handed back at once when what was stored is
    read back next (the runs of an export, or event rows); in the lean view otherwise only
    above the limit."""
    path = ROOT / "tp8-crash-per-rank"
    calls: list[str] = []
    monkeypatch.setattr(api.heap, "release", lambda: calls.append("release"))
    held = analyze([path / "logs"], config=path / "args.json", chunk_bytes=3000, keep=1000)
    assert calls == []
    analyze([path / "logs"], config=path / "args.json", chunk_bytes=3000)
    assert calls == ["release"]
    monkeypatch.setattr(api, "EVENT_BYTES", 0)  # (event rows after the first chunk's: stored)
    stored = analyze([path / "logs"], config=path / "args.json", chunk_bytes=3000, keep=1000)
    assert calls == ["release", "release"]
    assert [f.to_json() for f in stored.findings] == [f.to_json() for f in held.findings]
