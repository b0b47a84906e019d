"""The layout's rules that import-linter cannot state (docs/architecture.md): no flat modules, no
private name shared across packages, one host-list folding and one atomic writer."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "nodecheck"
ENTRY_POINTS = {"__init__.py", "__main__.py"}


def _modules() -> dict[str, ast.Module]:
    return {
        str(p.relative_to(PACKAGE.parent)): ast.parse(p.read_text(encoding="utf-8"))
        for p in sorted(PACKAGE.rglob("*.py"))
    }


def _top_package(path: str) -> str:
    """nodecheck/gate/slurm.py -> "gate"."""
    return Path(path).parts[1]


def test_no_module_sits_flat_in_the_package_but_its_entry_points():
    flat = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert set(flat) == ENTRY_POINTS, f"flat modules: {sorted(set(flat) - ENTRY_POINTS)}"


def private_crossings(modules: dict[str, ast.Module]) -> list[str]:
    """`from nodecheck.<other package>... import _name` lines, as "path:line: name from module"."""
    crossings = []
    for path, tree in modules.items():
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or not (node.module or "").startswith("nodecheck."):
                continue
            source = node.module.split(".")[1]
            for alias in node.names:
                private = alias.name.startswith("_") and not alias.name.startswith("__")
                if private and source != _top_package(path):
                    crossings.append(f"{path}:{node.lineno}: {alias.name} from {node.module}")
    return crossings


def test_no_private_name_is_imported_from_another_package():
    crossings = private_crossings(_modules())
    assert crossings == [], "\n".join(crossings)


def test_the_rule_finds_a_private_import_across_packages_and_allows_one_within():
    planted = {
        "nodecheck/gate/command.py": ast.parse("from nodecheck.app.transports import _secret, public\n"),
        "nodecheck/gate/decide.py": ast.parse("from nodecheck.gate.command import _helper\n"),
    }
    assert private_crossings(planted) == ["nodecheck/gate/command.py:1: _secret from nodecheck.app.transports"]


def test_host_lists_are_folded_in_one_place():
    folds = [
        f"{path}:{n.lineno}"
        for path, tree in _modules().items()
        for n in tree.body
        if isinstance(n, ast.FunctionDef) and n.name == "fold"
    ]
    assert [f.split(":")[0] for f in folds] == ["nodecheck/core/hostlist.py"], folds


def test_only_the_report_store_writes_files_atomically():
    writers = sorted(
        {
            path
            for path, tree in _modules().items()
            for n in ast.walk(tree)
            if isinstance(n, ast.Attribute) and n.attr == "fsync"
        }
    )
    assert writers == ["nodecheck/report/store.py"]
