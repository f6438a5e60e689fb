"""Fast generator of large SGLang log sets (millions of lines) for the benchmark.

`generate.py` builds every record in Python, which is right for small fixtures with a truth
file and far too slow for 16M lines. Here the bulk is built from templates, vectorised in polars:
one *cycle* (one second of one node's output) is a list of line templates, and a cycle x seconds
cross join, with the time stamps formatted once per second, gives every line. The shapes are the
real ones of `generate.py` (and the families of ../shared/docs/log-formats.md):

* SGLang scheduler lines with the rank prefix (`[2026-11-29 10:01:02 DP1 TP9 EP9] Decode batch…`),
  some with milliseconds, the main process's uvicorn and http lines (node 0);
* NCCL INFO lines on the scheduler's main thread and its proxy thread;
* torch c10d watchdog lines (`[rank9]:[W1129 10:01:02.123456789 ProcessGroupNCCL.cpp:…]`);
* a warning traceback record (header + File/code lines) and glog lines.

Each node gets one file (`logs/node{k}.log`): the `generate.py` start-up (server_args lines, NCCL
communicator init, weights) first, then the bulk, then a collective hang with its watchdog lines
and py-spy dump, so the log set is also a real diagnosis case.

    python benchmarks/gen_large.py OUT_DIR --lines 10000000 [--nodes 8 --ranks 64]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from datetime import timedelta
from pathlib import Path

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))

import generate  # the small generator: line shapes, start-up, incident

from logcorr.config import load_config
from logcorr.topology import Process, Topology, build_topology

BULK_START = generate.START + timedelta(seconds=61)
# Placeholders filled per second: {ts} SGLang stamp, {ms} milliseconds, {c10} torch stamp,
# {glog} glog stamp, {n} a counter. Literal braces are written {{ }}.


def config_for(ranks: int, nodes: int) -> dict[str, object]:
    """A DeepSeek-style layout: TP over all ranks, attention DP per node, DeepEP."""
    return {"tp_size": ranks, "dp_size": nodes, "enable_dp_attention": True, "nnodes": nodes,
            "moe_a2a_backend": "deepep", "model_path": "deepseek-ai/DeepSeek-V3"}


def process_templates(p: Process, pid: int, host: str) -> list[str]:
    """One second of one scheduler process's output."""
    g, w = p.gpu_id, p.world_rank
    pre = f"[{{ts}}{p.prefix}] "
    nccl = f"{host}:{pid}:{pid} [{g}] NCCL INFO "
    proxy = f"{host}:{pid}:{pid + 900} [0] NCCL INFO "
    return [
        pre + "Decode batch, #running-req: {n}, #token: 41{n}, token usage: 0.05, "
              "gen throughput (token/s): 1234.56, #queue-req: 0",
        pre + "Decode batch, #running-req: {n}, #token: 52{n}, token usage: 0.06, "
              "cuda graph: True, gen throughput (token/s): 1198.02, #queue-req: 1",
        pre + "Prefill batch. #new-seq: 1, #new-token: {n}, #cached-token: 0, token usage: "
              "0.05, #running-req: 7, #queue-req: 0",
        pre + "Decode batch, #running-req: {n}, #token: 63{n}, token usage: 0.07, "
              "gen throughput (token/s): 1301.77, #queue-req: 0",
        f"[{{ts}}.{{ms}}{p.prefix}] Cache flushed successfully! (#tokens: {{n}})",
        nccl + f"Channel 0{g % 8}/0 : {w}[{g}] -> {(w + 1) % 64}[{(g + 1) % 8}] via P2P/IPC/read",
        proxy + f"[Proxy Service] Device {g} CPU core {100 + g}",
        nccl + "Connected all rings, use ring PXN 0 GDR 1",
    ]


def rare_templates(p: Process, pid: int) -> list[str]:
    """Lines a process prints now and then: torch watchdog, a warning traceback, glog."""
    return [
        (f"[rank{p.world_rank}]:[{{c10}} ProcessGroupNCCL.cpp:1785] [PG ID 2 PG GUID "
         f"3(tp:device) Rank {p.tp_rank}] NCCL watchdog heartbeat: last enqueued NCCL work: "
         "{n}, last completed NCCL work: {n}."),
        f"[{{ts}}{p.prefix}] Exception in the overlap thread: Traceback (most recent call last):",
        '  File "/sgl/python/sglang/srt/managers/scheduler.py", line 1012, in event_loop_overlap',
        "    batch = self.get_next_batch_to_run()",
        '  File "/sgl/python/sglang/srt/managers/schedule_policy.py", line 431, in calc_priority',
        "    self.tree_cache.evict(num_tokens)",
        "RuntimeWarning: evicted {n} tokens under memory pressure",
        (f"W{{glog}} {pid} torch/distributed/c10d/socket.cpp:463] [c10d] The server socket has "
         "timed out, will retry."),
    ]


def main_templates() -> list[str]:
    """The main process (node 0): uvicorn access lines and tokenizer-manager lines."""
    return [
        '[{ts}] INFO:     10.42.0.190:54466 - "POST /v1/chat/completions HTTP/1.1" 200 OK',
        '[{ts}] INFO:     10.42.0.191:41210 - "POST /generate HTTP/1.1" 200 OK',
        ("[{ts}] INFO tokenizer_manager.py:1544: Finish: obj=GenerateReqInput(rid='{n}'), "
         "out={{'meta_info': {{'completion_tokens': 128}}}}"),
    ]


RARE_EVERY = 20  # seconds between two of a process's rare records


def cycle(topology: Topology, node: int, world: generate.World) -> pl.DataFrame:
    """The template rows of one second of `node`: (slot, template, every)."""
    rows: list[tuple[str, int]] = []
    for p in (p for p in topology.processes if p.node_rank == node):
        pid = world.pid(p)
        rows += [(t, 1) for t in process_templates(p, pid, world.host(node))]
        rows += [(t, RARE_EVERY) for t in rare_templates(p, pid)]
    if node == 0:
        rows += [(t, 1) for t in main_templates()]
    frame = pl.DataFrame(rows, schema=["template", "every"], orient="row")
    return frame.with_row_index("slot")


def bulk(topology: Topology, node: int, world: generate.World, seconds: int) -> pl.DataFrame:
    """Every bulk line of one node: cycle x seconds, stamps formatted once per second."""
    times = pl.DataFrame({"sec": pl.int_range(0, seconds, eager=True)}).with_columns(
        t=pl.lit(BULK_START) + pl.duration(seconds=pl.col("sec")))
    times = times.with_columns(
        ts=pl.col("t").dt.strftime("%Y-%m-%d %H:%M:%S"),
        c10=pl.col("t").dt.strftime("%-m%d %H:%M:%S.123456789"),
        glog=pl.col("t").dt.strftime("%m%d %H:%M:%S.456000"),
        ms=(pl.col("sec") * 37 % 1000).cast(pl.String).str.zfill(3),
        n=(pl.col("sec") % 97).cast(pl.String),
    ).drop("t")
    lines = cycle(topology, node, world).join(times, how="cross")
    lines = lines.filter(pl.col("sec") % pl.col("every") == node % pl.col("every"))
    text = pl.col("template")
    for token in ("ts", "ms", "c10", "glog", "n"):
        text = _replace(text, "{" + token + "}", pl.col(token))
    text = text.str.replace_all("{{", "{", literal=True).str.replace_all("}}", "}", literal=True)
    return lines.sort("sec", "slot").select(text.alias("text"))


def _replace(text: pl.Expr, token: str, value: pl.Expr) -> pl.Expr:
    """`token` -> the row's `value` (up to two occurrences), whole-column."""
    return text.str.replace(token, value, literal=True).str.replace(token, value, literal=True)


def lines_per_second(topology: Topology) -> float:
    p = topology.processes[0]
    per_proc = len(process_templates(p, 0, "h")) + len(rare_templates(p, 0)) / RARE_EVERY
    return len(topology.processes) * per_proc + len(main_templates())


def write_set(out: Path, total_lines: int, ranks: int = 64, nodes: int = 8,
              seed: int = 0) -> dict[str, object]:
    """Write OUT/logs/node{k}.log and OUT/args.json; return a summary."""
    config_doc = config_for(ranks, nodes)
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    (out / "args.json").write_text(json.dumps(config_doc, indent=1) + "\n")
    topology = build_topology(load_config(out / "args.json"))
    world = generate.World(topology, random.Random(seed))
    generate.startup(world, steps=2)
    seconds = max(1, round(total_lines / lines_per_second(topology)))
    end = BULK_START + timedelta(seconds=seconds)
    culprit = generate.pick_culprit(topology, None)
    generate.incident(world, end, "hang", culprit)
    head = [r for r in world.records if r.ts < BULK_START]
    tail = [r for r in world.records if r.ts >= BULK_START]
    for node in range(nodes):
        path = logs / f"node{node}.log"
        with open(path, "wb") as stream:
            stream.write(_records_text(head, node))
            bulk(topology, node, world, seconds).write_csv(
                stream, include_header=False, quote_style="never")
            stream.write(_records_text(tail, node))
    files = sorted(logs.glob("*.log"))
    size = sum(f.stat().st_size for f in files)
    return {"files": len(files), "bytes": size, "seconds": seconds}


def _records_text(records: list[generate.Record], node: int) -> bytes:
    chosen = sorted((r for r in records if r.node == node), key=lambda r: (r.ts, r.order))
    return "".join(line + "\n" for r in chosen for line in r.lines).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--nodes", type=int, default=8)
    args = parser.parse_args()
    print(json.dumps(write_set(args.out, args.lines, args.ranks, args.nodes)))


if __name__ == "__main__":
    main()
