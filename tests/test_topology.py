"""The topology model: golden layouts from the seed note and SGLang's code, and properties."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logcorr.config import LaunchConfig
from logcorr.errors import ConfigError
from logcorr.topology import (
    build_topology,
    check_config,
    compose_moe_tp_rank,
    compose_tp_rank,
    sizes_of,
)
from logcorr.versions import parse_version


def topo(**fields: object):  # type: ignore[no-untyped-def]
    version = fields.pop("version", None)
    validate = bool(fields.pop("validate", True))
    if version is not None:
        fields["sglang_version"] = parse_version(str(version))
    return build_topology(LaunchConfig(**fields), validate=validate)  # type: ignore[arg-type]


class TestSeedTables:
    """The seed note's worked tables."""

    def test_tp16_dp8_attention_grid(self) -> None:
        """TP16 + attention DP8: attn_tp 2, row k of the grid is TP2k, TP2k+1."""
        t = topo(tp_size=16, dp_size=8, enable_dp_attention=True)
        assert (t.sizes.attn_dp, t.sizes.attn_tp, t.sizes.replicas) == (8, 2, 1)
        grid = [[p.tp_rank for p in t.processes if p.attn_dp_rank == d] for d in range(8)]
        assert grid == [[2 * d, 2 * d + 1] for d in range(8)]
        p10 = t.process(0, 10)
        assert (p10.attn_dp_rank, p10.attn_tp_rank, p10.dp_rank) == (5, 0, 5)
        assert p10.prefix == " DP5 TP10"

    def test_tp16_dp8_without_attention_dp_is_128_workers(self) -> None:
        """Native DP8 x TP16: eight whole replicas, TP ranks restart per replica."""
        t = topo(tp_size=16, dp_size=8)
        assert t.sizes.replicas == 8 and len(t.processes) == 128
        assert [p.tp_rank for p in t.processes if p.replica == 3] == list(range(16))
        assert t.process(3, 4).prefix == " DP3 TP4"

    def test_tp8_moe_dp2_ep4(self) -> None:
        """tp_rank 6 -> (moe_dp 1, moe_ep 2, moe_tp 0); groups as in the seed's table."""
        t = topo(tp_size=8, moe_dp_size=2, ep_size=4, attn_cp_size=2)
        p6 = t.process(0, 6)
        assert (p6.moe_dp_rank, p6.moe_ep_rank, p6.moe_tp_rank) == (1, 2, 0)
        assert t.groups["moe_ep"].members == ((0, 1, 2, 3), (4, 5, 6, 7))
        assert t.groups["moe_dp"].members == ((0, 4), (1, 5), (2, 6), (3, 7))

    def test_tp8_moe_dp2_ep4_needs_attn_cp(self) -> None:
        """SGLang refuses moe_dp 2 without attn_cp 2; --no-validate still computes it."""
        with pytest.raises(ConfigError, match="only supported when moe_dp_size == 1"):
            topo(tp_size=8, moe_dp_size=2, ep_size=4)
        t = topo(tp_size=8, moe_dp_size=2, ep_size=4, validate=False)
        assert t.groups["moe_dp"].members == ((0, 4), (1, 5), (2, 6), (3, 7))
        assert t.groups["moe_dp"].alias_of is None

    def test_tp16_moe_dp2_ep4_unvalidated(self) -> None:
        """Refused by SGLang (ep*moe_dp != tp); unvalidated: tp 10 -> (1, 1, 0), moe_tp 2."""
        with pytest.raises(ConfigError, match="must equal tp_size"):
            topo(tp_size=16, moe_dp_size=2, ep_size=4, attn_cp_size=2)
        t = topo(tp_size=16, moe_dp_size=2, ep_size=4, validate=False)
        p10 = t.process(0, 10)
        assert t.sizes.moe_tp == 2
        assert (p10.moe_dp_rank, p10.moe_ep_rank, p10.moe_tp_rank) == (1, 1, 0)
        assert [p.tp_rank for p in t.processes if (p.moe_dp_rank, p.moe_ep_rank) == (0, 0)] \
            == [0, 1]


class TestAliases:
    """Which groups share a communicator."""

    def test_ep_equal_tp_aliases_on_cuda(self) -> None:
        t = topo(tp_size=8, ep_size=8)
        assert t.groups["moe_ep"].alias_of == "tp"
        assert t.groups["moe_tp"].members == tuple((r,) for r in range(8))

    def test_npu_gets_its_own_moe_ep_group(self) -> None:
        t = topo(tp_size=8, ep_size=8, device="npu")
        assert t.groups["moe_ep"].alias_of is None
        assert t.groups["moe_ep"].members == (tuple(range(8)),)

    def test_npu_aliased_before_0_5_16(self) -> None:
        t = topo(tp_size=8, ep_size=8, device="npu", version="0.5.15")
        assert t.groups["moe_ep"].alias_of == "tp"

    def test_moe_dp_follows_attn_cp_to_its_owner(self) -> None:
        """attn_cp == tp makes attn_cp an alias of tp; moe_dp (aliased to attn_cp) owns tp."""
        t = topo(tp_size=4, attn_cp_size=4)
        assert t.groups["attn_cp"].alias_of == "tp"
        assert t.groups["moe_dp"].alias_of == "tp"

    def test_moe_dp_alias_of_attn_cp_from_0_5_15(self) -> None:
        new = topo(tp_size=8, attn_cp_size=4)
        old = topo(tp_size=8, attn_cp_size=4, version="0.5.10")
        assert new.groups["moe_dp"].alias_of == "attn_cp"
        assert new.groups["attn_cp"].members == ((0, 2, 4, 6), (1, 3, 5, 7))
        assert old.groups["moe_dp"].alias_of is None
        assert old.groups["moe_dp"].members == tuple((r,) for r in range(8))

    def test_moe_dp_rank_from_attn_cp_rank_since_0_5_21(self) -> None:
        """TP8 attn_cp 4: world 2 has moe_dp_rank 1 in 0.5.23 but 0 in 0.5.20."""
        assert topo(tp_size=8, attn_cp_size=4).process(0, 2).moe_dp_rank == 1
        assert topo(tp_size=8, attn_cp_size=4, version="0.5.20").process(0, 2).moe_dp_rank == 0


class TestPlacement:
    """Which node and GPU each scheduler runs on."""

    def test_tp4_pp2_two_nodes(self) -> None:
        t = topo(tp_size=4, pp_size=2, nnodes=2)
        assert [(p.node_rank, p.pp_rank, p.gpu_id) for p in t.processes] == \
            [(0, 0, g) for g in range(4)] + [(1, 1, g) for g in range(4)]
        assert t.groups["pp"].members == ((0, 4), (1, 5), (2, 6), (3, 7))
        assert t.process(0, 5).prefix == " PP1 TP1"

    def test_pp_on_one_node_stacks_gpus(self) -> None:
        t = topo(tp_size=2, pp_size=2)
        assert [p.gpu_id for p in t.processes] == [0, 1, 2, 3]

    def test_pp2_tp8_on_four_nodes(self) -> None:
        """Each PP stage spans two nodes; TP ranks 0-3 on the first, 4-7 on the second."""
        t = topo(tp_size=8, pp_size=2, nnodes=4)
        assert [(p.node_rank, p.gpu_id) for p in t.processes[:8]] == \
            [(0, g) for g in range(4)] + [(1, g) for g in range(4)]
        assert {p.node_rank for p in t.processes if p.pp_rank == 1} == {2, 3}

    def test_native_dp_with_base_gpu_and_step(self) -> None:
        t = topo(tp_size=4, dp_size=2, base_gpu_id=1, gpu_id_step=2)
        assert [p.gpu_id for p in t.processes if p.replica == 0] == [1, 3, 5, 7]
        assert [p.gpu_id for p in t.processes if p.replica == 1] == [9, 11, 13, 15]
        assert t.process(1, 2).proctitle == "sglang::scheduler_DP1_TP2"

    def test_native_dp_replica_stride_before_0_5_2(self) -> None:
        t = topo(tp_size=2, pp_size=2, dp_size=2, version="0.4.9")
        assert [p.gpu_id for p in t.processes if p.replica == 1] == [2, 3, 4, 5]

    def test_pp_term_not_scaled_by_step(self) -> None:
        """SGLang's own formula gives two processes one GPU here; reproduce it."""
        t = topo(tp_size=2, pp_size=2, gpu_id_step=2)
        assert [p.gpu_id for p in t.processes] == [0, 2, 2, 4]

    def test_multi_node_native_dp_refused(self) -> None:
        with pytest.raises(ConfigError, match="multi-node data-parallel"):
            topo(tp_size=8, dp_size=2, nnodes=2)


class TestPrefix:
    """The prefix and its token order across versions."""

    def test_tp1_has_empty_prefix(self) -> None:
        p = topo(tp_size=1).process(0, 0)
        assert (p.prefix, p.proctitle, p.dp_rank) == ("", "sglang::scheduler", None)

    def test_tp1_prefix_shows_tp0_in_old_versions(self) -> None:
        assert topo(tp_size=1, version="0.4.5").process(0, 0).prefix == " TP0"

    @pytest.mark.parametrize(("version", "prefix"), [
        ("0.5.23", " DP1 PP1 TP3 EP3"),
        ("0.5.7", " DP1 PP1 TP3 EP3"),
        ("0.5.3", " DP1 TP3 EP3 PP1"),
    ])
    def test_token_order(self, version: str, prefix: str) -> None:
        t = topo(tp_size=4, pp_size=2, dp_size=2, enable_dp_attention=True,
                 moe_a2a_backend="deepep", version=version)
        assert t.process(0, 7).prefix == prefix

    def test_attn_cp_and_moe_dp_tokens(self) -> None:
        t = topo(tp_size=8, attn_cp_size=2, moe_dp_size=2, ep_size=4)
        assert t.process(0, 6).prefix == " ATTN_CP1 MOE_DP1 TP6 EP2"

    def test_a2a_backend_forces_ep(self) -> None:
        assert sizes_of(LaunchConfig(tp_size=8, moe_a2a_backend="deepep")).moe_ep == 8
        assert sizes_of(LaunchConfig(tp_size=8, moe_a2a_backend="ascend_tp")).moe_ep == 1

    def test_attn_dp_size_spelling(self) -> None:
        """0.5.22+ `--attn-dp-size 4` is the old `--dp 4 --enable-dp-attention`."""
        new = topo(tp_size=8, attn_dp_size=4)
        old = topo(tp_size=8, dp_size=4, enable_dp_attention=True)
        assert new.processes == old.processes


class TestValidation:
    """Launch args SGLang refuses, refused with SGLang's rule."""

    @pytest.mark.parametrize(("fields", "rule"), [
        ({"tp_size": 6, "dp_size": 4, "enable_dp_attention": True}, "divisible by attention-DP"),
        ({"tp_size": 8, "ep_size": 16}, "at most tp_size"),
        ({"tp_size": 8, "nnodes": 3}, "divisible by nnodes"),
        ({"tp_size": 8, "gpu_id_step": 0}, "gpu_id_step must be at least 1"),
        ({"tp_size": 8, "base_gpu_id": -1}, "base_gpu_id must be non-negative"),
        ({"tp_size": 0}, "tp_size must be at least 1"),
        ({"tp_size": 8, "attn_dp_size": 2, "dp_size": 2}, "replicas combined"),
        ({"tp_size": 8, "moe_a2a_backend": "bogus"}, "unknown moe_a2a_backend"),
        ({"tp_size": 8, "node_rank": 2, "nnodes": 2}, "node_rank 2 is outside"),
    ])
    def test_refused(self, fields: dict[str, object], rule: str) -> None:
        with pytest.raises(ConfigError, match=rule):
            check_config(LaunchConfig(**fields))  # type: ignore[arg-type]


class TestLayoutBoundBackendsAndFlags:
    """All-to-all backends and flags SGLang 0.5.23 accepts only with some layouts
    (arg_groups/moe_hook.py `handle_a2a_moe`, overrides.py `_dp_lm_head_validation`,
    validation_hook.py `check_two_batch_overlap`, parallel_hook.py `handle_dwdp`,
    layernorm_sp_hook.py `validate_layernorm_sp`); each refusal next to the layout it needs."""

    @pytest.mark.parametrize(("refused", "accepted", "rule"), [
        ({"tp_size": 8, "moe_a2a_backend": "flashinfer"},
         {"tp_size": 8, "attn_dp_size": 8, "moe_a2a_backend": "flashinfer"},
         "flashinfer needs attention DP over the whole TP group"),
        ({"tp_size": 8, "attn_dp_size": 4, "moe_a2a_backend": "flashinfer"},
         {"tp_size": 8, "dp_size": 8, "enable_dp_attention": True, "moe_a2a_backend": "flashinfer"},
         "got attention-DP size 4"),
        ({"tp_size": 8, "dp_size": 2, "moe_a2a_backend": "flashinfer_megamoe"},
         {"tp_size": 8, "attn_dp_size": 8, "moe_a2a_backend": "flashinfer_megamoe"},
         "flashinfer_megamoe needs attention DP"),
        ({"tp_size": 8, "ep_size": 8, "moe_a2a_backend": "pplx"},
         {"tp_size": 8, "attn_dp_size": 2, "moe_a2a_backend": "pplx"},
         "pplx needs attention DP with at least 2 groups"),
        ({"tp_size": 16, "nnodes": 2, "moe_a2a_backend": "deepep_v2"},
         {"tp_size": 16, "nnodes": 2, "moe_a2a_backend": "deepep_v2", "deepep_v2_mode": "hybrid"},
         "NVLink-only and cannot run across nodes"),
        ({"tp_size": 8, "enable_tp_lm_head_all_to_all": True},
         {"tp_size": 8, "attn_dp_size": 8, "enable_tp_lm_head_all_to_all": True},
         "enable_tp_lm_head_all_to_all needs attention DP"),
        ({"tp_size": 8, "attn_dp_size": 4, "enable_tp_lm_head_all_to_all": True},
         {"tp_size": 4, "attn_dp_size": 4, "enable_tp_lm_head_all_to_all": True},
         "needs tp_size == attn_dp_size"),
        ({"tp_size": 8, "attn_dp_size": 8, "enable_tp_lm_head_all_to_all": True,
          "enable_dp_lm_head": True},
         {"tp_size": 8, "attn_dp_size": 8, "enable_dp_lm_head": True},
         "incompatible with --enable-dp-lm-head"),
        ({"tp_size": 8, "enable_two_batch_overlap": True},
         {"tp_size": 8, "attn_dp_size": 2, "enable_two_batch_overlap": True},
         "two_batch_overlap without an EP all-to-all backend"),
        ({"tp_size": 8, "moe_a2a_backend": "ascend_tp", "enable_two_batch_overlap": True},
         {"tp_size": 8, "moe_a2a_backend": "deepep", "enable_two_batch_overlap": True},
         "two_batch_overlap without an EP all-to-all backend"),
        ({"tp_size": 8, "dwdp_size": 8, "enable_two_batch_overlap": True},
         {"tp_size": 8, "dwdp_size": 8},
         "DWDP .* does not support two-batch overlap"),
        ({"tp_size": 1, "enable_layernorm_sp": True},
         {"tp_size": 2, "enable_layernorm_sp": True},
         "enable_layernorm_sp needs tp_size > 1"),
        ({"tp_size": 8, "attn_dp_size": 2, "enable_layernorm_sp": True},
         {"tp_size": 8, "enable_layernorm_sp": True},
         "enable_layernorm_sp is not compatible with attention DP"),
        ({"tp_size": 4, "pp_size": 2, "enable_layernorm_sp": True},
         {"tp_size": 4, "pp_size": 1, "enable_layernorm_sp": True},
         "enable_layernorm_sp is not compatible with pipeline parallelism"),
    ])
    def test_refused_only_without_the_layout(self, refused: dict[str, object],
                                             accepted: dict[str, object], rule: str) -> None:
        with pytest.raises(ConfigError, match=rule):
            check_config(LaunchConfig(**refused))  # type: ignore[arg-type]
        check_config(LaunchConfig(**accepted))  # type: ignore[arg-type]

    def test_waterfill_runs_deepep(self) -> None:
        """--enable-waterfill moves the backend to deepep, so two-batch overlap needs no
        attention DP then."""
        check_config(LaunchConfig(tp_size=8, enable_two_batch_overlap=True, enable_waterfill=True))

    def test_layernorm_sp_lets_flashinfer_run_without_attention_dp(self) -> None:
        """Muse Spark's LayerNorm SP runs flashinfer at TP4/TP8 without attention DP; the model
        is not in the launch args, so the layout is not refused."""
        check_config(LaunchConfig(tp_size=8, moe_a2a_backend="flashinfer", enable_layernorm_sp=True))
        with pytest.raises(ConfigError, match="flashinfer needs attention DP"):
            check_config(LaunchConfig(tp_size=2, moe_a2a_backend="flashinfer",
                                      enable_layernorm_sp=True))

    @pytest.mark.parametrize(("fields", "before"), [
        ({"tp_size": 8, "moe_a2a_backend": "flashinfer"}, "0.5.15"),
        ({"tp_size": 8, "moe_a2a_backend": "pplx"}, "0.5.19"),
        ({"tp_size": 16, "nnodes": 2, "moe_a2a_backend": "deepep_v2"}, "0.5.21"),
        ({"tp_size": 8, "enable_tp_lm_head_all_to_all": True}, "0.5.21"),
        ({"tp_size": 8, "enable_two_batch_overlap": True}, "0.5.15"),
    ])
    def test_not_refused_before_sglang_had_the_rule(self, fields: dict[str, object],
                                                    before: str) -> None:
        check_config(LaunchConfig(**fields, sglang_version=parse_version(before)))  # type: ignore[arg-type]
        with pytest.raises(ConfigError):
            check_config(LaunchConfig(**fields))  # type: ignore[arg-type]

    def test_deprecated_dp_attention_flag_without_dp_is_no_attention_dp(self) -> None:
        """0.5.23 turns `--enable-dp-attention` with dp_size 1 into attn_dp_size 1 (off);
        0.5.20 asked the flag itself."""
        fields = {"tp_size": 8, "enable_dp_attention": True, "enable_two_batch_overlap": True}
        with pytest.raises(ConfigError, match="needs attention DP"):
            check_config(LaunchConfig(**fields))  # type: ignore[arg-type]
        check_config(LaunchConfig(**fields, sglang_version=parse_version("0.5.20")))  # type: ignore[arg-type]


# --------------------------------------------------------------------------- properties


@st.composite
def valid_configs(draw: st.DrawFn) -> LaunchConfig:
    """Random layouts SGLang accepts."""
    attn_cp = draw(st.sampled_from([1, 1, 2, 4]))
    attn_dp = draw(st.sampled_from([1, 2, 4]))
    attn_tp = draw(st.sampled_from([1, 2, 4]))
    tp = attn_dp * attn_cp * attn_tp
    moe_dp = draw(st.sampled_from([1, attn_cp]))
    ep = draw(st.sampled_from(sorted({1, tp // moe_dp} | ({2} if tp % (2 * moe_dp) == 0 else set())
                                     if moe_dp == 1 else {1, tp // moe_dp})))
    pp = 1 if moe_dp > 1 else draw(st.sampled_from([1, 2, 4]))
    replicas = 1 if attn_dp > 1 else draw(st.sampled_from([1, 2]))
    nnodes = 1 if replicas > 1 else draw(st.sampled_from(
        [n for n in (1, 2, 4) if (tp * pp) % n == 0 and (n <= pp or n % pp == 0)]))
    return LaunchConfig(tp_size=tp, pp_size=pp, dp_size=replicas, attn_dp_size=attn_dp,
                        attn_cp_size=attn_cp, moe_dp_size=moe_dp, ep_size=ep, nnodes=nnodes,
                        base_gpu_id=draw(st.sampled_from([0, 2])),
                        device=draw(st.sampled_from(["cuda", "npu"])))


class TestProperties:
    """Invariants over random valid layouts."""

    @settings(max_examples=300, deadline=None)
    @given(valid_configs())
    def test_groups_partition_the_world(self, config: LaunchConfig) -> None:
        t = build_topology(config)
        widths = {"tp": t.sizes.tp, "pp": t.sizes.pp, "attention_tp": t.sizes.attn_tp,
                  "attn_cp": t.sizes.attn_cp, "moe_ep": t.sizes.moe_ep, "moe_tp": t.sizes.moe_tp,
                  "world": t.sizes.world}
        for name, group in t.groups.items():
            flat = [r for members in group.members for r in members]
            assert sorted(flat) == list(range(t.sizes.world)), name
            if group.alias_of is None and name in widths:
                assert {len(m) for m in group.members} == {widths[name]}, name

    @settings(max_examples=300, deadline=None)
    @given(valid_configs())
    def test_decomposition_inverts(self, config: LaunchConfig) -> None:
        t = build_topology(config)
        for p in t.processes:
            assert compose_tp_rank(t.sizes, attn_dp_rank=p.attn_dp_rank,
                                   attn_cp_rank=p.attn_cp_rank,
                                   attn_tp_rank=p.attn_tp_rank) == p.tp_rank
            if t.sizes.moe_dp >= t.sizes.attn_cp:
                assert compose_moe_tp_rank(t.sizes, moe_dp_rank=p.moe_dp_rank,
                                           moe_ep_rank=p.moe_ep_rank,
                                           moe_tp_rank=p.moe_tp_rank) == p.tp_rank
            assert p.world_rank == p.pp_rank * t.sizes.tp + p.tp_rank

    @settings(max_examples=300, deadline=None)
    @given(valid_configs())
    def test_rank_in_group_matches_coordinates(self, config: LaunchConfig) -> None:
        t = build_topology(config)
        for p in t.processes:
            assert t.rank_in_group("tp", p.world_rank) == p.tp_rank
            assert t.rank_in_group("pp", p.world_rank) == p.pp_rank
            if t.groups["attention_tp"].alias_of is None:
                assert t.rank_in_group("attention_tp", p.world_rank) == p.attn_tp_rank
            if t.groups["moe_ep"].alias_of is None:
                assert t.rank_in_group("moe_ep", p.world_rank) == p.moe_ep_rank
            assert t.resolve_group_rank("tp", p.tp_rank, instance_of=p.world_rank) == p.world_rank

    @settings(max_examples=300, deadline=None)
    @given(valid_configs())
    def test_each_gpu_used_once_per_replica(self, config: LaunchConfig) -> None:
        t = build_topology(config)
        seen = [(p.replica, p.node_rank, p.gpu_id) for p in t.processes]
        assert len(seen) == len(set(seen))
        assert len(t.processes) == t.sizes.world * t.sizes.replicas
        assert len({p.key for p in t.processes}) == len(t.processes)

    @settings(max_examples=200, deadline=None)
    @given(valid_configs())
    def test_prefix_identifies_the_process(self, config: LaunchConfig) -> None:
        """Two schedulers never print the same prefix unless both print none."""
        t = build_topology(config)
        prefixes = [p.prefix for p in t.processes]
        if len(prefixes) > 1:
            assert len(set(prefixes)) == len(prefixes)


class TestSelect:
    """Selecting processes by prefix tokens or attributes."""

    def test_tokens_mean_ranks_even_when_not_printed(self) -> None:
        """A 0.4.x log prints `TP0` for a TP1 scheduler; 0.5.x rules print nothing."""
        t = topo(tp_size=1, dp_size=2)
        assert [p.key for p in t.select({"DP": 1, "TP": 0})] == [(1, 0)]

    def test_ambiguous_without_replica(self) -> None:
        t = topo(tp_size=2, dp_size=2)
        assert len(t.select({"TP": 1})) == 2
        assert t.select({"DP": 0, "TP": 5}) == []


class TestVersionRules:
    """Rules whose first release was found by running SGLang's code (tools/README-sglang-truth.md)."""

    def test_moe_dp_without_attn_cp_accepted_before_0_5_11(self) -> None:
        t = topo(tp_size=8, moe_dp_size=2, ep_size=4, version="0.5.9")
        assert t.groups["moe_dp"].members == ((0, 4), (1, 5), (2, 6), (3, 7))
        with pytest.raises(ConfigError, match="only supported when moe_dp_size == 1"):
            topo(tp_size=8, moe_dp_size=2, ep_size=4, version="0.5.11")

    def test_moe_dp_aliases_attn_cp_from_0_5_11(self) -> None:
        assert topo(tp_size=8, attn_cp_size=4, version="0.5.11").groups["moe_dp"].alias_of \
            == "attn_cp"
        assert topo(tp_size=8, attn_cp_size=4, version="0.5.10").groups["moe_dp"].alias_of \
            is None

    def test_no_moe_groups_before_0_4_10(self) -> None:
        assert "moe_ep" not in topo(tp_size=4, version="0.4.9").groups
        assert topo(tp_size=4, ep_size=4, version="0.4.10").groups["moe_ep"].alias_of is None
        assert topo(tp_size=4, ep_size=4, version="0.5.2").groups["moe_ep"].alias_of == "tp"

    def test_attention_tp_own_group_before_0_5_9(self) -> None:
        assert topo(tp_size=4, version="0.5.8").groups["attention_tp"].alias_of is None
        assert topo(tp_size=4, version="0.5.9").groups["attention_tp"].alias_of == "tp"

    def test_self_pp_from_0_5_19(self) -> None:
        """0.5.19+ builds `self_pp`, one single-rank group per rank (after `pp`)."""
        assert topo(tp_size=2, pp_size=2, version="0.5.19").groups["self_pp"].members == (
            (0,), (1,), (2,), (3,))
        assert "self_pp" not in topo(tp_size=2, pp_size=2, version="0.5.18").groups

    def test_dwdp_is_attention_dp_with_ep(self) -> None:
        """SGLang 0.5.17+ rewrites `--dwdp-size N` (N == tp) into attention DP N, EP N,
        moe_dp 1 (`_handle_dwdp`): prefixes ` DP0 TP0 EP0` …; other values are refused."""
        from logcorr.config import config_from_fields
        config = config_from_fields({"tp_size": 8, "dwdp_size": 8}, source="t")
        t = build_topology(config)
        assert (t.sizes.attn_dp, t.sizes.moe_ep, t.sizes.moe_dp, t.sizes.replicas) == (8, 8, 1, 1)
        assert t.process(0, 3).prefix == " DP3 TP3 EP3"
        with pytest.raises(ConfigError, match=r"dwdp_size \(4\) must equal tp_size \(8\)"):
            check_config(config_from_fields({"tp_size": 8, "dwdp_size": 4}, source="t"))
        with pytest.raises(ConfigError, match="needs SGLang 0.5.17"):
            check_config(config_from_fields({"tp_size": 8, "dwdp_size": 8}, source="t",
                                            sglang_version="0.5.16"))

    def test_moe_dense_tp_size_values(self) -> None:
        """SGLang refuses moe_dense_tp_size other than None, 1 or (0.5.14: also) tp_size."""
        with pytest.raises(ConfigError, match="moe_dense_tp_size only supports"):
            topo(tp_size=8, moe_dense_tp_size=2)
        assert topo(tp_size=8, moe_dense_tp_size=8).sizes.tp == 8
        with pytest.raises(ConfigError, match="moe_dense_tp_size only supports None, 1 "):
            topo(tp_size=8, moe_dense_tp_size=8, version="0.5.9")

    def test_dcp_from_0_5_15(self) -> None:
        assert topo(tp_size=8, dcp_size=2, version="0.5.15").groups["dcp"].members == (
            (0, 1), (2, 3), (4, 5), (6, 7))
        with pytest.raises(ConfigError, match="dcp_size needs SGLang 0.5.15"):
            topo(tp_size=8, dcp_size=2, version="0.5.14")
