"""The house: every package keeps to its floor (harness/*/__init__.py says which floors it may
import), no package is in an import circle with another, no module is over 600 lines, and the
top level of harness/ holds a dozen modules at most (HOUSE.md)."""
from __future__ import annotations

import ast
import re
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parent.parent
DIRS = {"": ROOT / "harness", "reference_impl": ROOT / "reference_impl", "gallery": ROOT / "gallery"}
MAX_LINES = 600
MAX_TOP = 12
TOP_FACES = {"", "__main__", "_moved", "plugin"}      # the top level: it may import every floor


def modules() -> dict[str, Path]:
    out = {}
    for prefix, base in DIRS.items():
        for p in sorted(base.rglob("*.py")):
            parts = list(p.relative_to(base).with_suffix("").parts)
            if "data" in parts[:-1] and prefix == "" and parts[0] == "workshop":
                pass
            if parts[-1] == "__init__":
                parts = parts[:-1]
            out[".".join(([prefix] if prefix else []) + parts)] = p
    return out


def _type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or \
        (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def runtime_imports(mod: str, path: Path) -> list[tuple[int, str]]:
    """(line, imported name below crashlab) of every runtime import, function-local ones included;
    those under ``if TYPE_CHECKING:`` aside."""
    tree = ast.parse(path.read_text())
    is_pkg = path.name == "__init__.py"
    found: list[tuple[int, str]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("crashlab."):
                    found.append((node.lineno, a.name[len("crashlab."):]))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = mod.split(".") if mod else []
                if not is_pkg:
                    base = base[:-1]
                base = base[:len(base) - (node.level - 1)] if node.level > 1 else base
                target = ".".join(base + ([node.module] if node.module else []))
            elif node.module and (node.module == "crashlab" or node.module.startswith("crashlab.")):
                target = node.module[len("crashlab."):] if node.module != "crashlab" else ""
            else:
                target = None
            if target is not None:
                for a in node.names:
                    found.append((node.lineno, f"{target}.{a.name}" if target else a.name))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def package_of(mod: str, mods: dict[str, Path]) -> str:
    head = mod.split(".")[0]
    if mod == "" or (head in mods and mods[head].name != "__init__.py"):
        return head if mod else ""
    return head


def declared() -> dict[str, set[str]]:
    """package -> the packages its opening lines say it may import."""
    out = {}
    for name, base in [(p.parent.name, p) for p in sorted((ROOT / "harness").glob("*/__init__.py"))] + \
            [("reference_impl", ROOT / "reference_impl" / "__init__.py"), ("gallery", ROOT / "gallery" / "__init__.py")]:
        head = base.read_text().splitlines()[:2]
        if name == "data":
            continue
        assert len(head) == 2 and head[0].startswith("# layer ") and head[1].startswith("# may import: "), \
            f"{base}: the package opens with two lines, '# layer NAME: what it owns.' and '# may import: ...'"
        listed = head[1][len("# may import: "):].split(" (")[0]
        out[name] = set() if listed == "nothing of crashlab" else {x.strip() for x in listed.split(",")}
    return out


def package_edges() -> list[tuple[str, str, str, int]]:
    mods = modules()
    edges = []
    for mod, path in mods.items():
        src = package_of(mod, mods)
        for line, target in runtime_imports(mod, path):
            dst = package_of(target, mods)
            if dst != src and dst not in ("",):
                edges.append((src, dst, str(path.relative_to(ROOT)), line))
    return edges


def test_every_package_opens_with_its_floor() -> None:
    rules = declared()
    assert {"vocab", "world", "scenario", "rules", "checks", "run", "report", "cli"} <= set(rules)
    siblings = [{"sandbox", "integrate", "runtimes", "probe"}, {"reference_impl", "gallery"}, {"cli", "workshop"}]
    # the floors are ordered: a package never lists one that lists it back, unless they share a floor
    for pkg, allowed in rules.items():
        for other in allowed:
            assert pkg not in rules.get(other, set()) or any({pkg, other} <= s for s in siblings), (pkg, other)


def test_no_import_runs_up_a_floor() -> None:
    rules = declared()
    bad = [f"{path}:{line}: {src} imports {dst}, not among the floors below it ({', '.join(sorted(rules[src]))})"
           for src, dst, path, line in package_edges() if src in rules and dst not in rules[src] and dst != "data"]
    assert not bad, "\n".join(bad)


def test_no_import_circle_between_packages() -> None:
    g = nx.DiGraph()
    for src, dst, _, _ in package_edges():
        if src in TOP_FACES:
            continue
        g.add_edge(src, dst)
    circles = [c for c in nx.simple_cycles(g) if not set(c) <= {"sandbox", "integrate", "runtimes", "probe"}]
    assert not circles, circles


def test_the_walk_sees_local_imports_and_skips_type_checking(tmp_path: Path) -> None:
    f = tmp_path / "m.py"
    f.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..report import x\n"
                 "def f():\n    from ..run import sweep\n")
    assert runtime_imports("checks.m", f) == [(5, "run.sweep")]


def test_reference_impl_has_no_import_circle() -> None:
    """Its shared types live one floor down (facts.py): no module of it imports one that imports it back."""
    g = nx.DiGraph()
    for mod, path in modules().items():
        if not mod.startswith("reference_impl."):
            continue
        g.add_node(mod)
        for _, target in runtime_imports(mod, path):
            parts = target.split(".")
            if parts[0] == "reference_impl" and len(parts) > 1 and ".".join(parts[:2]) != mod:
                g.add_edge(mod, ".".join(parts[:2]))
    assert not list(nx.simple_cycles(g))


def test_no_module_is_over_600_lines() -> None:
    # crashlab's own modules; gallery/independent/ is a worker written apart from crashlab, on purpose
    long = {str(p.relative_to(ROOT)): n for p in modules().values() if not p.is_relative_to(ROOT / "gallery")
            and (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"split these modules (at most {MAX_LINES} lines): {long}"


def test_the_top_level_holds_a_dozen_modules() -> None:
    top = sorted(p.name for p in (ROOT / "harness").glob("*.py"))
    assert len(top) <= MAX_TOP, top
