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
        is_multimodal=False, dtype=None, is_piecewise_cuda_graph_disabled_model=False,
        nvfp4_moe_meta=None, is_fp4_experts=False)


# Fields normally filled from GPU memory / the checkpoint by hooks we do not run.
HARNESS_DEFAULTS = {"chunked_prefill_size": 8192, "served_model_name": "fake-deepseek-v3"}

TOPO_HOOKS_0523 = {"handle_deprecated_dp_attention", "handle_data_parallelism", "handle_context_parallelism",
                   "handle_decode_context_parallelism", "handle_a2a_moe", "handle_cuda_graph_config",
                   "handle_dwdp"}


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
    try:
        import sglang.srt.arg_groups.muse_spark_hook as msh
        msh.apply_muse_spark_env_defaults = lambda *a, **k: None  # reads the HF checkpoint; no model here
    except ModuleNotFoundError:  # < 0.5.21
        pass
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



# ---------------------------------------------------------------------------
# SGLang <= 0.5.20 adapter ("legacy"): ranks are computed by the launcher and passed to
# run_scheduler_process as arguments; no runtime_context ranks. Works on 0.5.20 (arg_groups
# pipeline + runtime_context.publish without ranks) and on versions where ServerArgs.__post_init__
# does all the resolution (<= 0.5.9: server_args.* read directly).
# ---------------------------------------------------------------------------

class _StopAfterPrefix(BaseException):
    """Raised by the captured configure_logger: the prefix is known, stop the scheduler body."""


def _module_ns(path, used, overrides):
    """Exec the top-level imports of SGLang's file `path` binding a name in `used` (stubs on failure)."""
    tree = ast.parse(open(path).read())
    ns = {"__name__": "sglang_truth_exec", "__builtins__": __builtins__}
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
        elif isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name) and (
                node.targets[0].id == "logger" or node.targets[0].id in used):
            try:
                exec(compile(ast.Module([node], []), path, "exec"), ns)
            except BaseException:
                ns[node.targets[0].id] = _mk("failedassign." + node.targets[0].id)
    ns.update(overrides)
    return ns


def _find_def(tree, qualname):
    cls, _, fn = qualname.rpartition(".")
    body = tree.body
    if cls:
        body = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls).body
    return next(n for n in body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == fn)


def exec_branch(path, qualname, test_src, overrides, local_vars):
    """Exec, from SGLang's source `path`, the body of the `if <test_src>:` statement found in
    function `qualname`, in a namespace of the module's imports + `overrides` + `local_vars`.
    Returns the namespace (the branch's locals). Source lines are kept (tracebacks point into SGLang)."""
    tree = ast.parse(open(path).read())
    fn = _find_def(tree, qualname)
    node = next(n for n in ast.walk(fn) if isinstance(n, ast.If) and ast.unparse(n.test) == test_src)
    used = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {"logging"}
    # module-level helper functions the branch calls (e.g. _calculate_rank_ranges), transitively
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    helpers, todo = [], [d for d in used if d in defs]
    while todo:
        d = todo.pop()
        if d in helpers: continue
        helpers.append(d)
        inner = {n.id for n in ast.walk(defs[d]) if isinstance(n, ast.Name)}
        used |= inner
        todo += [x for x in inner if x in defs and x not in helpers]
    ns = _module_ns(path, used, overrides)
    import __future__
    for d in helpers:
        defs[d].decorator_list = []
        exec(compile(ast.Module([defs[d]], []), path, "exec", flags=__future__.annotations.compiler_flag, dont_inherit=True), ns)
    ns.update(local_vars)
    exec(compile(ast.Module(node.body, []), path, "exec"), ns)
    USED.setdefault("engine_helpers", sorted(helpers))
    return ns


def _param_names(path, qualname):
    fn = _find_def(ast.parse(open(path).read()), qualname)
    return [a.arg for a in fn.args.args] + [a.arg for a in fn.args.kwonlyargs]


TOPO_POSTINIT_OLD = {"_handle_data_parallelism", "_handle_context_parallelism", "_handle_legacy_cp_arguments",
                     "_handle_dcp_validation", "_handle_a2a_moe", "_handle_deprecated_args",
                     "_handle_pipeline_parallelism", "_handle_moe_kernel_config"}


# <= 0.5.9: set by _handle_page_size / _handle_gpu_memory_settings, which are not run
LEGACY_DEFAULTS = {"page_size": 1, "mem_fraction_static": 0.85}


def run_legacy(root, version, cfg):
    import torch, re
    # 0.5.x server_args imports FLA's CHUNK_SIZE (a mamba default); its module probes the triton driver
    # at import time. Provide that constant read from the source instead of importing the module.
    for modname in ("sglang.srt.layers.attention.fla.chunk_delta_h", "sglang.kernels.ops.attention.fla.chunk_delta_h"):
        fla = os.path.join(root, *modname.split(".")) + ".py"
        if os.path.exists(fla) and re.search(r"^CHUNK_SIZE = \d+", open(fla).read(), re.M):
            m = types.ModuleType(modname)
            m.CHUNK_SIZE = int(re.search(r"^CHUNK_SIZE = (\d+)", open(fla).read(), re.M).group(1))
            sys.modules[m.__name__] = m
    import sglang.srt.server_args as sam
    from sglang.srt.server_args import ServerArgs
    has_pipeline = hasattr(ServerArgs, "resolve_once")
    rc = None
    if has_pipeline:  # 0.5.20: arg_groups pipeline, runtime_context without ranks
        import sglang.srt.arg_groups.pipeline as pipeline
        from sglang.srt import runtime_context as rc
        real_run_hook = pipeline.run_hook
        def only_topology_hooks(fn, *a, **k):
            if fn.__name__ in TOPO_HOOKS_0523:
                return real_run_hook(fn, *a, **k)
        pipeline.run_hook = only_topology_hooks
        import sglang.srt.arg_groups.model_override_base as mob
        for mod in [mob] + [m for n, m in list(sys.modules.items()) if n.startswith("sglang.")]:
            if hasattr(mod, "model_config_of"):
                mod.model_config_of = lambda *a, **k: _fake_model_config()
    else:  # <= 0.5.9: ServerArgs.__post_init__ calls _handle_* methods; keep only the topology ones
        # every self._x() step called by __post_init__ is a no-op except the topology ones
        pi = _find_def(ast.parse(open(sam.__file__).read()), "ServerArgs.__post_init__")
        steps = {n.func.attr for n in ast.walk(pi) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                 and isinstance(n.func.value, ast.Name) and n.func.value.id == "self" and n.func.attr.startswith("_")}
        for name in steps:
            if name not in TOPO_POSTINIT_OLD and hasattr(ServerArgs, name):
                setattr(ServerArgs, name, lambda self, *a, **k: None)
        USED["post_init_ran"] = sorted(steps & TOPO_POSTINIT_OLD)
        if hasattr(sam, "get_device"):  # 0.4.x: __post_init__ probes torch.hpu/cuda when device is None
            sam.get_device = lambda *a, **k: cfg.get("device") or "cuda"
        if hasattr(sam, "get_config"):  # 0.4.x: model-specific adjustments read the HF config
            sam.get_config = lambda *a, **k: _fake_model_config().hf_config
        if hasattr(sam, "get_device_memory_capacity"):
            sam.get_device_memory_capacity = lambda *a, **k: 80 * 1024
        sam.is_cuda = lambda: cfg.get("device") != "npu"
        if hasattr(ServerArgs, "get_model_config"):  # reads the HF checkpoint; stub DeepSeek-V3 config
            ServerArgs.get_model_config = lambda self: _fake_model_config()

    def make(node_rank):
        kw = {k: v for k, v in cfg.items() if k != "node_rank"}
        kw = {**HARNESS_DEFAULTS, **({} if has_pipeline else LEGACY_DEFAULTS), **kw}
        sa = ServerArgs(model_path="/nonexistent/fake-deepseek-v3", node_rank=node_rank, **kw)
        if has_pipeline:
            sa.resolve_once()
        sa.check_server_args()
        return sa

    try:
        sa0 = make(cfg.get("node_rank", 0))
    except (AssertionError, ValueError) as e:
        if os.environ.get("TRUTH_DEBUG"): traceback.print_exc()
        return False, str(e), None

    def P():  # the values the launcher reads (get_parallel()/get_device() in 0.5.20, server_args before)
        return rc.get_parallel() if rc else CUR[0]
    CUR = [sa0]
    sched_path = os.path.join(root, "sglang/srt/managers/scheduler.py")
    dpc_path = os.path.join(root, "sglang/srt/managers/data_parallel_controller.py")
    eng_path = os.path.join(root, "sglang/srt/entrypoints/engine.py")
    dpa_path = os.path.join(root, "sglang/srt/layers/dp_attention.py")
    captured = {}
    def cap_logger(server_args, prefix=""):
        captured["prefix"] = prefix
        raise _StopAfterPrefix()
    fake_psutil = types.SimpleNamespace(Process=lambda *a: types.SimpleNamespace(parent=lambda: None))
    common = {
        "mp": _fake_mp, "PortArgs": _FakePortArgs,
        "threading": types.SimpleNamespace(Event=threading.Event, Lock=threading.Lock,
                                           Thread=lambda target, args: threading.Thread(target=target, args=args, daemon=True)),
        "maybe_reindex_device_id": lambda g: _null_cm(g),
        "numa_utils": types.SimpleNamespace(configure_subprocess=lambda *a: _null_cm()),
        "TorchMemorySaverAdapter": types.SimpleNamespace(create=lambda **k: types.SimpleNamespace(configure_subprocess=_null_cm)),
        "bind_port": lambda p: types.SimpleNamespace(close=lambda: None),
        "get_zmq_socket": lambda *a, **k: None,
    }
    if rc:
        common.update(get_parallel=rc.get_parallel, get_exec=rc.get_exec, get_device=rc.get_device)
    sched_names = ["run_scheduler_process"]
    if "def configure_scheduler_process" in open(sched_path).read():
        sched_names.append("configure_scheduler_process")
    sched_ns = exec_defs(sched_path, sched_names, {
        "setproctitle": types.SimpleNamespace(setproctitle=lambda t: captured.__setitem__("title", t)),
        "configure_logger": cap_logger, "psutil": fake_psutil, "load_plugins": lambda: None,
        "suppress_other_loggers": lambda: None, "kill_itself_when_parent_died": lambda: None,
        "faulthandler": types.SimpleNamespace(enable=lambda: None),
        **({"publish": rc.publish, "get_parallel": rc.get_parallel} if rc else {}),
    })
    sched_params = _param_names(sched_path, "run_scheduler_process")
    dpc_ns = exec_defs(dpc_path, ["DataParallelController.launch_tensor_parallel_group",
                                  "DataParallelController.launch_dp_schedulers",
                                  "DataParallelController.launch_tensor_parallel_group_thread"], dict(common))
    dpa_ns = exec_defs(dpa_path, ["compute_dp_attention_world_info"], {})
    cdawi = dpa_ns["compute_dp_attention_world_info"]
    dpc_ns["compute_dp_attention_world_info"] = cdawi
    eng_src = open(eng_path).read()
    if "def _launch_scheduler_processes(\n        cls," in eng_src:
        eng_fn, eng_test = "Engine._launch_scheduler_processes", "not use_dp_controller"
    elif "\ndef _launch_scheduler_processes(" in eng_src:
        eng_fn, eng_test = "_launch_scheduler_processes", "server_args.dp_size == 1"
    else:
        eng_fn, eng_test = "_launch_subprocesses", "server_args.dp_size == 1"
    USED.update(engine=f"{eng_fn} branch `if {eng_test}:`")

    processes = []
    for node_rank in range(cfg.get("nnodes", 1)):
        sa = make(node_rank); CUR[0] = sa
        if rc: rc.publish(sa, role="dp_controller")
        SPAWNS.clear()
        replica_spawns = []
        if P().dp_size > 1:
            ctl = types.SimpleNamespace(env_lock=threading.Lock(), scheduler_procs=[], context=None,
                                        workers=[None] * 1024, server_args=sa, prelaunched_schedulers=None,
                                        local_kv_event_sources=[], _record_scheduler_init_infos=lambda infos: None,
                                        run_scheduler_process_func="run_scheduler_process")
            L = dpc_ns["launch_tensor_parallel_group"]
            ctl.launch_tensor_parallel_group = lambda *a, **k: L(ctl, *a, **k)
            T = dpc_ns["launch_tensor_parallel_group_thread"]
            ctl.launch_tensor_parallel_group_thread = lambda *a, **k: T(ctl, *a, **k)
            if not P().enable_dp_attention:
                lock = threading.Lock(); orig = ctl.launch_tensor_parallel_group
                def per_replica(server_args, port_args, base_gpu_id, dp_rank, *rest, **kw):
                    with lock:
                        n0 = len(SPAWNS)
                        try:
                            orig(server_args, port_args, base_gpu_id, dp_rank)
                        except (KeyError, TypeError, AttributeError):  # after the spawn loop (reading scheduler infos)
                            pass
                        replica_spawns.extend([(dp_rank, s) for s in SPAWNS[n0:]])
                ctl.launch_tensor_parallel_group = per_replica
                dpc_ns["launch_dp_schedulers"](ctl, sa, _FakePortArgs.init_new())
                USED.update(spawn="DataParallelController.launch_dp_schedulers -> launch_tensor_parallel_group_thread -> launch_tensor_parallel_group")
            else:
                try:
                    ctl.launch_tensor_parallel_group(sa, _FakePortArgs.init_new(), 0, None)
                except (KeyError, TypeError, AttributeError):
                    if not SPAWNS: raise
                replica_spawns = [(0, s) for s in SPAWNS]
                USED.update(spawn_dpattn="DataParallelController.launch_tensor_parallel_group(base_gpu_id=0, dp_rank=None)")
        else:
            exec_branch(eng_path, eng_fn, eng_test, dict(common), dict(
                server_args=sa, port_args=_FakePortArgs.init_new(), run_scheduler_process_func="run_scheduler_process",
                scheduler_procs=[], cls=None, run_scheduler_process="run_scheduler_process"))
            replica_spawns = [(0, s) for s in SPAWNS]
        for replica, args in replica_spawns:
            a = dict(zip(sched_params, args))
            captured.clear()
            try:
                sched_ns["run_scheduler_process"](*args)
            except _StopAfterPrefix:
                pass
            tp_rank, pp_rank, dp_rank = a["tp_rank"], a.get("pp_rank", 0), a["dp_rank"]
            if dp_rank is None and "SGLANG_DP_RANK" in os.environ: dp_rank = int(os.environ["SGLANG_DP_RANK"])
            r = cdawi(P().enable_dp_attention, tp_rank, P().tp_size, P().dp_size,
                      *([P().attn_cp_size] if "attn_cp_size" in _param_names(dpa_path, "compute_dp_attention_world_info") else []))
            attn_tp_rank, attn_tp_size, attn_dp_rank = r[0], r[1], r[2]
            processes.append(dict(node_rank=node_rank, replica=replica, dp_rank=dp_rank, pp_rank=pp_rank,
                                  tp_rank=tp_rank, world_rank=P().tp_size * pp_rank + tp_rank, gpu_id=a["gpu_id"],
                                  attn_dp_rank=attn_dp_rank, attn_cp_rank=a.get("attn_cp_rank", 0), attn_tp_rank=attn_tp_rank,
                                  moe_dp_rank=a.get("moe_dp_rank", 0),
                                  # not passed by versions without EP ranks (0.4.x): 0 only when trivially so (ep 1)
                                  moe_ep_rank=a.get("moe_ep_rank", 0 if P().ep_size == 1 else None), moe_tp_rank=None,
                                  prefix=captured.get("prefix"), proctitle=captured.get("title")))
    CUR[0] = sa0
    if rc: rc.publish(sa0, role="dp_controller")
    processes.sort(key=lambda d: (d["replica"], d["world_rank"]))
    p = P()
    attn_dp = p.dp_size if p.enable_dp_attention else 1
    attn_cp = getattr(p, "attn_cp_size", 1); moe_dp = getattr(p, "moe_dp_size", 1)
    sizes = dict(tp=p.tp_size, pp=getattr(p, "pp_size", 1), replicas=(p.dp_size if not p.enable_dp_attention else 1),
                 attn_dp=attn_dp, attn_cp=attn_cp, attn_tp=p.tp_size // attn_dp // attn_cp, moe_dp=moe_dp,
                 moe_ep=p.ep_size, moe_tp=p.tp_size // moe_dp // p.ep_size, world=p.tp_size * getattr(p, "pp_size", 1),
                 nnodes=p.nnodes)
    return True, None, dict(sizes=sizes, processes=processes, groups=None, _publish_for_groups=(sa0, processes[0]))


USED = {}


def groups_legacy(sa, npu, rc=None):
    """Real initialize_model_parallel with the kwargs ModelRunner / bootstrap pass (read from source)."""
    import torch, inspect
    import sglang.srt.distributed.parallel_state as ps
    V = sa  # where the resolved values live: ServerArgs (<= 0.5.16) or the published context (0.5.20)
    if rc is not None:
        rc.publish(sa, role="scheduler")
        V = rc.get_parallel()  # e.g. deepep's ep_size = tp_size is only in the resolved view in 0.5.20
    tp, pp = V.tp_size, getattr(V, "pp_size", 1)
    world = tp * pp
    created = {}
    class G:
        def __init__(self, ranks, name): self.ranks = ranks; self.name = name; self.local_rank = 0; self.rank_in_group = 0; self.pynccl_comm = None; self.device_group = None; self.world_size = len(ranks[0]) if ranks else 1
    def rec(group_ranks, local_rank, backend, *a, group_name=None, **k):
        g = G([list(r) for r in group_ranks], group_name); created[group_name] = g; return g
    for n in GLOBAL_OF.values():
        if hasattr(ps, n): setattr(ps, n, None)
    for extra in ("_SHARED_EXPERTS_TP", "_SELF_PP", "_PDMUX_PREFILL_TP_GROUP"):
        if hasattr(ps, extra): setattr(ps, extra, None)
    ps.init_model_parallel_group = rec
    if hasattr(ps, "_is_npu"): ps._is_npu = bool(npu)
    if hasattr(ps, "is_npu"): ps.is_npu = lambda: bool(npu)
    ps.is_cuda = lambda: not npu
    ps.get_world_group = lambda: created.setdefault("world", G([list(range(world))], "world"))
    torch.distributed.is_initialized = lambda: True
    torch.distributed.get_world_size = lambda *a, **k: world
    torch.distributed.get_rank = lambda *a, **k: 0
    torch.distributed.get_backend = lambda *a, **k: "nccl"
    attn_dp = V.dp_size if V.enable_dp_attention else 1
    kw = dict(tensor_model_parallel_size=tp, expert_model_parallel_size=V.ep_size,
              pipeline_model_parallel_size=pp, attention_data_parallel_size=attn_dp,
              attention_context_model_parallel_size=getattr(V, "attn_cp_size", 1),
              moe_data_model_parallel_size=getattr(V, "moe_dp_size", 1),
              decode_context_parallel_size=getattr(V, "dcp_size", 1) or 1)
    params = inspect.signature(ps.initialize_model_parallel).parameters
    ps.initialize_model_parallel(**{k: v for k, v in kw.items() if k in params})
    USED.update(imp_kwargs=sorted(k for k in kw if k in params))
    if not hasattr(ps, "_ATTN_TP"):
        # before the attention-TP group moved into parallel_state, it was created by
        # layers/dp_attention.initialize_dp_attention as a GroupCoordinator named "attention_tp"
        import sglang.srt.layers.dp_attention as dpa
        sys.modules.setdefault("sglang.srt.layers.sampler", types.SimpleNamespace(SYNC_TOKEN_IDS_ACROSS_TP=False))
        dpa.GroupCoordinator = lambda group_ranks, local_rank, backend, *a, group_name=None, **k: rec(group_ranks, local_rank, backend, group_name=group_name)
        dpa.get_tp_group = lambda: ps._TP
        dpa.get_tensor_model_parallel_rank = lambda: 0
        if hasattr(dpa, "_DpGatheredBufferWrapper"):
            dpa._DpGatheredBufferWrapper = types.SimpleNamespace(set_metadata=lambda **k: None)
        mc = types.SimpleNamespace(hidden_size=7168, dtype=torch.bfloat16)
        if getattr(sa, "device", None) is None:
            sa.device = "cpu"  # only used for the gathered-buffer metadata (stubbed)
        import inspect as _insp
        if "server_args" in _insp.signature(dpa.initialize_dp_attention).parameters:
            dpa.initialize_dp_attention(sa, mc)
        else:  # 0.4.x: the args ModelRunner passes
            dpa.initialize_dp_attention(enable_dp_attention=sa.enable_dp_attention, tp_rank=0, tp_size=sa.tp_size,
                                        dp_size=sa.dp_size, moe_dense_tp_size=sa.moe_dense_tp_size, pp_size=sa.pp_size)
        USED.update(attention_tp="layers/dp_attention.initialize_dp_attention")
        GLOBAL_OF_EXTRA["attention_tp"] = (dpa, "_ATTN_TP_GROUP")
    out = {"world": {"members": created["world"].ranks, "alias_of": None}}
    for name, gvar in GLOBAL_OF.items():
        mod, var = GLOBAL_OF_EXTRA.get(name, (ps, gvar))
        obj = getattr(mod, var, None)
        if obj is None:
            continue
        out[name] = {"members": obj.ranks, "alias_of": None if obj.name == name else obj.name}
    return out


GROUP_KEEP = ["world", "tp", "pp", "attention_tp", "attn_cp", "moe_dp", "moe_ep", "moe_tp", "dcp"]
GLOBAL_OF = {"tp": "_TP", "pp": "_PP", "attention_tp": "_ATTN_TP", "attn_cp": "_ATTN_CP", "moe_dp": "_MOE_DP",
             "moe_ep": "_MOE_EP", "moe_tp": "_MOE_TP", "dcp": "_DCP", "self_pp": "_SELF_PP"}


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


def _vt(v):
    return tuple(int(x) for x in v.split(".")[:3])


GLOBAL_OF_EXTRA = {}


def run_one(root, version, cfg):
    _setup(root)
    if _vt(version) >= (0, 5, 21):
        ok, err, topo = run_0523(root, cfg)
        if not ok:
            return dict(valid=False, error=err, expected=None)
        sa0, _ = topo.pop("_publish_for_groups")
        topo["groups"] = groups_0523(sa0, cfg.get("device") == "npu")
        return dict(valid=True, error=None, expected=topo)
    ok, err, topo = run_legacy(root, version, cfg)
    if not ok:
        return dict(valid=False, error=err, expected=None)
    sa0, _ = topo.pop("_publish_for_groups")
    rc = None
    if hasattr(sa0, "resolve_once"):
        from sglang.srt import runtime_context as rc
    topo["groups"] = groups_legacy(sa0, cfg.get("device") == "npu", rc)
    # moe_tp_rank (and nothing else) is the rank in the recorded moe_tp group: what
    # parallel_state.get_moe_tensor_parallel_rank() returns (rank_in_group = ranks.index(rank)).
    mt = topo["groups"].get("moe_tp")
    for pr in topo["processes"]:
        if mt is not None:
            g = next(g for g in mt["members"] if pr["world_rank"] in g)
            pr["moe_tp_rank"] = g.index(pr["world_rank"])
        elif topo["sizes"]["moe_tp"] == 1:  # no moe_tp group in this version (0.4.x); trivially 0
            pr["moe_tp_rank"] = 0
    return dict(valid=True, error=None, expected=topo, _used=USED)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sglang-root", required=True, help="dir containing the unpacked wheel's sglang/ package")
    ap.add_argument("--version", required=True)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "fixtures/topology/sglang_truth"))
    ap.add_argument("--only", help="config name(s), comma-separated")
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
        used = res.pop("_used", None)
        doc = dict(sglang_version=a.version, config=cfg, **res)
        with open(os.path.join(outdir, name + ".json"), "w") as f:
            json.dump(doc, f, sort_keys=True, indent=1); f.write("\n")
        return name + (" valid" if res["valid"] else " INVALID: " + res["error"][:120]) + (" " + json.dumps(used) if used and os.environ.get("TRUTH_DEBUG") else "")
    items = [(n, c) for n, c in CONFIGS(a.version) if not a.only or n in a.only.split(",")]
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(a.jobs) as ex:
        for line in ex.map(one, items):
            print(line, flush=True)

if __name__ == "__main__":
    main()
