"""Launch configurations for tools/sglang_truth.py (ServerArgs field names -> values)."""


def _vt(v):
    return tuple(int(x) for x in v.split(".")[:3])


# ServerArgs fields that do not exist in every version (first version having them, from the wheels).
FIELD_SINCE = {"attn_cp_size": (0, 5, 9), "moe_dp_size": (0, 5, 9), "dcp_size": (0, 5, 20),
               "attn_dp_size": (0, 5, 22), "moe_a2a_backend": (0, 5, 0)}


def CONFIGS(version):
    if _vt(version) < (0, 5, 21):
        return LEGACY(version)
    return CURRENT(version)


def LEGACY(version):
    """Configs for older versions: only fields the version has; `moe_a2a_backend="deepep"` is spelled
    `enable_deepep_moe=True` before it existed (0.4.x)."""
    v = _vt(version)
    c = CURRENT("0.5.20") + [
        ("tp4_pp2_dp2_dpattn_deepep", dict(tp_size=4, pp_size=2, dp_size=2, enable_dp_attention=True, moe_a2a_backend="deepep")),
        ("tp4_pp2_dp2_dpattn", dict(tp_size=4, pp_size=2, dp_size=2, enable_dp_attention=True)),
        ("tp16_dp8_dpattn_nnodes2", dict(tp_size=16, dp_size=8, enable_dp_attention=True, nnodes=2)),
        ("tp4_pp2_ep4", dict(tp_size=4, pp_size=2, ep_size=4)),
        ("tp2_ep2", dict(tp_size=2, ep_size=2)),
    ]
    out = []
    for name, cfg in c:
        cfg = dict(cfg)
        if cfg.get("moe_a2a_backend") == "deepep" and v < FIELD_SINCE["moe_a2a_backend"]:
            del cfg["moe_a2a_backend"]; cfg["enable_deepep_moe"] = True
        if any(f in cfg and v < since for f, since in FIELD_SINCE.items()):
            continue
        if v < (0, 5, 2) and cfg.get("ep_size", 1) > 1:
            # up to 0.5.1, ep_size only takes effect with --enable-ep-moe (which sets ep_size = tp_size)
            if cfg["ep_size"] != cfg["tp_size"]:
                continue
            cfg["enable_ep_moe"] = True
        out.append((name, cfg))
    return out


def CURRENT(version):
    c = [
        ("tp1", dict(tp_size=1)),
        ("tp8", dict(tp_size=8)),
        ("tp16_nnodes2", dict(tp_size=16, nnodes=2)),
        ("tp16_dp8_dpattn", dict(tp_size=16, dp_size=8, enable_dp_attention=True)),
        ("tp16_dp8_native_1node", dict(tp_size=16, dp_size=8)),
        ("tp2_dp4_native", dict(tp_size=2, dp_size=4)),
        ("tp8_moedp2_ep4", dict(tp_size=8, moe_dp_size=2, ep_size=4)),
        ("tp8_moedp2_ep4_attncp2", dict(tp_size=8, moe_dp_size=2, ep_size=4, attn_cp_size=2)),
        ("tp16_moedp2_ep4", dict(tp_size=16, moe_dp_size=2, ep_size=4)),
        ("tp8_ep8_cuda", dict(tp_size=8, ep_size=8, device="cuda")),
        ("tp8_ep8_npu", dict(tp_size=8, ep_size=8, device="npu")),
        ("tp8_ep4", dict(tp_size=8, ep_size=4)),
        ("tp4_pp2_nnodes2", dict(tp_size=4, pp_size=2, nnodes=2)),
        ("tp2_pp4_nnodes2", dict(tp_size=2, pp_size=4, nnodes=2)),
        ("tp4_pp2_1node_step2", dict(tp_size=4, pp_size=2, gpu_id_step=2)),
        ("dp2_tp4_base1_step2", dict(tp_size=4, dp_size=2, base_gpu_id=1, gpu_id_step=2)),
        ("tp8_attncp4", dict(tp_size=8, attn_cp_size=4)),
        ("tp8_attncp8", dict(tp_size=8, attn_cp_size=8)),
        ("tp8_attncp2_moedp2_ep4", dict(tp_size=8, attn_cp_size=2, moe_dp_size=2, ep_size=4)),
        ("tp16_dp8_dpattn_deepep_nnodes2", dict(tp_size=16, dp_size=8, enable_dp_attention=True, moe_a2a_backend="deepep", nnodes=2)),
        ("tp32_dpattn4_nnodes4", dict(tp_size=32, dp_size=4, enable_dp_attention=True, nnodes=4)),
        ("tp8_dcp2", dict(tp_size=8, dcp_size=2)),
        ("tp8_dpattn2_attncp2", dict(tp_size=8, dp_size=2, enable_dp_attention=True, attn_cp_size=2)),
        ("tp8_dpattn8_ep8", dict(tp_size=8, dp_size=8, enable_dp_attention=True, ep_size=8)),
        ("invalid_tp8_dpattn4_attncp4", dict(tp_size=8, dp_size=4, enable_dp_attention=True, attn_cp_size=4)),
        ("invalid_tp8_moedp2_ep8", dict(tp_size=8, moe_dp_size=2, ep_size=8)),
        ("invalid_dp2_tp8_nnodes2", dict(tp_size=8, dp_size=2, nnodes=2)),
        ("invalid_gpu_id_step0", dict(tp_size=2, gpu_id_step=0)),
        ("invalid_base_gpu_id_neg", dict(tp_size=2, base_gpu_id=-1)),
        ("invalid_tp3_nnodes2", dict(tp_size=3, nnodes=2)),
    ]
    if version >= "0.5.22":
        c += [
            ("tp16_attndp8", dict(tp_size=16, attn_dp_size=8)),
            ("tp16_attndp8_deepep_nnodes2", dict(tp_size=16, attn_dp_size=8, moe_a2a_backend="deepep", nnodes=2)),
            ("tp32_attndp4_nnodes4", dict(tp_size=32, attn_dp_size=4, nnodes=4)),
            ("invalid_dp2_attndp2", dict(tp_size=4, dp_size=2, attn_dp_size=2)),
        ]
    if _vt(version) >= (0, 5, 22):
        c += EXTRA
    return c

# Added in a second pass (0.5.22+ field names): placements, a2a backends, CP/DCP mixes, NPU and
# rejections. Not here: tp16 nnodes2 node_rank 2 (SGLang's argument checks let it through, the
# launch then fails in every scheduler: logcorr refuses it up front).
EXTRA = [
    # plain TP / PP placement
    ("x_tp2", dict(tp_size=2)),
    ("x_tp1_pp4", dict(tp_size=1, pp_size=4)),
    ("x_tp8_pp4_nnodes4", dict(tp_size=8, pp_size=4, nnodes=4)),
    ("x_tp16_pp2_nnodes4", dict(tp_size=16, pp_size=2, nnodes=4)),
    ("x_tp4_pp2_nnodes4", dict(tp_size=4, pp_size=2, nnodes=4)),
    ("x_tp2_pp3_nnodes2", dict(tp_size=2, pp_size=3, nnodes=2)),
    ("x_tp16_nnodes2_noderank1", dict(tp_size=16, nnodes=2, node_rank=1)),
    ("x_tp8_nnodes2_base4", dict(tp_size=8, nnodes=2, base_gpu_id=4)),
    # native DP
    ("x_dp2_tp2_pp2", dict(tp_size=2, pp_size=2, dp_size=2)),
    # attention DP
    ("x_tp8_attndp4_flag", dict(tp_size=8, attn_dp_size=4, enable_dp_attention=True)),
    ("x_tp8_attndp8_deepep", dict(tp_size=8, attn_dp_size=8, moe_a2a_backend="deepep")),
    ("x_tp16_attndp16_mooncake_nnodes2", dict(tp_size=16, attn_dp_size=16, moe_a2a_backend="mooncake", nnodes=2)),
    ("x_tp32_attndp32_deepep_nnodes4_dplmhead", dict(tp_size=32, attn_dp_size=32, moe_a2a_backend="deepep", nnodes=4, enable_dp_lm_head=True, moe_dense_tp_size=1)),
    ("x_tp16_dp8_dpattn_ep16_nnodes2_noderank1", dict(tp_size=16, dp_size=8, enable_dp_attention=True, ep_size=16, nnodes=2, node_rank=1)),
    ("x_tp4_pp2_attndp2_nnodes2", dict(tp_size=4, pp_size=2, attn_dp_size=2, nnodes=2)),
    # EP / a2a backends
    ("x_tp8_mooncake", dict(tp_size=8, moe_a2a_backend="mooncake")),
    ("x_tp8_ep4_deepep", dict(tp_size=8, ep_size=4, moe_a2a_backend="deepep")),
    ("x_tp16_ep8_nnodes2", dict(tp_size=16, ep_size=8, nnodes=2)),
    ("x_tp4_pp2_ep4_nnodes2", dict(tp_size=4, pp_size=2, ep_size=4, nnodes=2)),
    ("x_tp8_moedense8", dict(tp_size=8, moe_dense_tp_size=8)),
    # CP / MoE-DP / DCP
    ("x_tp8_attncp2", dict(tp_size=8, attn_cp_size=2)),
    ("x_tp8_moedp4_ep2_attncp4", dict(tp_size=8, moe_dp_size=4, ep_size=2, attn_cp_size=4)),
    ("x_tp16_attncp2_moedp2_ep8_nnodes2", dict(tp_size=16, attn_cp_size=2, moe_dp_size=2, ep_size=8, nnodes=2)),
    ("x_tp8_attndp2_attncp2_ep8", dict(tp_size=8, attn_dp_size=2, attn_cp_size=2, ep_size=8)),
    ("x_tp8_attndp2_attncp4", dict(tp_size=8, attn_dp_size=2, attn_cp_size=4)),
    ("x_tp8_dcp4", dict(tp_size=8, dcp_size=4)),
    ("x_tp8_attndp2_dcp2", dict(tp_size=8, attn_dp_size=2, dcp_size=2)),
    ("x_tp4_pp2_dcp2", dict(tp_size=4, pp_size=2, dcp_size=2)),
    ("x_tp8_attncp2_dcp2", dict(tp_size=8, attn_cp_size=2, dcp_size=2)),
    # NPU
    ("x_tp8_npu", dict(tp_size=8, device="npu")),
    ("x_tp8_ep4_npu", dict(tp_size=8, ep_size=4, device="npu")),
    ("x_tp16_attndp16_ep16_npu_nnodes2", dict(tp_size=16, attn_dp_size=16, ep_size=16, device="npu", nnodes=2)),
    # expected rejections (or probes of rules SGLang may not have)
    ("x_invalid_dp2_tp4_dplmhead", dict(tp_size=4, dp_size=2, enable_dp_lm_head=True)),
    ("x_tp8_dplmhead_no_dp", dict(tp_size=8, enable_dp_lm_head=True)),
    ("x_invalid_tp8_moedense2", dict(tp_size=8, moe_dense_tp_size=2)),
    ("x_invalid_tp8_attndp3", dict(tp_size=8, attn_dp_size=3)),
    ("x_invalid_tp8_ep3", dict(tp_size=8, ep_size=3)),
    ("x_invalid_tp8_dcp3", dict(tp_size=8, dcp_size=3)),
    ("x_invalid_dcp0", dict(tp_size=8, dcp_size=0)),
    ("x_invalid_tp8_pp2_moedp2_attncp2_ep4", dict(tp_size=8, pp_size=2, moe_dp_size=2, attn_cp_size=2, ep_size=4)),
    ("x_invalid_tp16_moedp2_attncp2_deepep_nnodes2", dict(tp_size=16, moe_dp_size=2, attn_cp_size=2, moe_a2a_backend="deepep", nnodes=2)),
    ("x_invalid_tp8_pp2_nnodes3", dict(tp_size=8, pp_size=2, nnodes=3)),
    ("x_tp8_ep16", dict(tp_size=8, ep_size=16)),
]

# Third pass (0.5.23 argument checks on a2a backends and layout-bound flags). Valid flashinfer
# needs a flashinfer MoE runner and pplx a per-rank dispatch budget within
# SGLANG_PPLX_NUM_MAX_DISPATCH_TOKENS_PER_RANK (128): both are set here so that only the layout
# rule decides. The LayerNorm-SP ones are refused by the stub DeepSeek-V3 architecture before the
# layout rule is reached, so their truth files were read from the code (see the README).
EXTRA += [
    ("x_tp8_attndp8_flashinfer", dict(tp_size=8, attn_dp_size=8, moe_a2a_backend="flashinfer", moe_runner_backend="flashinfer_cutlass")),
    ("x_invalid_tp8_flashinfer", dict(tp_size=8, moe_a2a_backend="flashinfer", moe_runner_backend="flashinfer_cutlass")),
    ("x_invalid_tp8_attndp4_flashinfer", dict(tp_size=8, attn_dp_size=4, moe_a2a_backend="flashinfer", moe_runner_backend="flashinfer_cutlass")),
    ("x_invalid_tp8_flashinfer_megamoe", dict(tp_size=8, moe_a2a_backend="flashinfer_megamoe", quantization="mxfp8")),
    ("x_tp8_attndp2_pplx", dict(tp_size=8, attn_dp_size=2, moe_a2a_backend="pplx", chunked_prefill_size=256)),
    ("x_invalid_tp8_pplx", dict(tp_size=8, moe_a2a_backend="pplx", chunked_prefill_size=128)),
    ("x_tp16_deepep_v2_hybrid_nnodes2", dict(tp_size=16, moe_a2a_backend="deepep_v2", deepep_v2_mode="hybrid", nnodes=2)),
    ("x_invalid_tp16_deepep_v2_nnodes2", dict(tp_size=16, moe_a2a_backend="deepep_v2", nnodes=2)),
    ("x_tp8_attndp8_tplmhead_a2a", dict(tp_size=8, attn_dp_size=8, enable_tp_lm_head_all_to_all=True)),
    ("x_invalid_tp8_tplmhead_a2a", dict(tp_size=8, enable_tp_lm_head_all_to_all=True)),
    ("x_invalid_tp8_attndp4_tplmhead_a2a", dict(tp_size=8, attn_dp_size=4, enable_tp_lm_head_all_to_all=True)),
    ("x_invalid_tp8_attndp8_tplmhead_a2a_dplmhead", dict(tp_size=8, attn_dp_size=8, enable_tp_lm_head_all_to_all=True, enable_dp_lm_head=True)),
    ("x_tp8_attndp2_tbo", dict(tp_size=8, attn_dp_size=2, enable_two_batch_overlap=True)),
    ("x_invalid_tp8_tbo", dict(tp_size=8, enable_two_batch_overlap=True)),
    ("x_invalid_tp8_dwdp8_tbo", dict(tp_size=8, dwdp_size=8, enable_two_batch_overlap=True)),
]
