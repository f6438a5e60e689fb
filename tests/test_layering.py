"""The pipeline's import direction: imports point down toward model/errors.

errors imports nothing from logcorr; model only errors; topology never imports a parser; a
parser never imports topology; only cli prints.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "logcorr"


def imports_of(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return {n for n in names if n.startswith("logcorr")}


def module(name: str) -> Path:
    return PACKAGE / (name.replace(".", "/") + ".py")


def test_errors_is_a_leaf() -> None:
    assert imports_of(module("errors")) == set()


def test_model_imports_nothing_but_errors() -> None:
    assert imports_of(module("model")) <= {"logcorr.errors"}


def test_topology_and_parsers_do_not_know_each_other() -> None:
    parsers = [module("ingest"), *sorted((PACKAGE / "formats").glob("*.py"))]
    for path in parsers:
        assert not any("topology" in name or "resolve" in name for name in imports_of(path)), path
    for name in ("topology", "config", "versions"):
        assert not any("formats" in n or "ingest" in n for n in imports_of(module(name))), name


def test_only_cli_prints() -> None:
    for path in PACKAGE.rglob("*.py"):
        if path.name in ("cli.py", "__main__.py"):
            continue
        tree = ast.parse(path.read_text())
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call)
                 and isinstance(n.func, ast.Name) and n.func.id in ("print", "exit")]
        assert calls == [], path


def test_every_command_has_help() -> None:
    from logcorr.cli import build_parser

    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command")
    for choice in commands.choices.values():  # type: ignore[union-attr]
        assert choice.description or choice.format_help()
    assert {"topology", "analyze", "check", "fixture"} <= set(commands.choices)  # type: ignore[arg-type]


def test_readme_paths_exist() -> None:
    """Every fixtures/ path the README names exists (the quick start must work)."""
    import re

    root = PACKAGE.parent
    readme = (root / "README.md").read_text()
    paths = set(re.findall(r"fixtures/[\w./-]+\.json|fixtures/analyze/[\w-]+/logs", readme))
    assert paths
    for path in paths:
        assert (root / path).exists(), path
