"""Micro-benchmark: synthesize ~1M mixed SGLang-log lines, time read_lines and parse.

Run: python benchmarks/bench_parse.py [n_lines]. Not a test; prints lines/s for each stage.
"""

from __future__ import annotations

import random
import sys
import tempfile
import time
from pathlib import Path

from logcorr.formats import parse
from logcorr.ingest import discover, read_lines

# (weight, template) — a typical multi-rank SGLang run with NCCL_DEBUG=INFO and one crash.
TEMPLATES: list[tuple[int, str]] = [
    (40, "[2026-02-12 11:{m:02d}:{s:02d} DP{r} TP{r} EP{r}] Decode batch, #running-req: {n}, #token: 3456, token usage: 0.05, gen throughput (token/s): 1234.56, #queue-req: 0"),
    (15, "[2025-02-22 08:{m:02d}:{s:02d} TP{r}] Prefill batch. #new-seq: 1, #new-token: {n}, #cached-token: 0, cache hit rate: 0.00%"),
    (5, "[2026-08-10 09:{m:02d}:{s:02d}] INFO:     10.42.0.190:54466 - \"POST /v1/chat/completions HTTP/1.1\" 200 OK"),
    (10, "node-{r}:{pid}:{pid} [{r}] NCCL INFO Channel 0{r}/0 : 14[6] -> 5[5] [receive] via NET/IB/5/GDRDMA"),
    (2, "node-{r}:{pid}:{pid} [{r}] NCCL INFO comm 0x5621301a1640 rank {r} nranks 8 cudaDev {r} nvmlDev {r} busId a000 commId 0x35712f37c64c1510 - Init COMPLETE"),
    (6, "  File \"/usr/lib/python3/dist-packages/sglang/srt/managers/scheduler.py\", line {n}, in event_loop_normal"),
    (4, "    self.process_batch_result(batch, result)"),
    (2, "[rank{r}]:[E1016 03:31:38.928019586 ProcessGroupNCCL.cpp:607] [PG ID 2 PG GUID 3(tp:device) Rank {r}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={n}, OpType=_ALLGATHER_BASE, NumelIn=19008, NumelOut=152064, Timeout(ms)=600000) ran for 600071 milliseconds before timing out."),
    (3, "[2026-07-05 19:{m:02d}:{s:02d}.257 DP{r} TP{r} EP{r}] Scheduler hit an exception: Traceback (most recent call last):"),
    (2, "Loading safetensors checkpoint shards:  {r}9% Completed | 161/163 [01:15<00:00,  2.24it/s]"),
    (2, ""),
    (1, "RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275"),
    (1, "W0922 18:51:16.217000 {pid} torch/distributed/run.py:774] *****************************************"),
]


def synthesize(n: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    weights = [w for w, _ in TEMPLATES]
    chosen = rng.choices([t for _, t in TEMPLATES], weights=weights, k=n)
    out = []
    for template in chosen:
        r = rng.randrange(8)
        out.append(template.format(m=rng.randrange(60), s=rng.randrange(60), r=r, n=rng.randrange(99999), pid=1000 + r))
    return "\n".join(out) + "\n"


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.log"
        path.write_text(synthesize(n))
        sources, _ = discover([path])
        t0 = time.perf_counter()
        lines, _ = read_lines(sources)
        t1 = time.perf_counter()
        parsed = parse(lines)
        t2 = time.perf_counter()
    print(f"lines:      {lines.height:,} ({path.stat().st_size if path.exists() else 0} bytes)")
    print(f"read_lines: {lines.height / (t1 - t0):,.0f} lines/s ({t1 - t0:.3f} s)")
    print(f"parse:      {lines.height / (t2 - t1):,.0f} lines/s ({t2 - t1:.3f} s, {parsed.height:,} parts)")
    print(f"both:       {lines.height / (t2 - t0):,.0f} lines/s")


if __name__ == "__main__":
    main()
