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
import shutil
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


def startup(world: World, steps: int, stuck_node: int | None = None) -> datetime:
    """Launch, NCCL init, weights, then `steps` seconds of decoding. With `stuck_node`, that
    node's schedulers start their NCCL communicator and never complete it."""
    topo = world.topology
    c = topo.config
    for node in range(topo.sizes.nnodes):
        t = START + timedelta(seconds=node)
        args = (f"server_args=ServerArgs(model_path='/models/DeepSeek-V3', tp_size={c.tp_size}, "
                f"pp_size={c.pp_size}, dp_size={c.dp_size}, enable_dp_attention="
                f"{c.enable_dp_attention}, ep_size={c.ep_size}, moe_a2a_backend="
                f"'{c.moe_a2a_backend or 'none'}', nnodes={c.nnodes}, node_rank={node}, "
                f"attn_cp_size={c.attn_cp_size}, moe_dp_size={c.moe_dp_size}, "
                f"base_gpu_id={c.base_gpu_id}, gpu_id_step={c.gpu_id_step}, "
                f"device='{c.device or 'cuda'}', "
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
        if topo.config.is_npu:  # no NCCL on Ascend; HCCL prints nothing per line here
            nccl = []
        if p.node_rank == stuck_node:
            for line in nccl[:3]:
                world.add(t, p.node_rank, p, line)
            continue
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
    if stuck_node is not None:
        return ready
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


def pick_culprit(topo: Topology, spec: str | None) -> Process:
    """`REPLICA:WORLD`, or by default a process in the middle of the first replica."""
    if spec:
        replica, world_rank = (int(x) for x in spec.split(":"))
        return topo.process(replica, world_rank)
    return topo.processes[min(len(topo.processes) - 1, topo.sizes.world // 2 + 1)]


def incident(world: World, t: datetime, kind: str, culprit: Process) -> None:
    if kind == "none":
        return
    t = t + timedelta(seconds=5)
    if kind == "nccl-init":
        return  # written by startup(): the culprit's node never completes the communicator
    if kind == "watchdog-cuda":
        cuda_fault(world, t, culprit)
        return
    if kind == "exception":
        # the culprit's own progress bar, left without a newline, glues onto its next line
        bar = ("Loading safetensors checkpoint shards:  99% Completed | 161/163 "
               "[01:15<00:00,  2.24it/s]")
        world.add(t, culprit.node_rank, culprit,
                  bar + sg(t, culprit.prefix, "Scheduler hit an exception: Traceback (most recent "
                                              "call last):"),
                  '  File "/sgl/python/sglang/srt/managers/scheduler.py", line 2912, in '
                  "run_scheduler_process",
                  "    scheduler.event_loop_overlap()",
                  '  File "/sgl/python/sglang/srt/layers/moe/ep_moe/layer.py", line 431, in '
                  "forward",
                  "    hidden_states = self.dispatcher.dispatch(hidden_states)",
                  "RuntimeError: CUDA error: an illegal memory access was encountered")
        cascade(world, t, culprit)
        return
    if kind == "crash-watchdog":
        crash_then_watchdog(world, t, culprit)
        return
    members, late = hang(world, t, culprit)
    if kind == "hang-abort":
        teardown(world, late, culprit, members)


def timeout_lines(p: Process, late: datetime) -> list[str]:
    """torch's watchdog timeout of a member waiting on SeqNum 9141 of its TP group."""
    stamp = c10(late)
    return [f"[rank{p.world_rank}]:[{stamp} ProcessGroupNCCL.cpp:607] [PG ID 2 PG GUID "
            f"3(tp:device) Rank {p.tp_rank}] Watchdog caught collective operation timeout:"
            f" WorkNCCL(SeqNum=9141, OpType=ALLREDUCE, NumelIn=19008, NumelOut=19008, "
            f"Timeout(ms)=600000) ran for 600071 milliseconds before timing out.",
            f"[rank{p.world_rank}]:[{stamp} ProcessGroupNCCL.cpp:1785] [PG ID 2 PG GUID "
            f"3(tp:device) Rank {p.tp_rank}] Exception (either an error or timeout) "
            f"detected by watchdog at work: 9141, last enqueued NCCL work: 9141, last "
            f"completed NCCL work: 9140."]


def hang(world: World, t: datetime, culprit: Process) -> tuple[list[Process], datetime]:
    """The culprit goes quiet; its TP peers' torch watchdogs fire 600 s later, then the
    culprit's own SGLang watchdog (with a py-spy dump). (the members that timed out, when)"""
    topo = world.topology
    late = t + timedelta(seconds=600)
    group = topo.group_instance("tp", culprit.world_rank)
    members = [p for p in topo.processes if p.key != culprit.key and p.replica == culprit.replica
               and topo.group_instance("tp", p.world_rank) == group]
    for p in members:
        world.add(late, p.node_rank, p, *timeout_lines(p, late))
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
    return members, late


def abort_lines(p: Process, t: datetime) -> list[str]:
    """torch taking a member down after its collective timeout (ProcessGroupNCCL's
    handleException, then std::terminate) and Python's faulthandler reporting the abort."""
    head = f"[rank{p.world_rank}]:[{c10(t)} ProcessGroupNCCL.cpp"
    pg = f"[PG ID 2 PG GUID 3(tp:device) Rank {p.tp_rank}]"
    what = (f"{pg} Process group watchdog thread terminated with exception: [Rank {p.tp_rank}] "
            "Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9141, "
            "OpType=ALLREDUCE, NumelIn=19008, NumelOut=19008, Timeout(ms)=600000) ran for "
            "600071 milliseconds before timing out.")
    frame = ("frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x98 "
             "(0x7f3b6d41df86 in /usr/local/lib/python3.12/dist-packages/torch/lib/libc10.so)")
    raised = ("Exception raised from checkTimeout at /pytorch/torch/csrc/distributed/c10d/"
              "ProcessGroupNCCL.cpp:635 (most recent call first):")
    return [f"{head}:684] [Rank {p.tp_rank}] Some NCCL operations have failed or timed out. "
            "Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might "
            "run on corrupted/incomplete data.",
            f"{head}:698] [Rank {p.tp_rank}] To avoid data inconsistency, we are taking the "
            "entire process down.",
            f"{head}:1899] {what}", raised, frame,
            "terminate called after throwing an instance of 'c10::DistBackendError'",
            f"  what():  {what}", raised, frame, "",
            "Fatal Python error: Aborted", "",
            f"Thread 0x{0x7f5a9d000000 + p.world_rank * 0x1000:012x} (most recent call first):",
            "  <no Python frame>"]


def teardown(world: World, late: datetime, culprit: Process, members: list[Process]) -> None:
    """After the timeouts: torch aborts every member that timed out; node 0's main process
    sees a scheduler die (exit code -6, SIGABRT) and kills the tree; the main process of every
    other node reports each of its schedulers' exit codes (-9 for the one it killed)."""
    topo = world.topology
    aborted = late + timedelta(seconds=2)
    for p in members:
        world.add(aborted, p.node_rank, p, *abort_lines(p, aborted))
    reaped = aborted + timedelta(seconds=1)
    local = max(1, topo.sizes.world // topo.sizes.nnodes)
    for node in range(topo.sizes.nnodes):
        mine = [p for p in members + [culprit] if p.node_rank == node]
        if not mine:
            continue
        if node == 0:
            first = min(mine, key=lambda p: p.world_rank)
            world.add(reaped, node, None,
                      sg(reaped, "", f"Subprocess scheduler_{first.world_rank % local} "
                                     f"(pid={world.pid(first)}) crashed with exit code -6. "
                                     "Triggering SIGQUIT for cleanup..."),
                      sg(reaped, "", "Received sigquit from a child process. It usually means "
                                     "the child failed."),
                      sg(reaped, "", "kill_process_tree called: parent_pid=31337, "
                                     "include_parent=True, pid=31337"))
            continue
        world.add(reaped, node, None, *(
            sg(reaped, "", f"Scheduler or DataParallelController {world.pid(p)} terminated with "
                           f"{-9 if p.key == culprit.key else -6}")
            for p in sorted(mine, key=lambda p: p.world_rank)))


def crash_then_watchdog(world: World, t: datetime, culprit: Process) -> None:
    """The culprit hits an exception and its node's main process kills that node's tree; the
    schedulers of the same replica on the other nodes wait for it until SGLang's watchdog
    fires (300 s), and their main processes kill theirs."""
    topo = world.topology
    world.add(t, culprit.node_rank, culprit,
              sg(t, culprit.prefix, "Scheduler hit an exception: Traceback (most recent call "
                                    "last):"),
              '  File "/sgl/python/sglang/srt/managers/scheduler.py", line 2912, in '
              "run_scheduler_process",
              "    scheduler.event_loop_pp()",
              "RuntimeError: CUDA error: an illegal memory access was encountered")
    quit_lines = [
        "Received sigquit from a child process. It usually means the child failed.",
        "kill_process_tree called: parent_pid=31337, include_parent=True, pid=31337"]
    end = t + timedelta(seconds=1)
    world.add(end, culprit.node_rank, None, *(sg(end, "", line) for line in quit_lines))
    fired = t + timedelta(seconds=300)
    waiting = [p for p in topo.processes if p.replica == culprit.replica
               and p.node_rank != culprit.node_rank]
    for p in waiting:
        world.add(fired, p.node_rank, p,
                  sg(fired, p.prefix, "Scheduler watchdog timeout (self.watchdog_timeout=300, "
                                      "self.soft=False)"))
    killed = fired + timedelta(seconds=5)
    for node in sorted({p.node_rank for p in waiting}):
        world.add(killed, node, None, *(sg(killed, "", line) for line in quit_lines))


def cascade(world: World, t: datetime, culprit: Process) -> None:
    """After the root failure: a peer fails later on the broken communicator, then the main
    process reports the dead child and kills the tree."""
    topo = world.topology
    later = t + timedelta(seconds=2)
    peers = [p for p in topo.processes if p.key != culprit.key and p.replica == culprit.replica]
    if peers:
        peer = peers[0]
        world.add(later, peer.node_rank, peer,
                  sg(later, peer.prefix, "Scheduler hit an exception: Traceback (most recent "
                                         "call last):"),
                  '  File "/sgl/python/sglang/srt/distributed/parallel_state.py", line 512, in '
                  "all_reduce",
                  "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/"
                  "c10d/ProcessGroupNCCL.cpp:2027, remote process exited or there was a network "
                  "error, NCCL version 2.21.5")
    end = later + timedelta(seconds=1)
    index = topo.processes.index(culprit) % max(1, topo.sizes.world // topo.sizes.nnodes)
    world.add(end, culprit.node_rank, None,
              sg(end, "", f"Subprocess scheduler_{index} (pid={world.pid(culprit)}) crashed with "
                          "exit code -9. Triggering SIGQUIT for cleanup..."),
              sg(end, "", "Received sigquit from a child process. It usually means the child "
                          "failed."),
              sg(end, "", "kill_process_tree called: parent_pid=31337, include_parent=True, "
                          "pid=31337"))


def cuda_fault(world: World, t: datetime, culprit: Process) -> None:
    """A CUDA fault surfacing through torch's NCCL watchdog thread (a crash, not a hang)."""
    stamp = c10(t)
    what = (f"[PG ID 2 PG GUID 3(tp:device) Rank {culprit.tp_rank}] Process group watchdog "
            "thread terminated with exception: CUDA error: an illegal memory access was "
            "encountered")
    world.add(t, culprit.node_rank, culprit,
              f"[rank{culprit.world_rank}]:[{stamp} ProcessGroupNCCL.cpp:1595] {what}",
              "terminate called after throwing an instance of 'c10::DistBackendError'",
              f"  what():  {what}",
              "Exception raised from c10_cuda_check_implementation at ../c10/cuda/"
              "CUDAException.cpp:43 (most recent call first):",
              "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x96 "
              "(0x7f3b6d41df86 in /usr/local/lib/python3.10/dist-packages/torch/lib/libc10.so)")
    cascade(world, t + timedelta(seconds=1), culprit)


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
        if layout == "combined":
            name = "all.log"
        elif layout == "per-node" or record.proc is None:
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
             kind: str, culprit_spec: str | None = None, drop: str | None = None) -> None:
    """Write the log set, its truth, and scenario.json (the expected finding and culprit)."""
    topology = build_topology(config)
    world = World(topology, random.Random(seed))
    culprit = pick_culprit(topology, culprit_spec)
    t = startup(world, steps, culprit.node_rank if kind == "nccl-init" else None)
    incident(world, t, kind, culprit)
    dropped = pick_culprit(topology, drop) if drop else None
    if dropped is not None:
        world.records = [r for r in world.records if r.proc is None or r.proc.key != dropped.key]
    write(world, out, layout)
    expected = {"none": None, "exception": "crash", "watchdog-cuda": "crash",
                "crash-watchdog": "crash", "hang": "collective-hang",
                "hang-abort": "collective-hang", "nccl-init": "init-hang"}[kind]
    culprits = ([[p.replica, p.world_rank] for p in topology.processes
                 if p.node_rank == culprit.node_rank] if kind == "nccl-init"
                else [list(culprit.key)] if expected else [])
    scenario = {"finding": expected, "culprits": culprits,
                "missing": [list(dropped.key)] if dropped is not None else []}
    (out / "scenario.json").write_text(json.dumps(scenario, indent=1, sort_keys=True) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--config", required=True)
    parser.add_argument("--clean", action="store_true", help="remove OUT/logs first")
    parser.add_argument("--layout", choices=("per-node", "per-rank", "combined"),
                        default="per-node")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--incident", default="hang",
                        choices=("exception", "hang", "hang-abort", "crash-watchdog", "none",
                                 "nccl-init", "watchdog-cuda"))
    parser.add_argument("--culprit", metavar="REPLICA:WORLD", help="the process that fails")
    parser.add_argument("--drop", metavar="REPLICA:WORLD", help="leave this process's lines out")
    args = parser.parse_args()
    config = load_config(args.config)
    if args.clean and (args.out / "logs").exists():
        shutil.rmtree(args.out / "logs")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "args.json").write_text(Path(args.config).read_text())
    generate(config, args.out, args.layout, args.steps, args.seed, args.incident, args.culprit,
             args.drop)


if __name__ == "__main__":
    main()
