"""Generate realistic SGLang multi-process log sets with the true writer of every line.

Used for the analyze fixtures (small, committed under fixtures/analyze/) and for the benchmark
(large, generated on demand). Line shapes follow ../shared/docs/log-formats.md: SGLang prefixed
lines, main-process lines, NCCL INFO communicator lines (main and proxy threads), torch c10d
watchdog lines, a traceback, a py-spy dump, glued and hard-wrapped lines.

    python benchmarks/generate.py OUT_DIR --config ARGS.json [--layout per-node|per-rank]
                                  [--steps N] [--seed S] [--incident exception|hang|none]

Writes OUT_DIR/logs/..., OUT_DIR/args.json and OUT_DIR/truth.jsonl: one record per physical
line: {"file", "line", "replica", "world_rank"} (nulls for lines no scheduler wrote).
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from logcorr.config import LaunchConfig, load_config
from logcorr.topology import Process, Topology, build_topology

START = datetime(2026, 11, 29, 10, 0, 0)
SERVER_ARGS_TAIL = ("attention_backend=<AttentionBackend.FA3: 'fa3'>, cuda_graph_bs=[1, 2, 4, 8], "
                    "watchdog_timeout=300, dist_timeout=None, decrypted_draft_config_file=None")


@dataclass
class Record:
    """One logical record: its time, writer, stream (node file or rank file) and lines."""

    ts: datetime
    node: int
    proc: Process | None
    lines: list[str]
    order: int = 0


@dataclass
class World:
    topology: Topology
    rng: random.Random
    pids: dict[tuple[int, int], int] = field(default_factory=dict)
    records: list[Record] = field(default_factory=list)

    def host(self, node: int) -> str:
        return f"gpu-node-{node}"

    def pid(self, p: Process) -> int:
        return self.pids.setdefault(p.key, 3415995 + 7 * (p.replica * 1000 + p.world_rank) + 11)

    def add(self, ts: datetime, node: int, proc: Process | None, *lines: str) -> None:
        self.records.append(Record(ts, node, proc, list(lines), len(self.records)))


def sg(ts: datetime, prefix: str, message: str, ms: bool = False) -> str:
    stamp = ts.strftime("%Y-%m-%d %H:%M:%S") + (f".{ts.microsecond // 1000:03d}" if ms else "")
    return f"[{stamp}{prefix}] {message}"


def c10(ts: datetime, sev: str = "E") -> str:
    return f"{sev}{ts.month}{ts.day:02d} {ts.strftime('%H:%M:%S')}.{ts.microsecond:06d}{ts.microsecond % 997:03d}"


def startup(world: World, steps: int) -> datetime:
    topo = world.topology
    c = topo.config
    for node in range(topo.sizes.nnodes):
        t = START + timedelta(seconds=node)
        args = (f"server_args=ServerArgs(model_path='/models/DeepSeek-V3', tp_size={c.tp_size}, "
                f"pp_size={c.pp_size}, dp_size={c.dp_size}, enable_dp_attention="
                f"{c.enable_dp_attention}, ep_size={c.ep_size}, moe_a2a_backend="
                f"'{c.moe_a2a_backend or 'none'}', nnodes={c.nnodes}, node_rank={node}, "
                f"base_gpu_id={c.base_gpu_id}, gpu_id_step={c.gpu_id_step}, device='cuda', "
                f"{SERVER_ARGS_TAIL})")
        world.add(t, node, None, sg(t, "", args))
        world.add(t, node, None, sg(t, "", "INFO server_args.py:1697: Attention backend not "
                                           "specified. Use fa3 backend by default."))
    comm_ids = {}
    for p in topo.processes:
        t = START + timedelta(seconds=3 + p.world_rank % 3)
        pid, host, g = world.pid(p), world.host(p.node_rank), p.gpu_id
        world.add(t, p.node_rank, p, sg(t, p.prefix, "Init torch distributed begin."))
        tp_members = topo.group_instance("tp", p.world_rank)
        comm = comm_ids.setdefault((p.replica, tp_members), f"0x{world.rng.getrandbits(64):016x}")
        ptr = f"0x{world.rng.getrandbits(44):x}"
        nccl = [f"{host}:{pid}:{pid} [{g}] NCCL INFO NCCL version 2.21.5+cuda12.4",
                f"{host}:{pid}:{pid} [{g}] NCCL INFO ncclCommInitRank comm {ptr} rank {p.tp_rank} "
                f"nranks {len(tp_members)} cudaDev {g} nvmlDev {g} busId {g + 1}a000 commId {comm}"
                " - Init START",
                f"{host}:{pid}:{pid + 900} [0] NCCL INFO [Proxy Service] Device {g} CPU core "
                f"{100 + g}",
                f"{host}:{pid}:{pid} [{g}] NCCL INFO comm {ptr} rank {p.tp_rank} nranks "
                f"{len(tp_members)} cudaDev {g} nvmlDev {g} busId {g + 1}a000 commId {comm} - "
                "Init COMPLETE"]
        for line in nccl:
            world.add(t, p.node_rank, p, line)
        t2 = t + timedelta(seconds=2)
        world.add(t2, p.node_rank, p, sg(t2, p.prefix, "Init torch distributed ends. "
                                                      "elapsed=2.76 s, mem usage=0.43 GB"))
        t3 = t2 + timedelta(seconds=1)
        world.add(t3, p.node_rank, p, sg(t3, p.prefix, "Load weight begin. avail mem=78.38 GB"))
        t4 = t3 + timedelta(seconds=40)
        world.add(t4, p.node_rank, p, sg(t4, p.prefix, "Load weight end. elapsed=40.10 s, "
                                                      "type=DeepseekV3ForCausalLM, avail mem="
                                                      "41.20 GB, mem usage=37.18 GB"))
        world.add(t4, p.node_rank, p, sg(t4, p.prefix, "KV Cache is allocated. #tokens: 524288"))
    ready = START + timedelta(seconds=60)
    for node in range(topo.sizes.nnodes):
        world.add(ready, node, None, sg(ready, "", "INFO:     Started server process [31337]"))
        world.add(ready, node, None, sg(ready, "", "The server is fired up and ready to roll!"))
    t = ready
    leaders = [p for p in topo.processes if p.attn_tp_rank == 0 and p.attn_cp_rank == 0
               and p.pp_rank == topo.sizes.pp - 1]
    for step in range(steps):
        t = ready + timedelta(seconds=1 + step)
        for p in leaders:
            world.add(t, p.node_rank, p, sg(t, p.prefix, f"Decode batch, #running-req: "
                                                         f"{8 + step % 5}, #token: {4096 + step}, "
                                                         "gen throughput (token/s): 512.33"))
        world.add(t, 0, None, sg(t, "", 'INFO:     10.42.0.190:54466 - "POST /v1/chat/'
                                        'completions HTTP/1.1" 200 OK'))
    return t


def incident(world: World, t: datetime, kind: str) -> None:
    topo = world.topology
    if kind == "none":
        return
    culprit = topo.processes[min(len(topo.processes) - 1, topo.sizes.world // 2 + 1)]
    t = t + timedelta(seconds=5)
    if kind == "exception":
        world.add(t, culprit.node_rank, culprit,
                  sg(t, culprit.prefix, "Scheduler hit an exception: Traceback (most recent "
                                        "call last):"),
                  '  File "/sgl/python/sglang/srt/managers/scheduler.py", line 2912, in '
                  "run_scheduler_process",
                  "    scheduler.event_loop_overlap()",
                  '  File "/sgl/python/sglang/srt/layers/moe/ep_moe/layer.py", line 431, in '
                  "forward",
                  "    hidden_states = self.dispatcher.dispatch(hidden_states)",
                  "RuntimeError: CUDA error: an illegal memory access was encountered")
        world.add(t, culprit.node_rank, None,
                  sg(t, "", "Received sigquit from a child process. It usually means the child "
                            "failed."))
        return
    # hang: the culprit goes quiet; its TP peers' watchdogs fire 600 s later
    late = t + timedelta(seconds=600)
    for p in topo.processes:
        if p.key == culprit.key or p.replica != culprit.replica:
            continue
        if topo.group_instance("tp", p.world_rank) != topo.group_instance("tp",
                                                                          culprit.world_rank):
            continue
        stamp = c10(late)
        world.add(late, p.node_rank, p,
                  f"[rank{p.world_rank}]:[{stamp} ProcessGroupNCCL.cpp:607] [PG ID 2 PG GUID "
                  f"3(tp:device) Rank {p.tp_rank}] Watchdog caught collective operation timeout:"
                  f" WorkNCCL(SeqNum=9141, OpType=ALLREDUCE, NumelIn=19008, NumelOut=19008, "
                  f"Timeout(ms)=600000) ran for 600071 milliseconds before timing out.",
                  f"[rank{p.world_rank}]:[{stamp} ProcessGroupNCCL.cpp:1785] [PG ID 2 PG GUID "
                  f"3(tp:device) Rank {p.tp_rank}] Exception (either an error or timeout) "
                  f"detected by watchdog at work: 9141, last enqueued NCCL work: 9141, last "
                  f"completed NCCL work: 9140.")
    dump = late + timedelta(seconds=1)
    pid = world.pid(culprit)
    world.add(dump, culprit.node_rank, culprit,
              sg(dump, culprit.prefix, f"Pyspy dump for PID {pid}:"),
              f"Process {pid}: {culprit.proctitle}",
              "Python v3.12.3 (/usr/bin/python3.12)",
              "",
              f'Thread {pid} (idle): "MainThread"',
              "    all_reduce (torch/distributed/distributed_c10d.py:2501)",
              "    event_loop_overlap (sglang/srt/managers/scheduler.py:1012)")
    world.add(dump, culprit.node_rank, culprit,
              sg(dump, culprit.prefix, "Scheduler watchdog timeout (self.watchdog_timeout=300, "
                                       "self.soft=False)"))


def damage(lines: list[tuple[str, tuple[int, int] | None]]
           ) -> list[tuple[str, tuple[int, int] | None]]:
    """Hard-wrap the first long torch line at 80 columns, as a terminal copy does; both
    pieces keep their writer."""
    out = list(lines)
    for index in range(1, len(out) - 1):
        text, who = out[index]
        if text.startswith("[rank") and len(text) > 120:
            cut = 80
            out[index:index + 1] = [(text[:cut], who), (text[cut:], who)]
            break
    return out


def write(world: World, out: Path, layout: str, crlf_first: bool = True) -> None:
    topo = world.topology
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    streams: dict[str, list[tuple[str, tuple[int, int] | None]]] = {}
    for record in sorted(world.records, key=lambda r: (r.ts, r.order)):
        if layout == "per-node" or record.proc is None:
            name = f"node{record.node}.log" if layout == "per-node" else f"main-node{record.node}.log"
        elif topo.sizes.replicas > 1:
            name = f"dp{record.proc.replica}-rank{record.proc.world_rank}.log"
        else:
            name = f"rank{record.proc.world_rank}.log"
        who = record.proc.key if record.proc is not None else None
        streams.setdefault(name, []).extend((line, who) for line in record.lines)
    truth = []
    for index, (name, lines) in enumerate(sorted(streams.items())):
        lines = damage(lines)
        ending = "\r\n" if crlf_first and index == 0 else "\n"
        (logs / name).write_bytes("".join(text + ending for text, _ in lines).encode())
        for number, (_, who) in enumerate(lines, start=1):
            truth.append({"file": name, "line": number,
                          "replica": who[0] if who else None,
                          "world_rank": who[1] if who else None})
    with open(out / "truth.jsonl", "w") as stream:
        for row in truth:
            stream.write(json.dumps(row, sort_keys=True) + "\n")


def generate(config: LaunchConfig, out: Path, layout: str, steps: int, seed: int,
             kind: str) -> None:
    world = World(build_topology(config), random.Random(seed))
    t = startup(world, steps)
    incident(world, t, kind)
    write(world, out, layout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--config", required=True)
    parser.add_argument("--layout", choices=("per-node", "per-rank"), default="per-node")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--incident", choices=("exception", "hang", "none"), default="hang")
    args = parser.parse_args()
    config = load_config(args.config)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "args.json").write_text(Path(args.config).read_text())
    generate(config, args.out, args.layout, args.steps, args.seed, args.incident)


if __name__ == "__main__":
    main()
