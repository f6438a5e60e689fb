"""LaunchConfig -> Topology: every scheduler process, its coordinates, and every process group.

All rank arithmetic of logcorr lives here, written from SGLang's own launcher and
`parallel_state.initialize_model_parallel` (checked against SGLang's code by
tests/test_topology_sglang.py). Pure Python; no parsing, no polars.

Worked example (the seed note's table): TP16 with attention DP8, one replica.

    attn_tp = 16 // 8 // 1 = 2        tp_rank = attn_dp_rank * attn_tp + attn_tp_rank
    TP10 -> attn_dp_rank 5, attn_tp_rank 0, prefix " DP5 TP10"

>>> from logcorr.config import LaunchConfig
>>> topo = build_topology(LaunchConfig(tp_size=16, dp_size=8, enable_dp_attention=True))
>>> p = topo.process(0, 10)
>>> (p.attn_dp_rank, p.attn_tp_rank, p.prefix)
(5, 0, ' DP5 TP10')
>>> topo.group_members("attention_tp", 10)
(10, 11)
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from logcorr.config import MAX_GPU_ID, MAX_PROCESSES, LaunchConfig
from logcorr.errors import ConfigError, quoted

# --moe-a2a-backend values: the all-to-all backends force ep_size = tp_size; the others don't.
A2A_EP_SPANNING_BACKENDS = frozenset({
    "deepep", "deepep_v2", "mooncake", "nixl", "mori", "ascend_fuseep", "flashinfer",
    "flashinfer_megamoe", "megamoe", "pplx",
})
A2A_NON_SPANNING_BACKENDS = frozenset({"none", "ascend_tp"})

# Groups in the order SGLang creates them.
GROUP_NAMES: tuple[str, ...] = (
    "world", "tp", "dcp", "attn_cp", "attention_tp", "moe_dp", "moe_ep", "moe_tp", "pp",
    "self_pp",
)

# Prefix token -> the process attribute it prints.
PREFIX_TOKENS: dict[str, str] = {
    "DP": "dp_rank",
    "PP": "pp_rank",
    "ATTN_CP": "attn_cp_rank",
    "MOE_DP": "moe_dp_rank",
    "TP": "tp_rank",
    "EP": "moe_ep_rank",
}


@dataclass(frozen=True)
class Sizes:
    """Widths of every parallel dimension (`world` is one replica's WORLD)."""

    tp: int
    pp: int
    replicas: int
    attn_dp: int
    attn_cp: int
    attn_tp: int
    moe_dp: int
    moe_ep: int
    moe_tp: int
    world: int
    nnodes: int
    dcp: int = 1


@dataclass(frozen=True)
class Process:
    """One scheduler process: every coordinate it has, and how its log lines are labelled."""

    node_rank: int
    replica: int
    dp_rank: int | None
    pp_rank: int
    tp_rank: int
    world_rank: int
    gpu_id: int
    attn_dp_rank: int
    attn_cp_rank: int
    attn_tp_rank: int
    moe_dp_rank: int
    moe_ep_rank: int
    moe_tp_rank: int
    prefix: str
    proctitle: str

    @property
    def key(self) -> tuple[int, int]:
        """Unique id in the deployment: native-DP replicas repeat world ranks."""
        return (self.replica, self.world_rank)

    def prefix_values(self) -> dict[str, int]:
        """The rank tokens its log prefix prints, e.g. {"DP": 5, "TP": 10}."""
        values: dict[str, int] = {}
        for token in self.prefix.split():
            name = token.rstrip("0123456789")
            values[name] = int(token[len(name):])
        return values


@dataclass(frozen=True)
class Group:
    """One SGLang process group: its instances' ordered member lists (world ranks)."""

    name: str
    members: tuple[tuple[int, ...], ...]
    alias_of: str | None  # the group that owns this communicator, when it is the same object


@dataclass(frozen=True)
class Topology:
    config: LaunchConfig
    sizes: Sizes
    processes: tuple[Process, ...]
    groups: dict[str, Group]

    # ---- lookups ------------------------------------------------------------------------

    def process(self, replica: int, world_rank: int) -> Process:
        """The process with world rank `world_rank` in native-DP replica `replica`."""
        return self.processes[replica * self.sizes.world + world_rank]

    def select(self, criteria: dict[str, int]) -> list[Process]:
        """Processes whose attributes equal every value in `criteria` (prefix tokens allowed).

        >>> from logcorr.config import LaunchConfig
        >>> topo = build_topology(LaunchConfig(tp_size=4, dp_size=2))
        >>> [p.key for p in topo.select({"tp_rank": 1})]
        [(0, 1), (1, 1)]
        """
        return [p for p in self.processes if _matches(p, criteria)]

    def group_instance(self, name: str, world_rank: int) -> tuple[int, ...]:
        """The member list of the instance of group `name` that holds `world_rank`."""
        for members in self._group(name).members:
            if world_rank in members:
                return members
        raise ConfigError(f"world rank {world_rank} is outside the {name} group "
                          f"(world size {self.sizes.world})")

    def group_members(self, name: str, world_rank: int) -> tuple[int, ...]:
        return self.group_instance(name, world_rank)

    def rank_in_group(self, name: str, world_rank: int) -> int:
        """`rank_in_group` of `world_rank` in its instance of `name`."""
        return self.group_instance(name, world_rank).index(world_rank)

    def resolve_group_rank(self, name: str, local_rank: int, *, instance_of: int) -> int | None:
        """World rank of group-local rank `local_rank` in the instance of `name` that holds
        world rank `instance_of`; None when the local rank is outside that instance."""
        members = self.group_instance(name, instance_of)
        return members[local_rank] if 0 <= local_rank < len(members) else None

    def _group(self, name: str) -> Group:
        if name not in self.groups:
            known = ", ".join(self.groups)
            raise ConfigError(f"no group named {name!r} in this topology; known: {known}")
        return self.groups[name]

    def owner(self, name: str) -> str:
        """The group that owns the communicator `name` uses (itself unless an alias)."""
        return self._group(name).alias_of or name

    def tag_widths(self) -> dict[str, int]:
        """How many values each coordinate a rank tag shows can take (a tag leaves out those
        of width 1)."""
        s = self.sizes
        return {"replica": s.replicas, "pp_rank": s.pp, "moe_ep_rank": s.moe_ep,
                "dp_rank": max(s.replicas, s.attn_dp), "tp_rank": s.tp,
                "attn_cp_rank": s.attn_cp, "moe_dp_rank": s.moe_dp}

    def processes_on_node(self, node_rank: int) -> list[Process]:
        return [p for p in self.processes if p.node_rank == node_rank]


def _matches(process: Process, criteria: dict[str, int]) -> bool:
    """Criteria by attribute name or prefix token; a token means the rank it prints (`TP3` is
    tp_rank 3), so a line from a version that prints more or fewer tokens still matches."""
    for name, value in criteria.items():
        if getattr(process, PREFIX_TOKENS.get(name, name)) != value:
            return False
    return True


# --------------------------------------------------------------------------- widths & rules


def sizes_of(config: LaunchConfig) -> Sizes:
    """Widths SGLang derives from the launch args (docs/sglang-topology.md §1)."""
    version = config.sglang_version
    tp, pp = config.tp_size, config.pp_size
    if config.attn_dp_size > 1:  # 0.5.22+ spelling (or a resolved dump of it)
        attn_dp, replicas = config.attn_dp_size, config.dp_size
    elif config.enable_dp_attention:  # `--dp N --enable-dp-attention`
        attn_dp, replicas = config.dp_size, 1
    else:
        attn_dp, replicas = 1, config.dp_size
    attn_cp = config.attn_cp_size
    moe_dp = config.moe_dp_size
    moe_ep = _moe_ep_size(config)
    attn_tp = tp // max(attn_dp * attn_cp, 1)
    moe_tp = tp // max(moe_ep * moe_dp, 1)
    if not version.has_attn_cp_and_moe_dp:
        moe_tp = tp // max(moe_ep, 1)
    return Sizes(tp=tp, pp=pp, replicas=replicas, attn_dp=attn_dp, attn_cp=attn_cp,
                 attn_tp=attn_tp, moe_dp=moe_dp, moe_ep=moe_ep, moe_tp=moe_tp,
                 world=tp * pp, nnodes=config.nnodes, dcp=config.dcp_size)


def _moe_ep_size(config: LaunchConfig) -> int:
    backend = (config.moe_a2a_backend or "none").lower()
    if backend in A2A_EP_SPANNING_BACKENDS:
        return config.tp_size
    if config.sglang_version.enable_ep_moe_flags and (
        config.enable_ep_moe or config.enable_deepep_moe
    ):
        return config.tp_size
    return config.ep_size


def check_config(config: LaunchConfig) -> None:
    """Refuse launch args SGLang itself would refuse, naming the rule and the fix."""
    for problem in _problems(config):
        raise ConfigError(f"{config.source}: {problem}")


def _problems(config: LaunchConfig) -> Iterator[str]:
    yield from _basic_problems(config)
    sizes = sizes_of(config)
    yield from _attention_problems(config, sizes)
    yield from _moe_problems(config, sizes)
    yield from _a2a_problems(config, sizes)
    yield from _feature_problems(config, sizes)
    yield from _placement_problems(config, sizes)


def _size_problems(config: LaunchConfig) -> Iterator[str]:
    """A layout too large to build: more than MAX_PROCESSES processes, or GPU ids past a C
    int. (Each field's own range is LaunchConfig's: every width is at least 1 here.) Checked
    before anything is built, with or without SGLang's rules.

    >>> from logcorr.config import LaunchConfig
    >>> list(_size_problems(LaunchConfig(tp_size=512, pp_size=256)))
    ['replicas x tp_size x pp_size = 1 x 512 x 256 = 131,072 scheduler processes, more than the 65,536 logcorr builds a layout of; check the sizes']
    """
    sizes = sizes_of(config)
    processes = sizes.replicas * sizes.world
    if processes > MAX_PROCESSES:
        yield (f"replicas x tp_size x pp_size = {sizes.replicas} x {sizes.tp} x {sizes.pp} = "
               f"{processes:,} scheduler processes, more than the {MAX_PROCESSES:,} logcorr "
               "builds a layout of; check the sizes")
    # (no GPU id of the layout exceeds base_gpu_id + processes x gpu_id_step: see node_slots)
    elif config.base_gpu_id + processes * config.gpu_id_step > MAX_GPU_ID + 1:
        yield (f"base_gpu_id {config.base_gpu_id} + {processes:,} processes x gpu_id_step "
               f"{config.gpu_id_step} runs past the largest GPU id ({MAX_GPU_ID:,}, a CUDA "
               "device index is a C int); check base_gpu_id and gpu_id_step")


def _basic_problems(config: LaunchConfig) -> Iterator[str]:
    yield from _size_problems(config)
    if config.node_rank is not None and not 0 <= config.node_rank < config.nnodes:
        yield (f"node_rank {config.node_rank} is outside 0..{config.nnodes - 1} "
               f"(nnodes={config.nnodes}); fix --node-rank or --nnodes")
    backend = (config.moe_a2a_backend or "none").lower()
    if backend not in A2A_EP_SPANNING_BACKENDS | A2A_NON_SPANNING_BACKENDS:
        yield (f"unknown moe_a2a_backend {quoted(config.moe_a2a_backend)}; SGLang accepts "
               f"{', '.join(sorted(A2A_EP_SPANNING_BACKENDS | A2A_NON_SPANNING_BACKENDS))}")
    version = config.sglang_version
    if not version.has_attn_cp_and_moe_dp and (config.attn_cp_size > 1 or config.moe_dp_size > 1):
        yield (f"attn_cp_size and moe_dp_size need SGLang 0.5.9 or newer (version {version}); "
               "pass --sglang-version or drop them")
    if not version.has_dcp and config.dcp_size > 1:
        yield (f"dcp_size needs SGLang 0.5.15 or newer (version {version}); pass "
               "--sglang-version or drop it")
    if not version.has_pipeline_parallel and config.pp_size > 1:
        yield f"pipeline parallelism needs SGLang 0.4.7 or newer (version {version})"
    yield from _dwdp_problems(config)
    dense = config.moe_dense_tp_size
    allowed = (1, config.tp_size) if version.moe_dense_tp_may_be_tp else (1,)
    if dense is not None and dense not in allowed:
        yield (f"moe_dense_tp_size only supports None, 1{', or tp_size' if len(allowed) > 1 else ''}"
               f" (SGLang {version}), got {dense}; drop --moe-dense-tp-size or set it to 1")


def _dwdp_problems(config: LaunchConfig) -> Iterator[str]:
    if config.dwdp_size <= 1:
        return
    if not config.sglang_version.has_dwdp:
        yield (f"dwdp_size needs SGLang 0.5.17 or newer (version {config.sglang_version}); "
               "pass --sglang-version or drop it")
    elif config.dwdp_size != config.tp_size:
        yield f"dwdp_size ({config.dwdp_size}) must equal tp_size ({config.tp_size})"
    elif config.pp_size != 1:
        yield "DWDP requires pp_size == 1"


def _attention_problems(config: LaunchConfig, sizes: Sizes) -> Iterator[str]:
    if config.attn_dp_size > 1 and config.dp_size > 1:
        yield (f"dp_size {config.dp_size} with attn_dp_size {config.attn_dp_size}: data-parallel "
               "replicas combined with attention data parallelism are not supported; use one")
    if sizes.tp % sizes.attn_cp:
        yield (f"tp_size {sizes.tp} must be divisible by attn_cp_size {sizes.attn_cp}")
    elif sizes.tp % (sizes.attn_dp * sizes.attn_cp):
        yield (f"tp_size {sizes.tp} must be divisible by attention-DP size {sizes.attn_dp} x "
               f"attn_cp_size {sizes.attn_cp}; choose a dp/attn-dp size that divides tp")
    if sizes.tp % sizes.dcp:
        yield f"tp_size {sizes.tp} must be divisible by dcp_size {sizes.dcp}"
    # (with one DP rank SGLang turns the flag off; with native DP replicas it refuses it)
    if config.enable_dp_lm_head and sizes.replicas > 1:
        yield ("enable_dp_lm_head needs attention data parallelism (--enable-dp-attention, or "
               "--attn-dp-size from 0.5.22); with dp_size replicas drop --enable-dp-lm-head")


def _moe_problems(config: LaunchConfig, sizes: Sizes) -> Iterator[str]:
    tp, ep, moe_dp = sizes.tp, sizes.moe_ep, sizes.moe_dp
    if moe_dp > 1:
        if tp % moe_dp:
            yield f"tp_size {tp} must be divisible by moe_dp_size {moe_dp}"
        if ep * moe_dp > tp:
            yield (f"ep_size {ep} x moe_dp_size {moe_dp} must be at most tp_size {tp}")
        elif ep > 1 and ep * moe_dp != tp:
            yield (f"ep_size {ep} x moe_dp_size {moe_dp} must equal tp_size {tp} when "
                   "expert parallelism is on; use --no-validate to compute the layout anyway")
        if sizes.pp > 1:
            yield "moe_dp_size > 1 is not supported together with pipeline parallelism (pp_size > 1)"
    if (config.sglang_version.moe_dp_needs_equal_attn_cp and sizes.attn_cp != moe_dp
            and moe_dp != 1):
        yield (f"attn_cp_size {sizes.attn_cp} != moe_dp_size {moe_dp} is only supported when "
               "moe_dp_size == 1; set --attn-cp-size equal to --moe-dp-size")
    if ep * moe_dp > tp and moe_dp == 1:
        yield f"ep_size {ep} must be at most tp_size {tp}"
    elif tp % (ep * moe_dp):
        yield f"tp_size {tp} must be divisible by ep_size {ep} x moe_dp_size {moe_dp}"


def _attention_dp_on(config: LaunchConfig, sizes: Sizes) -> bool:
    """Whether SGLang runs attention DP: 0.5.23 asks `attn_dp_size > 1` (the deprecated
    `--enable-dp-attention --dp 1` is no attention DP); older releases asked the flag."""
    if config.sglang_version.at_least(0, 5, 23):
        return sizes.attn_dp > 1
    return sizes.attn_dp > 1 or config.enable_dp_attention


def _a2a_backend(config: LaunchConfig) -> str:
    """The all-to-all backend SGLang runs: `--enable-waterfill` moves any backend other than
    deepep / megamoe to deepep (0.5.23 overrides.py `_a2a_backend_overrides`); from 0.5.22
    `ascend_tp` runs as none (moe_hook.py `handle_a2a_moe`)."""
    backend = (config.moe_a2a_backend or "none").lower()
    if config.enable_waterfill and backend not in ("deepep", "megamoe"):
        return "deepep"
    if backend == "ascend_tp" and config.sglang_version.at_least(0, 5, 22):
        return "none"
    return backend


def _a2a_problems(config: LaunchConfig, sizes: Sizes) -> Iterator[str]:
    """All-to-all backends that need a given layout (0.5.23 arg_groups/moe_hook.py
    `handle_a2a_moe`)."""
    version = config.sglang_version
    backend = _a2a_backend(config)
    dp_on = _attention_dp_on(config, sizes)
    full_attn_dp = dp_on and sizes.attn_dp == sizes.tp
    # Muse Spark's LayerNorm SP runs flashinfer without attention DP at TP4/TP8; the model
    # is not in the launch args, so that case is let through.
    layernorm_sp_exception = (config.enable_layernorm_sp and not dp_on
                              and sizes.tp in (4, 8))
    if (backend == "flashinfer" and version.at_least(0, 5, 16) and not full_attn_dp
            and not layernorm_sp_exception):
        yield (f"moe_a2a_backend flashinfer needs attention DP over the whole TP group "
               f"(--attn-dp-size {sizes.tp} with --tp-size {sizes.tp}), got attention-DP size "
               f"{sizes.attn_dp}; SGLang: \"Flashinfer MoE A2A requires --attn-dp-size equal "
               "to --tp-size\"")
    if backend == "flashinfer_megamoe" and version.at_least(0, 5, 20) and not full_attn_dp:
        yield (f"moe_a2a_backend flashinfer_megamoe needs attention DP over the whole TP group "
               f"(--attn-dp-size {sizes.tp} with --tp-size {sizes.tp}), got attention-DP size "
               f"{sizes.attn_dp}; SGLang: \"FlashInfer MegaMOE is only supported with "
               "--attn-dp-size equal to --tp-size\"")
    if backend == "pplx" and version.at_least(0, 5, 20) and sizes.attn_dp < 2:
        yield (f"moe_a2a_backend pplx needs attention DP with at least 2 groups "
               f"(--attn-dp-size >= 2), got {sizes.attn_dp}; add --attn-dp-size or pick "
               "another --moe-a2a-backend")
    v2_mode = (config.deepep_v2_mode or "direct").lower()
    if (backend == "deepep_v2" and version.at_least(0, 5, 22) and v2_mode == "direct"
            and sizes.nnodes > 1):
        yield (f"moe_a2a_backend deepep_v2 in --deepep-v2-mode direct (the default) is "
               f"NVLink-only and cannot run across nodes (nnodes={sizes.nnodes}); pass "
               "--deepep-v2-mode hybrid")


def _feature_problems(config: LaunchConfig, sizes: Sizes) -> Iterator[str]:
    """Flags SGLang refuses with some layouts (0.5.23 arg_groups/overrides.py,
    validation_hook.py, layernorm_sp_hook.py, parallel_hook.py)."""
    version = config.sglang_version
    dp_on = _attention_dp_on(config, sizes)
    if config.enable_tp_lm_head_all_to_all and version.at_least(0, 5, 22):
        if not dp_on:
            yield ("enable_tp_lm_head_all_to_all needs attention DP (--attn-dp-size); drop "
                   "--enable-tp-lm-head-all-to-all or add attention DP")
        elif config.enable_dp_lm_head:
            yield ("enable_tp_lm_head_all_to_all uses a TP-sharded LM head and is "
                   "incompatible with --enable-dp-lm-head; drop one of them")
        elif sizes.tp != sizes.attn_dp:
            yield (f"enable_tp_lm_head_all_to_all needs tp_size == attn_dp_size, got tp_size "
                   f"{sizes.tp}, attn_dp_size {sizes.attn_dp}; drop the flag or set "
                   f"--attn-dp-size {sizes.tp}")
        elif sizes.attn_cp != 1:
            yield (f"enable_tp_lm_head_all_to_all needs attn_cp_size 1, got {sizes.attn_cp}; "
                   "drop the flag or --attn-cp-size")
    if config.enable_two_batch_overlap:
        if (version.at_least(0, 5, 16) and _a2a_backend(config) == "none" and not dp_on
                and config.dwdp_size <= 1):
            yield ("enable_two_batch_overlap without an EP all-to-all backend "
                   "(moe_a2a_backend none) needs attention DP (--attn-dp-size); add one of "
                   "them or drop --enable-two-batch-overlap")
        if config.dwdp_size > 1 and version.at_least(0, 5, 20):
            yield ("DWDP (--dwdp-size) does not support two-batch overlap; drop "
                   "--enable-two-batch-overlap")
    if config.enable_layernorm_sp and version.at_least(0, 5, 20):
        if sizes.tp <= 1:
            yield ("enable_layernorm_sp needs tp_size > 1: there is no sequence to shard "
                   "across a single TP rank")
        if dp_on:
            yield ("enable_layernorm_sp is not compatible with attention DP (SP shards the "
                   "sequence across the whole TP group); drop one of them")
        if sizes.pp > 1 and version.at_least(0, 5, 22):
            yield ("enable_layernorm_sp is not compatible with pipeline parallelism "
                   "(pp_size > 1); drop one of them")


def _placement_problems(config: LaunchConfig, sizes: Sizes) -> Iterator[str]:
    if (sizes.tp * sizes.pp) % sizes.nnodes:
        yield (f"tp_size x pp_size ({sizes.tp * sizes.pp}) must be divisible by nnodes "
               f"{sizes.nnodes}")
    if sizes.replicas > 1 and sizes.nnodes > 1:
        yield ("multi-node data-parallel replicas are not supported; use attention DP "
               "(--enable-dp-attention / --attn-dp-size) across nodes")
    if sizes.nnodes > sizes.pp and sizes.nnodes % sizes.pp:
        yield (f"nnodes {sizes.nnodes} must be a multiple of pp_size {sizes.pp} when a pipeline "
               "stage spans several nodes")


# --------------------------------------------------------------------------- processes


def build_topology(config: LaunchConfig, *, validate: bool = True) -> Topology:
    """Every scheduler process and process group of the deployment `config` launches.

    Without `validate`, layouts SGLang refuses are computed anyway, but sizes must still be
    positive and the deployment of a size logcorr can list.
    """
    if validate:
        check_config(config)
    for problem in _size_problems(config):
        raise ConfigError(f"{config.source}: {problem}")
    sizes = sizes_of(config)
    if min(sizes.attn_tp, sizes.moe_tp, sizes.world) < 1:
        raise ConfigError(f"{config.source}: the widths leave no rank for attention or MoE "
                          "tensor parallelism; check tp_size against dp/cp/ep sizes")
    processes = sorted(_spawn_all(config, sizes), key=lambda p: p.key)
    return Topology(config=config, sizes=sizes, processes=tuple(processes),
                    groups=build_groups(config, sizes))


def _spawn_all(config: LaunchConfig, sizes: Sizes) -> Iterator[Process]:
    """Replay the launcher on every node: pp-major, tp-minor, per replica."""
    for replica in range(sizes.replicas):
        for node_rank in range(sizes.nnodes):
            for pp_rank, tp_rank, gpu_id in node_slots(config, sizes, node_rank, replica):
                yield make_process(config, sizes, node_rank, replica, pp_rank, tp_rank, gpu_id)


def node_slots(
    config: LaunchConfig, sizes: Sizes, node_rank: int, replica: int
) -> Iterator[tuple[int, int, int]]:
    """(pp_rank, tp_rank, gpu_id) of the schedulers one node launches, in launch order.

    Example: TP4 x PP2 on 2 nodes -> node 0 runs PP0 (TP0..3 on GPUs 0..3), node 1 runs PP1.
    >>> from logcorr.config import LaunchConfig
    >>> c = LaunchConfig(tp_size=4, pp_size=2, nnodes=2)
    >>> list(node_slots(c, sizes_of(c), 1, 0))
    [(1, 0, 0), (1, 1, 1), (1, 2, 2), (1, 3, 3)]
    """
    pp_per_node = max(sizes.pp // sizes.nnodes, 1)
    nodes_per_pp = max(sizes.nnodes // sizes.pp, 1)
    tp_per_node = sizes.tp // nodes_per_pp
    first_pp = pp_per_node * (node_rank // nodes_per_pp)
    first_tp = tp_per_node * (node_rank % nodes_per_pp)
    replica_offset = replica * config.sglang_version.replica_gpu_stride(
        sizes.tp, sizes.pp, config.gpu_id_step)
    for pp_rank in range(first_pp, first_pp + pp_per_node):
        for tp_rank in range(first_tp, first_tp + tp_per_node):
            gpu_id = (config.base_gpu_id + replica_offset
                      + (pp_rank % pp_per_node) * tp_per_node
                      + (tp_rank % tp_per_node) * config.gpu_id_step)
            yield pp_rank, tp_rank, gpu_id


def make_process(
    config: LaunchConfig, sizes: Sizes, node_rank: int, replica: int, pp_rank: int,
    tp_rank: int, gpu_id: int,
) -> Process:
    """All coordinates of the scheduler at (replica, pp_rank, tp_rank)."""
    ranks = decompose_tp_rank(tp_rank, sizes, config)
    if sizes.replicas > 1:
        dp_rank: int | None = replica
    elif sizes.attn_dp > 1:
        dp_rank = ranks["attn_dp_rank"]
    else:
        dp_rank = None
    prefix = format_prefix(config, sizes, dp_rank=dp_rank, pp_rank=pp_rank, tp_rank=tp_rank,
                           **{k: ranks[k] for k in ("attn_cp_rank", "moe_dp_rank", "moe_ep_rank")})
    return Process(node_rank=node_rank, replica=replica, dp_rank=dp_rank, pp_rank=pp_rank,
                   tp_rank=tp_rank, world_rank=sizes.tp * pp_rank + tp_rank, gpu_id=gpu_id,
                   prefix=prefix, proctitle="sglang::scheduler" + prefix.replace(" ", "_"),
                   **ranks)


def decompose_tp_rank(tp_rank: int, sizes: Sizes, config: LaunchConfig) -> dict[str, int]:
    """tp_rank -> attention (dp, cp, tp) and MoE (dp, ep, tp) ranks, last varying fastest.

    TP8, attn_cp 2, moe_dp 2, ep 4 (moe_tp 1):
    | tp_rank | attn (dp,cp,tp) | moe (dp,ep,tp) |
    |   6     | (0, 1, 2)       | (1, 2, 0)      |
    >>> from logcorr.config import LaunchConfig
    >>> c = LaunchConfig(tp_size=8, attn_cp_size=2, moe_dp_size=2, ep_size=4)
    >>> r = decompose_tp_rank(6, sizes_of(c), c)
    >>> (r["moe_dp_rank"], r["moe_ep_rank"], r["moe_tp_rank"], r["attn_cp_rank"])
    (1, 2, 0, 1)
    """
    t, tp = tp_rank, sizes.tp
    attn_cp_rank = (t // sizes.attn_tp) % sizes.attn_cp
    moe_block = tp // sizes.moe_dp  # ranks per moe_dp index
    moe_dp_rank = t // moe_block
    if sizes.moe_dp < sizes.attn_cp and config.sglang_version.moe_dp_rank_from_attn_cp:
        moe_dp_rank = attn_cp_rank
    return {
        "attn_dp_rank": t // (sizes.attn_tp * sizes.attn_cp),
        "attn_cp_rank": attn_cp_rank,
        "attn_tp_rank": t % sizes.attn_tp,
        "moe_dp_rank": moe_dp_rank,
        "moe_ep_rank": (t % moe_block) // (moe_block // sizes.moe_ep),
        "moe_tp_rank": t % sizes.moe_tp,
    }


def compose_tp_rank(sizes: Sizes, *, attn_dp_rank: int, attn_cp_rank: int,
                    attn_tp_rank: int) -> int:
    """Inverse of the attention decomposition: (dp, cp, tp) -> tp_rank."""
    return (attn_dp_rank * sizes.attn_cp + attn_cp_rank) * sizes.attn_tp + attn_tp_rank


def compose_moe_tp_rank(sizes: Sizes, *, moe_dp_rank: int, moe_ep_rank: int,
                        moe_tp_rank: int) -> int:
    """Inverse of the MoE decomposition: (moe_dp, ep, moe_tp) -> tp_rank."""
    return (moe_dp_rank * sizes.moe_ep + moe_ep_rank) * sizes.moe_tp + moe_tp_rank


def format_prefix(config: LaunchConfig, sizes: Sizes, *, dp_rank: int | None, pp_rank: int,
                  attn_cp_rank: int, moe_dp_rank: int, tp_rank: int, moe_ep_rank: int) -> str:
    """The text SGLang puts after the timestamp of a scheduler's log lines, in its version's
    token order (e.g. " DP5 TP10 EP10"; "" for a TP1 scheduler of a recent version)."""
    version = config.sglang_version
    shown = {
        "DP": dp_rank,
        "PP": pp_rank if sizes.pp > 1 else None,
        "ATTN_CP": attn_cp_rank if sizes.attn_cp > 1 else None,
        "MOE_DP": moe_dp_rank if sizes.moe_dp > 1 else None,
        "TP": tp_rank if sizes.tp > 1 or version.tp_token_always else None,
        "EP": moe_ep_rank if sizes.moe_ep > 1 else None,
    }
    return "".join(f" {name}{shown[name]}" for name in version.prefix_order
                   if shown.get(name) is not None)


# --------------------------------------------------------------------------- groups


def build_groups(config: LaunchConfig, sizes: Sizes) -> dict[str, Group]:
    """Every group `initialize_model_parallel` builds, with SGLang's alias rules.

    TP8 with moe_dp 2, ep 4, attn_cp 2 (moe_tp 1):
        moe_ep = [0 1 2 3] [4 5 6 7]      moe_dp = attn_cp = [0 4] [1 5] [2 6] [3 7]
    """
    version = config.sglang_version
    tp_blocks = [range(g * sizes.tp, (g + 1) * sizes.tp) for g in range(sizes.pp)]
    groups: dict[str, Group] = {"world": Group("world", (tuple(range(sizes.world)),), None)}
    groups["tp"] = Group("tp", tuple(tuple(block) for block in tp_blocks), None)
    if sizes.dcp > 1:
        groups["dcp"] = Group("dcp", _slices(tp_blocks, sizes.dcp), None)
    if version.has_attn_cp_and_moe_dp:
        _add(groups, "attn_cp", sizes.attn_cp == sizes.tp and "tp",
             _strided(tp_blocks, sizes.attn_tp * sizes.attn_cp, sizes.attn_tp))
    own_attention_tp = not version.attention_tp_in_parallel_state
    _add(groups, "attention_tp", sizes.attn_tp == sizes.tp and not own_attention_tp and "tp",
         _slices(tp_blocks, sizes.attn_tp))
    if version.has_attn_cp_and_moe_dp:
        if version.moe_dp_aliases_attn_cp and sizes.attn_cp > sizes.moe_dp:
            moe_dp_alias: str | bool = "attn_cp"
        else:
            moe_dp_alias = sizes.moe_dp == sizes.tp and "tp"
        _add(groups, "moe_dp", moe_dp_alias,
             _strided(tp_blocks, sizes.tp, sizes.moe_tp * sizes.moe_ep))
    if version.has_moe_groups:
        alias = version.moe_groups_alias_tp
        npu_own_ep = config.is_npu and version.npu_standalone_moe_ep
        _add(groups, "moe_ep", alias and sizes.moe_ep == sizes.tp and not npu_own_ep and "tp",
             _strided(tp_blocks, sizes.moe_ep * sizes.moe_tp, sizes.moe_tp))
        _add(groups, "moe_tp", alias and sizes.moe_tp == sizes.tp and "tp",
             _slices(tp_blocks, sizes.moe_tp))
    groups["pp"] = Group("pp", tuple(tuple(range(i, sizes.world, sizes.tp))
                                     for i in range(sizes.tp)), None)
    if version.has_self_pp:
        groups["self_pp"] = Group("self_pp", tuple((rank,) for rank in range(sizes.world)), None)
    return groups


def _add(groups: dict[str, Group], name: str, alias: str | bool,
         members: tuple[tuple[int, ...], ...]) -> None:
    if isinstance(alias, str):
        owner = groups[alias].alias_of or alias
        groups[name] = Group(name, groups[owner].members, owner)
    else:
        groups[name] = Group(name, members, None)


def _slices(blocks: Iterable[range], width: int) -> tuple[tuple[int, ...], ...]:
    """Contiguous runs of `width` ranks inside each TP block."""
    return tuple(tuple(block[i:i + width]) for block in blocks
                 for i in range(0, len(block), width))


def _strided(blocks: Iterable[range], span: int, stride: int) -> tuple[tuple[int, ...], ...]:
    """Inside each span of `span` ranks of a TP block, one group per offset < stride, taking
    every `stride`-th rank: span 8, stride 2 -> [0 2 4 6] [1 3 5 7]."""
    return tuple(tuple(block[start + offset:start + span:stride])
                 for block in blocks for start in range(0, len(block), span)
                 for offset in range(stride))


# --------------------------------------------------------------------------- JSON view


def topology_to_json(topology: Topology) -> dict[str, object]:
    """The `logcorr topology --format json` document (a contract other tools compare)."""
    s = topology.sizes
    sizes = {"tp": s.tp, "pp": s.pp, "replicas": s.replicas, "attn_dp": s.attn_dp,
             "attn_cp": s.attn_cp, "attn_tp": s.attn_tp, "moe_dp": s.moe_dp, "moe_ep": s.moe_ep,
             "moe_tp": s.moe_tp, "world": s.world, "nnodes": s.nnodes}
    processes = [{name: getattr(p, name) for name in PROCESS_FIELDS} for p in topology.processes]
    groups = {g.name: {"members": [list(m) for m in g.members], "alias_of": g.alias_of}
              for g in topology.groups.values()}
    return {"sizes": sizes, "processes": processes, "groups": groups}


PROCESS_FIELDS: tuple[str, ...] = (
    "node_rank", "replica", "dp_rank", "pp_rank", "tp_rank", "world_rank", "gpu_id",
    "attn_dp_rank", "attn_cp_rank", "attn_tp_rank", "moe_dp_rank", "moe_ep_rank", "moe_tp_rank",
    "prefix", "proctitle",
)
