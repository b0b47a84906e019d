"""Every public parse_* function in nodecheck/parsers/ has a caller in nodecheck/ (issue 32, 3.4: "dead
parsers are untested promises"). A parser nothing calls is wired to the check that needs it or deleted;
a test of it is no caller. A call from its own module counts (parse_ldconfig is read by
parse_libraries_probe)."""

from __future__ import annotations

import ast
from pathlib import Path

import nodecheck

ROOT = Path(nodecheck.__file__).resolve().parent

# Parsers found uncalled after issue 32's list was dealt with, each left for a decision (wire it to
# a check or delete it): all ten were deleted in issue 32's last part. It stays empty: a new parser
# nothing calls is wired or deleted, not listed here.
NOT_YET_DECIDED: dict[str, str] = {}


def _names(tree: ast.AST) -> set[str]:
    """Every name a module uses: variables, attributes, imported names."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
        elif isinstance(node, ast.alias):
            found.add(node.name)
    return found


def uncalled_parsers(root: Path) -> set[str]:
    """ "module.parse_x" of each public parse_* in root/parsers/ that no module of root names, its own
    module apart from the def (a name inside its own body is recursion, not a caller)."""
    used = {path: _names(ast.parse(path.read_text())) for path in root.rglob("*.py")}
    found = set()
    for path in sorted((root / "parsers").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if not (isinstance(node, ast.FunctionDef) and node.name.startswith("parse_")):
                continue
            elsewhere = any(node.name in names for other, names in used.items() if other != path)
            rest = [n for n in tree.body if n is not node]
            inside = any(node.name in _names(n) for n in rest)
            if not (elsewhere or inside):
                found.add(f"{path.stem}.{node.name}")
    return found


def test_every_parser_has_a_caller():
    dead = sorted(uncalled_parsers(ROOT) - set(NOT_YET_DECIDED))
    assert not dead, f"parsers nothing in nodecheck/ calls (wire each to its check, or delete it): {dead}"


def test_the_undecided_list_only_names_parsers_still_uncalled():
    assert sorted(set(NOT_YET_DECIDED) - uncalled_parsers(ROOT)) == []
