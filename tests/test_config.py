"""Launch-config loading in every accepted spelling."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from logcorr.config import config_from_text, fields_from_server_args_line, load_config
from logcorr.errors import ConfigError
from logcorr.topology import check_config

# Shortened from a real 0.5.8 line (log-formats.md §1.4): enum reprs, lists, dicts, quotes.
SERVER_ARGS_DATACLASS = (
    "[2026-02-27 14:33:04] server_args=ServerArgs(model_path='/app/models/Deepseek-R1/', "
    "tokenizer_path='/app/models/Deepseek-R1/', tp_size=16, pp_size=1, "
    "attention_backend=<AttentionBackend.FA3: 'fa3'>, cuda_graph_bs=[1, 2, 4, 8], "
    "json_model_override_args='{\"tp_size\": 99}', dp_size=8, enable_dp_attention=True, "
    "ep_size=16, moe_a2a_backend='deepep', nnodes=2, node_rank=1, "
    "dist_init_addr='10.0.0.1:5000', watchdog_timeout=300, base_gpu_id=0, gpu_id_step=1, "
    "device='cuda', decrypted_draft_config_file=None, forward_hooks=None)"
)
SERVER_ARGS_DICT = (
    "[2026-08-10 09:47:30] server_args={'model_path': '/models/dsv3', 'tp_size': 8, "
    "'speculative_config': {'tp_size': 1}, 'attn_dp_size': 4, 'dp_size': 1, "
    "'enable_dp_attention': True, 'ep_size': 8, 'device': 'npu', 'nnodes': 1, 'node_rank': 0, "
    "'api_key': '<redacted>'}"
)


class TestServerArgsLine:
    """Reading SGLang's server_args= log line."""

    def test_dataclass_repr(self) -> None:
        values = fields_from_server_args_line(SERVER_ARGS_DATACLASS)
        assert values["tp_size"] == 16 and values["dp_size"] == 8
        assert values["enable_dp_attention"] is True
        assert values["moe_a2a_backend"] == "deepep" and values["node_rank"] == 1
        assert values["watchdog_timeout"] == 300

    def test_dict_repr_skips_nested_values(self) -> None:
        values = fields_from_server_args_line(SERVER_ARGS_DICT)
        assert values["tp_size"] == 8 and values["attn_dp_size"] == 4
        assert values["device"] == "npu"

    def test_truncated_tail_still_reads(self) -> None:
        line = SERVER_ARGS_DATACLASS[:SERVER_ARGS_DATACLASS.index("watchdog")]
        assert fields_from_server_args_line(line)["node_rank"] == 1

    def test_cut_before_the_layout_is_refused(self) -> None:
        """sglang#3226: `… kv_cache_dtype='auto', quantiza>` - tp_size and the rest were after
        the cut, and SGLang's defaults in their place would be a wrong layout."""
        line = SERVER_ARGS_DATACLASS[:SERVER_ARGS_DATACLASS.index("dp_size")] + "quantiza>"
        with pytest.raises(ConfigError, match="cut off before dp_size, nnodes, ep_size"):
            fields_from_server_args_line(line)

    def test_log_file_with_server_args(self, tmp_path: Path) -> None:
        log = tmp_path / "node1.log"
        log.write_text("[2026-02-27 14:33:03] INFO server_args.py:1697: Attention backend\n"
                       + SERVER_ARGS_DATACLASS + "\n[2026-02-27 14:33:10 DP4 TP8 EP8] Init\n")
        config = load_config(log)
        assert (config.tp_size, config.nnodes, config.node_rank) == (16, 2, 1)


class TestCommand:
    """Reading a launch command."""

    def test_shell_command_with_aliases(self) -> None:
        config = config_from_text(
            "NCCL_DEBUG=INFO python -m sglang.launch_server --model-path m \\\n"
            "  --tp 16 --dp 8 --enable-dp-attention --nnodes=2 --node-rank 0 \\\n"
            "  --moe-a2a-backend deepep --trust-remote-code  # comment\n", source="cmd")
        assert (config.tp_size, config.dp_size, config.enable_dp_attention) == (16, 8, True)
        assert (config.nnodes, config.node_rank, config.moe_a2a_backend) == (2, 0, "deepep")

    def test_dp_lm_head_needs_attention_dp(self) -> None:
        """SGLang refuses --enable-dp-lm-head with native DP replicas (0.5.23 overrides.py
        `_dp_lm_head_validation`); with one DP rank it turns the flag off."""
        refused = config_from_text("python -m sglang.launch_server --tp 4 --dp 2 "
                                   "--enable-dp-lm-head", source="cmd")
        assert refused.enable_dp_lm_head
        with pytest.raises(ConfigError, match="enable_dp_lm_head needs attention data"):
            check_config(refused)
        for accepted in ("--tp 4 --dp 2 --enable-dp-attention --enable-dp-lm-head",
                         "--tp 4 --enable-dp-lm-head"):
            check_config(config_from_text(f"python -m sglang.launch_server {accepted}",
                                          source="cmd"))

    def test_layout_bound_flags_are_read(self) -> None:
        """The flags SGLang accepts only with some layouts come through a launch command and a
        resolved server_args line."""
        config = config_from_text(
            "python -m sglang.launch_server --tp 16 --nnodes 2 --moe-a2a-backend deepep_v2 "
            "--deepep-v2-mode hybrid --enable-two-batch-overlap --enable-layernorm-sp "
            "--enable-tp-lm-head-all-to-all --enable-waterfill", source="cmd")
        assert config.deepep_v2_mode == "hybrid"
        assert config.enable_two_batch_overlap and config.enable_layernorm_sp
        assert config.enable_tp_lm_head_all_to_all and config.enable_waterfill
        line = ("[2026-08-10 09:47:30] server_args={'tp_size': 16, 'dp_size': 1, 'nnodes': 2, "
                "'ep_size': 16, 'enable_dp_attention': False, 'moe_a2a_backend': 'deepep_v2', "
                "'deepep_v2_mode': 'direct', 'enable_tp_lm_head_all_to_all': None}")
        refused = config_from_text(line, source="log")
        assert refused.deepep_v2_mode == "direct" and not refused.enable_tp_lm_head_all_to_all
        with pytest.raises(ConfigError, match="NVLink-only"):
            check_config(refused)

    def test_long_aliases(self) -> None:
        config = config_from_text("sglang serve --tensor-parallel-size 4 "
                                  "--data-parallel-size 2 --expert-parallel-size 4",
                                  source="cmd")
        assert (config.tp_size, config.dp_size, config.ep_size) == (4, 2, 4)

    def test_json_array_of_tokens(self) -> None:
        text = json.dumps(["python", "-m", "sglang.launch_server", "--tp-size", "8",
                           "--pp-size", "2"])
        config = config_from_text(text, source="args.json")
        assert (config.tp_size, config.pp_size) == (8, 2)


class TestJson:
    """Reading args.json."""

    def test_unknown_keys_ignored(self) -> None:
        config = config_from_text('{"tp_size": 4, "model_path": "x", "foo": [1]}',
                                  source="args.json")
        assert config.tp_size == 4

    def test_version_key(self) -> None:
        config = config_from_text('{"tp_size": 4, "sglang_version": "0.5.9"}', source="a")
        assert str(config.sglang_version) == "0.5.9"

    @pytest.mark.parametrize(("text", "message"), [
        ('{"tp_size": 4,', "not valid JSON"),
        ('{"tp_size": "four"}', "tp_size must be a whole number"),
        ('{"tp_size": true}', "tp_size must be a whole number"),
        ('{"tp_size": 4, "sglang_version": "9.9.9"}', "outside what logcorr knows"),
        ('{"tp_size": 4, "sglang_version": "banana"}', "unknown SGLang version"),
        ("", "is empty"),
        ("hello world", "not a launch configuration"),
        ("[1, 2]", "launch-command tokens"),
    ])
    def test_errors(self, text: str, message: str) -> None:
        with pytest.raises(ConfigError, match=message):
            config_from_text(text, source="args.json")

    def test_missing_file(self, tmp_path: Path) -> None:
        with pytest.raises(ConfigError, match="does not exist"):
            load_config(tmp_path / "nope.json")
