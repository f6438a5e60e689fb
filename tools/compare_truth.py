"""Compare truth files in given dirs with logcorr's model (same checks as tests/test_topology_sglang.py)."""
import json, sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from logcorr.config import config_from_fields
from logcorr.errors import ConfigError
from logcorr.topology import build_topology, check_config, topology_to_json
for d in sys.argv[1:]:
    for p in sorted(Path(d).glob("*.json")):
        t = json.loads(p.read_text())
        try:
            cfg = config_from_fields(dict(t["config"]), source=p.name, sglang_version=t["sglang_version"])
        except ConfigError as e:
            print(f"{p.parent.name}/{p.stem}: CONFIG ERROR {e}"); continue
        if not t["valid"]:
            try:
                check_config(cfg); print(f"{p.parent.name}/{p.stem}: MISMATCH valid: logcorr accepts, SGLang rejects: {t['error']}")
            except ConfigError: print(f"{p.parent.name}/{p.stem}: ok (invalid)")
            continue
        try:
            ours = topology_to_json(build_topology(cfg))
        except ConfigError as e:
            print(f"{p.parent.name}/{p.stem}: MISMATCH valid: logcorr rejects ({e}), SGLang accepts"); continue
        e = t["expected"]; bad = []
        if ours["sizes"] != e["sizes"]: bad.append(("sizes", {k: (ours["sizes"].get(k), v) for k, v in e["sizes"].items() if ours["sizes"].get(k) != v}))
        if len(ours["processes"]) != len(e["processes"]): bad.append(("nproc", len(ours["processes"]), len(e["processes"])))
        else:
            for a, b in zip(ours["processes"], e["processes"]):
                diff = {k: (a.get(k), v) for k, v in b.items() if a.get(k) != v}
                if diff: bad.append(("process wr%s rep%s" % (b["world_rank"], b["replica"]), diff)); break
        for g in sorted(set(ours["groups"]) | set(e["groups"])):
            if ours["groups"].get(g) != e["groups"].get(g): bad.append(("group " + g, ours["groups"].get(g), e["groups"].get(g)))
        print(f"{p.parent.name}/{p.stem}: " + ("ok" if not bad else "MISMATCH (logcorr, sglang) " + repr(bad)[:700]))
