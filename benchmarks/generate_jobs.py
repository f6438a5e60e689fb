"""Generate log sets of jobs other than an SGLang server's own launch, with the true writer of
every line: plain torch-distributed jobs (srun, torchrun with torch elastic's failure summary)
and docker compose output on a terminal. Line shapes follow ../shared/docs/log-formats.md and
the launchers' sources (srun `--label`, slurmstepd, torchrun `--tee 3`, torch elastic's
`ChildFailedError.format_msg`, docker compose's log presenter).

    python benchmarks/generate_jobs.py OUT_DIR --scenario srun-uncaught [--ranks 64 --culprit 37]

Writes OUT_DIR/logs/..., OUT_DIR/truth.jsonl (one record per physical line: {"file", "line",
"replica", "world_rank"}, nulls for a launcher's lines) and OUT_DIR/scenario.json: the expected
error finding (`finding`), its culprits (`culprits`: world ranks), words its summary holds
(`summary`), for compose the stream of its culprit (`stream`: every line comes through one),
and for a handled traceback the rank that printed it (`handled`).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

START = datetime(2026, 11, 29, 10, 0, 0)
JOB = 1745223
GPUS = 8
ESC = "\x1b"
# torch's warning at exit when the process group was not destroyed (torch 2.4+): printed after
# an uncaught exception too, by the process that raised it
NOT_DESTROYED = ("Warning: WARNING: process group has NOT been destroyed before we destruct "
                 "ProcessGroupNCCL. On normal program exit, the application should call "
                 "destroy_process_group to ensure that any pending NCCL operations have finished "
                 "in this process. (function operator())")


@dataclass
class Log:
    """The lines of each file, with the world rank that wrote each (None: a launcher)."""

    files: dict[str, list[tuple[str, int | None]]] = field(default_factory=dict)

    def add(self, name: str, rank: int | None, *lines: str) -> None:
        self.files.setdefault(name, []).extend((line, rank) for line in lines)

    def write(self, out: Path) -> None:
        logs = out / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        truth = []
        for name, lines in sorted(self.files.items()):
            (logs / name).write_text("".join(text + "\n" for text, _ in lines), encoding="utf-8")
            truth += [{"file": name, "line": number, "replica": None, "world_rank": rank}
                      for number, (_, rank) in enumerate(lines, start=1)]
        with open(out / "truth.jsonl", "w") as stream:
            stream.writelines(json.dumps(row, sort_keys=True) + "\n" for row in truth)


def c10(ts: datetime, sev: str = "W") -> str:
    """torch's c10 stamp: `W1129 10:00:01.123456789` (month, day, ns; no year)."""
    return f"{sev}{ts.month}{ts.day:02d} {ts.strftime('%H:%M:%S')}.{ts.microsecond:06d}000"


def glog(ts: datetime, pid: int, where: str, sev: str = "W") -> str:
    """torch's Python logging in glog's shape (torchrun's agent): whole ms, the pid."""
    return f"{sev}{ts.month}{ts.day:02d} {ts.strftime('%H:%M:%S')}.{ts.microsecond // 1000:03d}000 {pid} {where}] "


def barrier(rank: int, ts: datetime) -> str:
    return (f"[rank{rank}]:[{c10(ts)} ProcessGroupNCCL.cpp:4561] [PG ID 0 PG GUID 0(default_pg) "
            f"Rank {rank}]  using GPU {rank % GPUS} to perform barrier as devices used by this "
            "process are currently unknown. This can potentially cause a hang if this rank to "
            "GPU mapping is incorrect.")


def traceback(rank: int, error: str, frames: list[tuple[str, int, str, str]]) -> list[str]:
    """An uncaught exception as torch workers print it: every line behind `[rankN]:`."""
    lines = ["Traceback (most recent call last):"]
    for path, number, function, code in frames:
        lines += [f'  File "{path}", line {number}, in {function}', f"    {code}"]
    return [f"[rank{rank}]: {line}" for line in [*lines, error]]


TRAIN_FRAMES = [("/workspace/train.py", 211, "<module>", "main()"),
                ("/workspace/train.py", 187, "main", "trainer.fit(model, loader)"),
                ("/workspace/trainer.py", 96, "fit", "loss = self.step(batch)"),
                ("/workspace/trainer.py", 142, "step", "self.check_batch(batch)")]


# --------------------------------------------------------------------------- srun, 64 ranks


def srun_uncaught(out: Path, ranks: int = 64, culprit: int = 37) -> dict[str, object]:
    """`srun --label -N8 --ntasks-per-node=8 python train.py`: one task per rank (task N is rank
    N), one output file. Rank `culprit` raises at step 30 and dies; torch warns at its exit; the
    others wait in the next collective until srun reports the task's exit code and slurmstepd
    cancels the step."""
    log = Log()
    name = f"slurm-{JOB}.out"
    t = START
    for rank in range(ranks):
        log.add(name, rank, f"{rank}: {barrier(rank, t + timedelta(milliseconds=rank * 7))}")
    for step in (10, 20, 30):
        t += timedelta(seconds=20)
        for rank in range(ranks):
            # (plain prints: no rank prefix; the task label is all that says whose they are)
            log.add(name, rank, f"{rank}: step {step}/1000 loss {2.5 - step / 100:.4f} "
                    f"tokens/s {31000 + rank * 13}")
    t += timedelta(seconds=3)
    error = (f"RuntimeError: shape mismatch in batch 3071 on rank {culprit}: expected "
             "[8, 4096] but got [8, 4095]")
    for line in traceback(culprit, error, TRAIN_FRAMES):
        log.add(name, culprit, f"{culprit}: {line}")
    log.add(name, culprit, f"{culprit}: [rank{culprit}]:[{c10(t + timedelta(milliseconds=40))} "
            f"ProcessGroupNCCL.cpp:1250] {NOT_DESTROYED}")
    node = culprit // GPUS
    log.add(name, None,
            f"srun: error: gpu-node-{node}: task {culprit}: Exited with exit code 1",
            "srun: Job step aborted: Waiting up to 32 seconds for job step to finish.",
            f"slurmstepd: error: *** STEP {JOB}.0 ON gpu-node-0 CANCELLED AT "
            f"{(t + timedelta(seconds=32)).isoformat()} ***",
            *(f"srun: error: gpu-node-{n}: tasks {n * GPUS}-{n * GPUS + GPUS - 1}: Terminated"
              for n in range(ranks // GPUS) if n != node))
    log.write(out)
    return {"finding": "crash", "culprits": [culprit],
            "summary": [f"world rank {culprit}", "died of an uncaught exception",
                        "RuntimeError: shape mismatch"]}


# --------------------------------------------------------------------------- torchrun, 2 nodes


def _agent_traceback(raised: str) -> list[str]:
    return ["Traceback (most recent call last):",
            '  File "/usr/local/bin/torchrun", line 8, in <module>',
            "    sys.exit(main())",
            ('  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/elastic/'
             'multiprocessing/errors/__init__.py", line 355, in wrapper'),
            "    return f(*args, **kwargs)",
            ('  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/launcher/api.py",'
             ' line 263, in launch_agent'),
            "    raise ChildFailedError(" if "ChildFailed" in raised else "    result = agent.run()",
            raised]


def _summary(failures: list[dict[str, object]], script: str) -> list[str]:
    """torch elastic's `ChildFailedError.format_msg` (the first observed failure last)."""
    def block(index: int, f: dict[str, object]) -> list[str]:
        return [f"[{index}]:", f"  time      : {f['time']}", f"  host      : {f['host']}",
                f"  rank      : {f['rank']} (local_rank: {f['local_rank']})",
                f"  exitcode  : {f['exitcode']} (pid: {f['pid']})",
                f"  error_file: {f['error_file']}", f"  traceback : {f['traceback']}"]
    root, others = failures[0], failures[1:]
    width = 60
    lines = ["=" * width, f"{script} FAILED", "-" * width, "Failures:"]
    for index, failure in enumerate(others, start=1):
        lines += block(index, failure)
    lines += ["  <NO_OTHER_FAILURES>"] if not others else []
    lines += ["-" * width, "Root Cause (first observed failure):", *block(0, root), "=" * width]
    return lines


def torchrun_elastic(out: Path, culprit: int = 11) -> dict[str, object]:
    """`torchrun --nnodes 2 --nproc-per-node 8 --tee 3 train.py` on two nodes, each node's
    console in its own file: every worker line behind `[defaultL]:[rankR]:`. Rank `culprit`
    raises; its node's agent stops the other workers and raises `ChildFailedError` with the
    summary (root cause: the culprit's rank, local rank, PID, exit code); the other node's
    agent is taken down by SIGTERM."""
    log = Log()
    agents = {0: 4001, 1: 5001}
    t = START
    for node in (0, 1):
        name = f"node{node}.log"
        log.add(name, None, glog(t, agents[node], "torch/distributed/run.py:793") + "",
                glog(t, agents[node], "torch/distributed/run.py:793") + "*" * 41,
                glog(t, agents[node], "torch/distributed/run.py:793") + "Setting OMP_NUM_THREADS "
                "environment variable for each process to be 1 in default, to avoid your system "
                "being overloaded, please further tune the variable for optimal performance in "
                "your application as needed.",
                glog(t, agents[node], "torch/distributed/run.py:793") + "*" * 41)
        for local in range(GPUS):
            rank = node * GPUS + local
            ts = t + timedelta(seconds=5, milliseconds=rank * 11)
            log.add(name, rank, f"[default{local}]:{barrier(rank, ts)}")
    for step in (10, 20):
        t += timedelta(seconds=30)
        for node in (0, 1):
            for local in range(GPUS):
                rank = node * GPUS + local
                log.add(f"node{node}.log", rank, f"[default{local}]:[rank{rank}]:step {step} "
                        f"loss {2.4 - step / 100:.4f} grad_norm 1.{rank:02d}")
    t += timedelta(seconds=12)
    node, local = divmod(culprit, GPUS)
    name = f"node{node}.log"
    error = "ValueError: loss is NaN at step 27 (learning rate 3.0e-04): stopping"
    for line in traceback(culprit, error, TRAIN_FRAMES[:3]):
        log.add(name, culprit, f"[default{local}]:{line}")
    log.add(name, culprit, f"[default{local}]:[rank{culprit}]:[{c10(t)} ProcessGroupNCCL.cpp:"
            f"1250] {NOT_DESTROYED}")
    agent = agents[node]
    pid = agent + 10 + local
    t += timedelta(seconds=1)
    where = "torch/distributed/elastic/multiprocessing/api.py"
    log.add(name, None, *(glog(t, agent, f"{where}:897") + f"Sending process {agent + 10 + n} "
                          "closing signal SIGTERM" for n in range(GPUS) if n != local),
            glog(t, agent, f"{where}:869", "E") + f"failed (exitcode: 1) local_rank: {local} "
            f"(pid: {pid}) of binary: /usr/bin/python3",
            *_agent_traceback("torch.distributed.elastic.multiprocessing.errors.ChildFailedError: "),
            *_summary([{"time": t.strftime("%Y-%m-%d_%H:%M:%S"), "host": f"gpu-node-{node}",
                        "rank": culprit, "local_rank": local, "exitcode": 1, "pid": pid,
                        "error_file": "<N/A>", "traceback": "To enable traceback see: "
                        "https://pytorch.org/docs/stable/elastic/errors.html"}], "train.py"))
    other = 1 - node
    t += timedelta(seconds=2)
    log.add(f"node{other}.log", None,
            glog(t, agents[other], "torch/distributed/elastic/agent/server/api.py:704")
            + "Received Signals.SIGTERM death signal, shutting down workers",
            *(glog(t, agents[other], f"{where}:897") + f"Sending process {agents[other] + 10 + n}"
              " closing signal SIGTERM" for n in range(GPUS)),
            *_agent_traceback("torch.distributed.elastic.multiprocessing.api.SignalException: "
                              f"Process {agents[other]} got signal: 15"))
    log.write(out)
    return {"finding": "crash", "culprits": [culprit],
            "summary": [f"world rank {culprit}", "ValueError: loss is NaN",
                        f"torch elastic's summary names world rank {culprit}"]}


# --------------------------------------------------------------------------- handled, fan-out


def handled_traceback(out: Path, ranks: int = 4, rank: int = 2) -> dict[str, object]:
    """`torchrun --nproc-per-node 4` on one node, per-rank files from `--log-dir` (no tee
    prefix; torch's `[rankN]:` on each line): rank `rank` prints a traceback it caught (a
    checkpoint write that failed, retried) and goes on training to the end. No crash."""
    log = Log()
    t = START
    for r in range(ranks):
        log.add(f"rank{r}.log", r, barrier(r, t + timedelta(milliseconds=r * 5)))
    for step in range(10, 60, 10):
        t += timedelta(seconds=15)
        for r in range(ranks):
            log.add(f"rank{r}.log", r, f"[rank{r}]:[{c10(t, 'I')} train.py:120] step {step} loss "
                    f"{2.0 - step / 100:.3f}")
        if step == 30:
            frames = [("/workspace/ckpt.py", 54, "save", "torch.save(state, path)"),
                      ("/usr/lib/python3.10/site-packages/torch/serialization.py", 652, "save",
                       "with _open_zipfile_writer(f) as opened_zipfile:")]
            log.add(f"rank{rank}.log", rank,
                    f"[rank{rank}]:[{c10(t, 'W')} ckpt.py:60] checkpoint save failed, retrying "
                    "in 5 s", *traceback(rank, "OSError: [Errno 5] Input/output error: "
                                               "'/shared/ckpt/step_30/rank2.pt'", frames),
                    f"[rank{rank}]:[{c10(t + timedelta(seconds=5), 'I')} ckpt.py:66] checkpoint "
                    "saved on retry")
    for r in range(ranks):
        log.add(f"rank{r}.log", r, f"[rank{r}]:[{c10(t + timedelta(seconds=3), 'I')} train.py:"
                "140] training done")
    log.write(out)
    return {"finding": None, "culprits": [], "summary": [], "handled": rank}


def fan_out(out: Path, ranks: int = 2) -> dict[str, object]:
    """`srun --label --ntasks 2 python train.py`: both ranks write a checkpoint to a file they
    may not write and raise the same PermissionError in the same second: one crash, both
    culprits, no single root."""
    log = Log()
    name = f"slurm-{JOB}.out"
    t = START
    for rank in range(ranks):
        log.add(name, rank, f"{rank}: {barrier(rank, t + timedelta(milliseconds=rank * 3))}")
    t += timedelta(seconds=40)
    for rank in range(ranks):
        log.add(name, rank, f"{rank}: [rank{rank}]:[{c10(t + timedelta(milliseconds=rank * 80))} "
                "ckpt.py:40] saving checkpoint to /shared/ckpt/step_100")
    error = "PermissionError: [Errno 13] Permission denied: '/shared/ckpt/step_100/meta.json'"
    frames = [("/workspace/train.py", 201, "<module>", "main()"),
              ("/workspace/ckpt.py", 44, "save", "with open(meta, 'w') as f:")]
    lines = {rank: traceback(rank, error, frames) for rank in range(ranks)}
    for pair in zip(*lines.values()):  # (interleaved, as two processes' stderr reach srun)
        for rank, line in enumerate(pair):
            log.add(name, rank, f"{rank}: {line}")
    log.add(name, None, "srun: error: gpu-node-0: tasks 0-1: Exited with exit code 1")
    log.write(out)
    return {"finding": "crash", "culprits": list(range(ranks)),
            "summary": ["no single root can be told", "PermissionError"]}


# --------------------------------------------------------------------------- docker compose


def compose_terminal(out: Path) -> dict[str, object]:
    """`docker compose up` on a terminal: each line behind `ESC[2K` (the status line erased)
    and the service's coloured `name  | ` prefix. Two SGLang servers (TP1 each: no rank
    tokens); the decode server's main process dies of an uncaught exception that no line
    names: only the compose service says whose it is."""
    log = Log()
    services = {"prefill-1": f"{ESC}[36m", "decode-1": f"{ESC}[33m"}
    width = max(len(s) for s in services) + 1

    def line(service: str, text: str) -> str:
        return f"{ESC}[2K{services[service]}{service:<{width}}| {ESC}[0m{text}"
    t = START
    stamp = (lambda s: (t + timedelta(seconds=s)).strftime("%Y-%m-%d %H:%M:%S"))
    for index, service in enumerate(services):
        log.add("compose.log", None,
                line(service, f"[{stamp(index + 1)}] Load weight begin. avail mem=76.12 GB"),
                line(service, f"[{stamp(index + 9)}] Load weight end. type=Qwen2ForCausalLM, "
                     "dtype=torch.bfloat16, avail mem=61.20 GB"),
                line(service, f"[{stamp(index + 12)}] The server is fired up and ready to roll!"))
    frames = [("/usr/lib/python3.10/site-packages/sglang/launch_server.py", 14, "<module>",
               "launch_server(server_args)"),
              ("/usr/lib/python3.10/site-packages/sglang/srt/disaggregation/decode.py", 233,
               "connect", "raise ConnectionError(f'bootstrap server {addr} unreachable')")]
    body = ["Traceback (most recent call last):"]
    for path, number, function, code in frames:
        body += [f'  File "{path}", line {number}, in {function}', f"    {code}"]
    body.append("ConnectionError: bootstrap server prefill-1:8998 unreachable")
    log.add("compose.log", None, *(line("decode-1", text) for text in body))
    log.add("compose.log", None,
            line("prefill-1", f"[{stamp(60)}] Prefill batch, #new-seq: 1, #new-token: 12, "
                 "#cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0"))
    log.write(out)
    return {"finding": "crash", "culprits": [], "stream": "decode-1",
            "summary": ["in the stream decode-1", "ConnectionError: bootstrap server"]}


SCENARIOS: dict[str, Callable[[Path], dict[str, object]]] = {
    "srun64-uncaught": srun_uncaught, "torchrun-2nodes-elastic": torchrun_elastic,
    "torchrun-handled-traceback": handled_traceback, "srun-fan-out-2ranks": fan_out,
    "compose-terminal-control-sequences": compose_terminal}


def generate(scenario: str, out: Path) -> None:
    """Write the scenario's logs, truth.jsonl and scenario.json under `out`."""
    expected = SCENARIOS[scenario](out)
    (out / "scenario.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--scenario", choices=sorted(SCENARIOS), required=True)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    generate(args.scenario, args.out)


if __name__ == "__main__":
    main()
