"""Ground truth for logcorr.topology computed by SGLang's own code.

Imports / exec's SGLang's code from an unpacked wheel (--sglang-root) with mocks; see
tools/README-sglang-truth.md. Contains no SGLang code. Only the SGLang >= 0.5.21 layout is supported.
"""
import sys, importlib, importlib.abc, importlib.machinery, types
class _Meta(type):
    def __getattr__(cls, k):
        if k.startswith("__") and k.endswith("__"): raise AttributeError(k)
        return _mk(cls.__name__ + "." + k)
    def __new__(mcs, name, bases, ns, **kw): return type.__new__(mcs, name, bases, ns)
    def __init__(cls, name, bases, ns, **kw): type.__init__(cls, name, bases, ns)
    def __call__(cls, *a, **k):
        if len(a) == 1 and not k and callable(a[0]) and hasattr(a[0], "__name__"): return a[0]
        return type.__call__(cls)
    def __getitem__(cls, k): return cls
    def __setitem__(cls, k, v): pass
    def __iter__(cls): return iter(())
    def __len__(cls): return 0
    def __bool__(cls): return True
    def __or__(cls, o): return cls
    __ror__ = __or__
class _Base(metaclass=_Meta):
    def __init_subclass__(cls, **kw): pass
    def __init__(self, *a, **k): pass
    def __getattr__(self, k):
        if k.startswith("__") and k.endswith("__"): raise AttributeError(k)
        return _mk("inst." + k)
    def __call__(self, *a, **k):
        if len(a) == 1 and not k and callable(a[0]) and hasattr(a[0], "__name__"): return a[0]
        return _mk("ret")()
    def __iter__(self): return iter(())
    def __bool__(self): return False
    def __enter__(self): return self
    def __exit__(self, *a): return False
    @classmethod
    def __get_pydantic_core_schema__(cls, source, handler):
        from pydantic_core import core_schema
        return core_schema.any_schema()
def _mk(name):
    return _Meta(name, (_Base,), {})
_U = _mk
class _StubLoader(importlib.abc.Loader):
    def create_module(self, spec):
        m = types.ModuleType(spec.name); m.__path__ = []; m.__version__ = "3.0.0"; m.__getattr__ = lambda k, n=spec.name: _mk(n + "." + k) if not (k.startswith("__") and k.endswith("__")) else (_ for _ in ()).throw(AttributeError(k)); return m
    def exec_module(self, m): pass
STUBBED = []; STUBTOPS = {"transformers","torchvision","PIL","triton","flashinfer","sgl_kernel","vllm"}
class _StubFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        top = name.split(".")[0]
        if top in STUBTOPS:
            STUBBED.append(name); return importlib.machinery.ModuleSpec(name, _StubLoader(), is_package=True)
        if top in ("sglang","torch","numpy") or top in sys.stdlib_module_names or top.startswith("_"): return None
        for f in sys.meta_path:
            if f is self: continue
            try: s = f.find_spec(name, path, target)
            except Exception: s = None
            if s is not None: return None
        if top in STUBTOPS:
            STUBBED.append(name); return importlib.machinery.ModuleSpec(name, _StubLoader(), is_package=True)
        f = sys._getframe(1)
        while f is not None and ("importlib" in f.f_code.co_filename or f.f_code.co_filename.startswith("<frozen")):
            f = f.f_back
        if f is None or "/sglang/" not in f.f_code.co_filename: return None
        STUBBED.append(name); STUBTOPS.add(top)
        return importlib.machinery.ModuleSpec(name, _StubLoader(), is_package=True)

# ---------------------------------------------------------------------------
# Everything above: generic import stubs (no SGLang code). Below: the harness.
# ---------------------------------------------------------------------------
import ast, json, os, argparse, subprocess, threading, contextlib, traceback

def _setup(root):
    import torch  # real CPU torch
    import torch.utils._triton as _tt
    for _n in dir(_tt):
        if _n.startswith("has_triton"):
            setattr(_tt, _n, lambda *a, **k: False)
    torch.compile = lambda *a, **k: (a[0] if a and callable(a[0]) else (lambda f: f))
    sys.meta_path.insert(0, _StubFinder())
    sys.path.insert(0, root)
    pk = types.ModuleType("sglang"); pk.__path__ = [os.path.join(root, "sglang")]; sys.modules["sglang"] = pk
    # skip heavy package __init__ files (model config registry, HF patches)
    for sub in ["sglang.srt", "sglang.srt.configs"]:
        m = types.ModuleType(sub); m.__path__ = [os.path.join(root, *sub.split("."))]; sys.modules[sub] = m
        if sub.endswith("configs"):
            m.__getattr__ = lambda k: _mk("configs." + k) if not k.startswith("__") else (_ for _ in ()).throw(AttributeError(k))
    pk.srt = sys.modules["sglang.srt"]


def exec_defs(path, names, overrides):
    """Exec the module's top-level imports (falling back to stubs for names that
    cannot be imported) and then the named top-level defs / Class.method defs of
    SGLang's own source file `path`. Returns the namespace."""
    src = open(path).read()
    tree = ast.parse(src)
    ns = {"__name__": "sglang_truth_exec", "__builtins__": __builtins__}
    targets = []
    for want in names:
        cls, _, fn = want.rpartition(".")
        body = tree.body
        if cls:
            body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls).body
        targets.append(next(n for n in body if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n.name == fn))
    used = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)} | {"logging"}
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound = [(a.asname or a.name).split(".")[0] for a in node.names]
            if not (set(bound) & used) or set(bound) & set(overrides):
                continue
            try:
                exec(compile(ast.Module([node], []), path, "exec"), ns)
            except BaseException:
                for b in bound:
                    ns[b] = _mk("failedimport." + b)
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and node.targets[0].id == "logger":
            exec(compile(ast.Module([node], []), path, "exec"), ns)
    ns.update(overrides)
    import __future__
    for node in targets:
        node.decorator_list = []
        exec(compile(ast.Module([node], []), path, "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True), ns)
    return ns


class _FakeProc:
    def __init__(self, target=None, args=(), kwargs=None): self.args = args; self.target = target; self.pid = 0
    def start(self): SPAWNS.append(self.args)

class _FakeConn:
    def recv(self): return {}
    def send(self, x): pass
    def close(self): pass

SPAWNS = []
_fake_mp = types.SimpleNamespace(Process=_FakeProc, Pipe=lambda duplex=False: (_FakeConn(), _FakeConn()))
_null_cm = contextlib.nullcontext


class _FakePortArgs:
    @staticmethod
    def init_new(*a, **k): return types.SimpleNamespace(nccl_port=0, tokenizer_ipc_name="", detokenizer_ipc_name="", instance_id=0, scheduler_input_ipc_name="")


def _fake_model_config():
    return types.SimpleNamespace(
        hf_config=types.SimpleNamespace(architectures=["DeepseekV3ForCausalLM"], model_type="deepseek_v3"),
        hf_text_config=types.SimpleNamespace(model_type="deepseek_v3"),
        is_multimodal=False, dtype=None)


# Fields normally filled from GPU memory / the checkpoint by hooks we do not run.
HARNESS_DEFAULTS = {"chunked_prefill_size": 8192, "served_model_name": "fake-deepseek-v3"}

TOPO_HOOKS_0523 = {"handle_deprecated_dp_attention", "handle_data_parallelism", "handle_context_parallelism",
                   "handle_decode_context_parallelism", "handle_a2a_moe", "handle_cuda_graph_config"}


def run_0523(root, cfg):
    """SGLang >= 0.5.21 layout (runtime_context.publish + arg_groups pipeline)."""
    import torch
    from sglang.srt.server_args import ServerArgs
    import sglang.srt.arg_groups.pipeline as pipeline
    import sglang.srt.arg_groups.parallel_hook as ph
    import sglang.srt.arg_groups.moe_hook as mh
    import sglang.srt.arg_groups.overrides as ov
    from sglang.srt import runtime_context as rc
    real_run_hook = pipeline.run_hook
    RAN = set()
    def only_topology_hooks(fn, *a, **k):
        if fn.__name__ in TOPO_HOOKS_0523:
            RAN.add(fn.__name__)
            return real_run_hook(fn, *a, **k)
    pipeline.run_hook = only_topology_hooks
    import sglang.srt.arg_groups.muse_spark_hook as msh
    msh.apply_muse_spark_env_defaults = lambda *a, **k: None  # reads the HF checkpoint; no model here
    import sglang.srt.arg_groups.model_override_base as mob
    for mod in [mob] + [m for n, m in list(sys.modules.items()) if n.startswith("sglang.")]:
        if hasattr(mod, "model_config_of"):
            mod.model_config_of = lambda *a, **k: _fake_model_config()

    def make(node_rank):
        kw = {k: v for k, v in cfg.items() if k != "node_rank"}
        kw = {**HARNESS_DEFAULTS, **kw}
        sa = ServerArgs(model_path="/nonexistent/fake-deepseek-v3", node_rank=node_rank, **kw)
        sa.resolve_once()
        sa.check_server_args()
        return sa

    try:
        sa0 = make(cfg.get("node_rank", 0))
    except (AssertionError, ValueError) as e:  # SGLang rejected the arguments
        if os.environ.get("TRUTH_DEBUG"): traceback.print_exc()
        return False, str(e), None

    sched_path = os.path.join(root, "sglang/srt/managers/scheduler.py")
    dpc_path = os.path.join(root, "sglang/srt/managers/data_parallel_controller.py")
    captured = {}
    sched_ns = exec_defs(sched_path, ["resolve_spawn_dp_rank", "configure_scheduler_process"], {
        "setproctitle": types.SimpleNamespace(setproctitle=lambda t: captured.__setitem__("title", t)),
        "configure_logger": lambda server_args, prefix="": captured.__setitem__("prefix", prefix),
        "suppress_other_loggers": lambda: None, "kill_itself_when_parent_died": lambda: None,
        "faulthandler": types.SimpleNamespace(enable=lambda: None),
        "get_parallel": rc.get_parallel,
    })
    dpc_ns = exec_defs(dpc_path, ["DataParallelController.launch_tensor_parallel_group",
                                  "DataParallelController.launch_dp_schedulers",
                                  "DataParallelController.launch_tensor_parallel_group_thread"], {
        "mp": _fake_mp, "PortArgs": _FakePortArgs,
        # the per-replica launcher thread sleeps forever after launching; make it a daemon
        "threading": types.SimpleNamespace(Event=threading.Event, Lock=threading.Lock,
                                           Thread=lambda target, args: threading.Thread(target=target, args=args, daemon=True)),
        "maybe_reindex_device_id": lambda g: _null_cm(g),
        "numa_utils": types.SimpleNamespace(configure_subprocess=lambda *a: _null_cm()),
        "TorchMemorySaverAdapter": types.SimpleNamespace(create=lambda **k: types.SimpleNamespace(configure_subprocess=_null_cm)),
        "bind_port": lambda p: types.SimpleNamespace(close=lambda: None),
        "get_zmq_socket": lambda *a, **k: None,
        "get_parallel": rc.get_parallel, "get_exec": rc.get_exec, "get_device": rc.get_device,
    })
    dpa_path = os.path.join(root, "sglang/srt/layers/dp_attention.py")
    dpa_ns = exec_defs(dpa_path, ["compute_dp_attention_world_info"], {})
    dpc_ns["compute_dp_attention_world_info"] = dpa_ns["compute_dp_attention_world_info"]
    processes = []
    nnodes = cfg.get("nnodes", 1)
    for node_rank in range(nnodes):
        sa = make(node_rank)
        rc.publish(sa, role="dp_controller")
        par = rc.get_parallel()
        SPAWNS.clear()
        ctl = types.SimpleNamespace(env_lock=threading.Lock(), prelaunched_schedulers=None, scheduler_procs=[],
                                    local_kv_event_sources=[], _record_scheduler_init_infos=lambda infos: None,
                                    run_scheduler_process_func="run_scheduler_process",
                                    attn_replica_size=dpc_ns["attn_replica_size"](), context=None,
                                    workers=[None] * 1024)
        L = dpc_ns["launch_tensor_parallel_group"]
        ctl.launch_tensor_parallel_group = lambda *a, **k: L(ctl, *a, **k)
        T = dpc_ns["launch_tensor_parallel_group_thread"]
        ctl.launch_tensor_parallel_group_thread = lambda *a, **k: T(ctl, *a, **k)
        replica_spawns = []
        if par.num_dp_ranks > 1 and not par.attn_dp_enabled:
            # native DP: DataParallelController.launch_dp_schedulers (threads per replica)
            lock = threading.Lock()
            orig = ctl.launch_tensor_parallel_group
            def per_replica(server_args, port_args, base_gpu_id, dp_rank, worker_ports=None):
                with lock:
                    n0 = len(SPAWNS); orig(server_args, port_args, base_gpu_id, dp_rank)
                    replica_spawns.extend([(dp_rank, s) for s in SPAWNS[n0:]])
            ctl.launch_tensor_parallel_group = per_replica
            dpc_ns["launch_dp_schedulers"](ctl, sa, _FakePortArgs.init_new())
        else:
            # attention DP (controller path) or plain TP/PP (same per-node loop, dp_rank None)
            dp_arg = None
            ctl.launch_tensor_parallel_group(sa, _FakePortArgs.init_new(), 0, dp_arg)
            replica_spawns = [(0, s) for s in SPAWNS]
        for replica, args in replica_spawns:
            (_sa, _pa, gpu_id, tp_rank, pp_rank, dp_rank, _w, *display) = args
            dp_rank = sched_ns["resolve_spawn_dp_rank"](dp_rank)
            world_rank = rc.spawn_world_rank(sa, tp_rank=tp_rank, pp_rank=pp_rank)
            rc.publish(sa, role="scheduler", ranks=rc.SpawnRanks(world_rank=world_rank, dp_rank=dp_rank, gpu_id=gpu_id))
            captured.clear()
            sched_ns["configure_scheduler_process"](sa, gpu_id, *display)
            p = rc.get_parallel()
            processes.append(dict(node_rank=node_rank, replica=replica, dp_rank=dp_rank, pp_rank=p.pp_rank,
                                  tp_rank=p.tp_rank, world_rank=world_rank, gpu_id=gpu_id,
                                  attn_dp_rank=p.attn_dp_rank, attn_cp_rank=p.attn_cp_rank, attn_tp_rank=p.attn_tp_rank,
                                  moe_dp_rank=p.moe_dp_rank, moe_ep_rank=p.moe_ep_rank, moe_tp_rank=p.moe_tp_rank,
                                  prefix=captured.get("prefix"), proctitle=captured.get("title")))
        rc.publish(sa0, role="dp_controller")
    processes.sort(key=lambda d: (d["replica"], d["world_rank"]))
    p = rc.get_parallel()
    sizes = dict(tp=p.tp_size, pp=p.pp_size, replicas=(p.num_dp_ranks if not p.attn_dp_enabled else 1),
                 attn_dp=p.attn_dp_size, attn_cp=p.attn_cp_size, attn_tp=p.attn_tp_size, moe_dp=p.moe_dp_size,
                 moe_ep=p.moe_ep_size, moe_tp=p.moe_tp_size, world=p.tp_size * p.pp_size, nnodes=p.nnodes)
    return True, None, dict(sizes=sizes, processes=processes, groups=None, _publish_for_groups=(sa0, processes[0]))


GROUP_KEEP = ["world", "tp", "pp", "attention_tp", "attn_cp", "moe_dp", "moe_ep", "moe_tp", "dcp"]
GLOBAL_OF = {"tp": "_TP", "pp": "_PP", "attention_tp": "_ATTN_TP", "attn_cp": "_ATTN_CP", "moe_dp": "_MOE_DP",
             "moe_ep": "_MOE_EP", "moe_tp": "_MOE_TP", "dcp": "_DCP"}


def groups_0523(sa, npu):
    """Run parallel_state.initialize_model_parallel with torch.distributed mocked and
    init_model_parallel_group replaced by a recorder; aliases by object identity."""
    import torch
    from sglang.srt import runtime_context as rc
    import sglang.srt.distributed.parallel_state as ps
    rc.publish(sa, role="scheduler", ranks=rc.SpawnRanks(world_rank=0, dp_rank=None, gpu_id=0))
    par = rc.get_parallel()
    world = par.tp_size * par.pp_size
    created = {}
    class G:
        def __init__(self, ranks, name): self.ranks = ranks; self.name = name; self.local_rank = 0; self.rank_in_group = 0; self.pynccl_comm = None; self.device_group = None
    def rec(group_ranks, local_rank, backend, *a, group_name=None, **k):
        g = G([list(r) for r in group_ranks], group_name); created[group_name] = g; return g
    for n in GLOBAL_OF.values():
        setattr(ps, n, None)
    if hasattr(ps, "_SHARED_EXPERTS_TP"): ps._SHARED_EXPERTS_TP = None
    if hasattr(ps, "_SELF_PP"): ps._SELF_PP = None
    ps.init_model_parallel_group = rec
    ps._is_npu = bool(npu)
    ps.is_cuda = lambda: not npu  # the platform we pretend to be (no GPU on this machine)
    ps.get_world_group = lambda: created.setdefault("world", G([list(range(world))], "world"))
    torch.distributed.is_initialized = lambda: True
    torch.distributed.get_world_size = lambda *a, **k: world
    torch.distributed.get_rank = lambda *a, **k: 0
    torch.distributed.get_backend = lambda *a, **k: "nccl"
    ps.initialize_model_parallel()
    out = {"world": {"members": created["world"].ranks, "alias_of": None}}
    for name, gvar in GLOBAL_OF.items():
        obj = getattr(ps, gvar, None)
        if obj is None:
            continue
        out[name] = {"members": obj.ranks, "alias_of": None if obj.name == name else obj.name}
    return out


def run_one(root, version, cfg):
    _setup(root)
    ok, err, topo = run_0523(root, cfg)
    if not ok:
        return dict(valid=False, error=err, expected=None)
    sa0, _ = topo.pop("_publish_for_groups")
    topo["groups"] = groups_0523(sa0, cfg.get("device") == "npu")
    return dict(valid=True, error=None, expected=topo)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sglang-root", required=True, help="dir containing the unpacked wheel's sglang/ package")
    ap.add_argument("--version", required=True)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "fixtures/topology/sglang_truth"))
    ap.add_argument("--only", help="config name")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--one-json", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one_json:
        import warnings, logging; warnings.filterwarnings("ignore"); logging.disable(logging.CRITICAL)
        cfg = json.loads(a.one_json)
        try:
            res = run_one(a.sglang_root, a.version, cfg)
        except Exception:
            res = dict(harness_error=traceback.format_exc())
        sys.stdout.write("\n@@RESULT@@" + json.dumps(res))
        return
    from configs_truth import CONFIGS  # noqa
    outdir = os.path.join(a.out, a.version); os.makedirs(outdir, exist_ok=True)
    def one(item):
        name, cfg = item
        r = subprocess.run([sys.executable, __file__, "--sglang-root", a.sglang_root, "--version", a.version,
                            "--one-json", json.dumps(cfg)], capture_output=True, text=True)
        if "@@RESULT@@" not in r.stdout:
            return name + " HARNESS CRASH " + r.stderr[-2000:]
        res = json.loads(r.stdout.split("@@RESULT@@")[-1])
        if "harness_error" in res:
            return name + " HARNESS ERROR " + res["harness_error"][-2500:]
        doc = dict(sglang_version=a.version, config=cfg, **res)
        with open(os.path.join(outdir, name + ".json"), "w") as f:
            json.dump(doc, f, sort_keys=True, indent=1); f.write("\n")
        return name + (" valid" if res["valid"] else " INVALID: " + res["error"][:120])
    items = [(n, c) for n, c in CONFIGS(a.version) if not a.only or n == a.only]
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(a.jobs) as ex:
        for line in ex.map(one, items):
            print(line, flush=True)

if __name__ == "__main__":
    main()
