"""Is the graded code the learner's own? A static reading of the Python a code rung grades.

Reading module names as written is not enough: a name split in two (``"crashlab.refer" +
"ence_impl"``), encoded, or reached through ``getattr`` or ``exec`` names nothing a reader
sees. So the code is read for what it can *do*:

- a kit's decision (the part of ``adapter.py`` or ``wire_adapter.py`` above the plumbing) may
  import only what its starter imports and a few pure standard-library modules, and may not
  run code it builds (``exec``, ``eval``, ``compile``, ``__import__``), reach objects by a
  computed name (``getattr``, ``globals``, ``vars``, ``__dict__``, ``sys.modules``,
  ``__subclasses__``...);
- a Python file an ``--adapter`` names (``module:Attribute``, ``wire:module:Attribute``, or
  ``exec:python FILE``), and every module of the learner's folder it imports, may not import
  the reference design, the gallery or the workshop (under any name), nor run code it builds or
  import by a computed name; a file that keeps a starter's plumbing section is read as a kit's.

What a static reading cannot see (an adapter in another language; Python that hands a
computed name to one of crashlab's own loaders) is graded by behaviour only, and the roster
names every rung graded with ``--adapter`` (docs/workshop.md).
"""
from __future__ import annotations

import ast
import shlex
from pathlib import Path

from ..vocab.errors import UsageError

NOT_YOURS = ("the reference design, the gallery, the workshop and code reached by a computed name are not yours "
             "to submit")
FORBIDDEN_PARTS = ("reference_impl", "gallery", "workshop", "solutions", "SOLUTIONS")
#: Pure standard-library modules a decision may use besides what its starter imports.
PURE = frozenset({"re", "hashlib", "json", "math", "itertools", "functools", "collections", "dataclasses",
                  "typing", "enum", "datetime", "string", "time", "decimal", "fractions", "statistics",
                  "operator", "copy", "__future__"})
#: Modules that load or run code by a computed name.
LOADERS = frozenset({"importlib", "runpy", "imp", "pkgutil", "zipimport", "marshal", "pickle", "ctypes",
                     "subprocess", "builtins", "code", "codeop", "types", "inspect", "os", "shutil", "base64",
                     "codecs", "zlib"})
CALLS = frozenset({"exec", "eval", "compile", "__import__", "getattr", "setattr", "delattr", "globals", "vars",
                   "locals", "breakpoint", "input"})
#: crashlab's functions that load an adapter (or run one) by a name they are given.
LOADER_FUNCS = frozenset({"serve", "load_adapter", "run_one", "run_checked", "main", "resolve", "load_file"})
ATTRS = frozenset({"__dict__", "__globals__", "__code__", "__subclasses__", "__bases__", "__base__", "__mro__",
                   "__class__", "__builtins__", "__loader__", "__spec__", "__import__", "modules", "f_globals",
                   "f_back", "import_module", "_getframe", *FORBIDDEN_PARTS})


def _problems(tree: ast.AST, *, allowed: set[str], strict: bool) -> list[tuple[int, str]]:
    """(line, what) for every construct that could run or import code the reader cannot see.
    ``strict`` (a kit's decision): only ``allowed`` and PURE imports."""
    out = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        names = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                continue                          # a relative import: read where it leads (local_imports)
            names = [f"{node.module}.{a.name}" if node.module else a.name for a in node.names]
        for name in names:
            top = name.split(".")[0]
            if name in allowed or any(name.startswith(a + ".") for a in allowed) or \
                    any(a.startswith(name + ".") for a in allowed):
                continue
            if any(part in name for part in FORBIDDEN_PARTS):
                out.append((line, f"imports {name}"))
            elif top in LOADERS or (strict and top not in PURE):
                out.append((line, f"imports {name} (a module that loads code; a decision may import only what "
                                  "its starter imports and pure standard modules)" if strict else
                                  f"imports {name} (a module that loads code)"))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in CALLS:
            out.append((line, f"calls {node.func.id}() (it runs or reaches code by a computed name)"))
        if isinstance(node, ast.Name) and node.id in ("__builtins__", "__import__"):
            out.append((line, f"uses {node.id}"))
        if isinstance(node, ast.Attribute) and node.attr in ATTRS:
            out.append((line, f"reaches .{node.attr} (code by a computed name)"))
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                any(part in node.value for part in ("reference_impl", "crashlab.gallery", "crashlab.workshop")):
            out.append((line, f"names {node.value!r}"))
    return sorted(set(out))


def _parse(path: Path) -> ast.AST:
    try:
        return ast.parse(path.read_text(encoding="utf-8"), str(path))
    except SyntaxError as exc:
        raise UsageError(f"{path}:{exc.lineno}: not valid Python ({exc.msg})") from None
    except OSError as exc:
        raise UsageError(f"{path}: cannot be read ({exc})") from None


def check_decision(path: Path, head: str, starter_head: str) -> None:
    """A kit's decision: UsageError naming the file and line of the first construct not allowed."""
    try:
        tree = ast.parse(head, str(path))
    except SyntaxError:
        return                                    # the loader reports it with its line
    allowed = {name for node in ast.walk(ast.parse(starter_head)) for name in _imported(node)}
    bad = _problems(tree, allowed=allowed, strict=True)
    if bad:
        line, what = bad[0]
        raise UsageError(f"{path}:{line}: {what}: {NOT_YOURS}; write the decision yourself from its inputs")


def _imported(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and not node.level:
        return [f"{node.module}.{a.name}" for a in node.names] + [node.module]
    return []


def _local_file(module: str, roots: list[Path]) -> Path | None:
    """The learner's own file for ``module`` (a module or package under one of ``roots``)."""
    parts = module.split(".")
    for root in roots:
        base = root.joinpath(*parts)
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
    return None


def check_module_file(path: Path, roots: list[Path], starter: str | None, seen: set | None = None) -> None:
    """An --adapter's Python file and every module of the learner's folder it imports."""
    from .codecheck import guard
    from .solutions import PLUMBING

    seen = set() if seen is None else seen
    path = path.resolve()
    if path in seen or len(seen) > 50:
        return
    seen.add(path)
    text = path.read_text(encoding="utf-8", errors="replace")
    tree = _parse(path)
    if PLUMBING in text and starter:             # a kit's adapter under another name: read as a kit's
        guard(path, starter)
        return
    bad = _problems(tree, allowed=set(), strict=False) + _loader_calls(tree, path, roots, starter, seen)
    if bad:
        line, what = bad[0]
        raise UsageError(f"{path}:{line}: {what}: {NOT_YOURS}; grade your own adapter")
    for node in ast.walk(tree):
        names = _imported(node)
        if isinstance(node, ast.ImportFrom) and node.level:
            base = path.parent
            for _ in range(node.level - 1):
                base = base.parent
            names = [f"{node.module}.{a.name}" if node.module else a.name for a in node.names]
            for name in names + ([node.module] if node.module else []):
                found = _local_file(name, [base])
                if found:
                    check_module_file(found, roots, starter, seen)
            continue
        for name in names:
            found = _local_file(name, roots)
            if found:
                check_module_file(found, roots, starter, seen)


def _loader_calls(tree: ast.AST, path: Path, roots: list[Path], starter: str | None,
                  seen: set) -> list[tuple[int, str]]:
    """Calls of crashlab's own functions (``serve``, ``load_adapter``...): every argument a
    literal, and an adapter spec among them read like the --adapter itself."""
    ours = {a.asname or a.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
            and (node.module or "").split(".")[0] == "crashlab" for a in node.names}
    ours |= {(a.asname or a.name).split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
             for a in node.names if a.name.split(".")[0] == "crashlab"}
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        root = node.func
        while isinstance(root, ast.Attribute):
            root = root.value
        if not (isinstance(root, ast.Name) and root.id in ours):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        args = [*node.args, *(k.value for k in node.keywords)]
        args += [e for a in args if isinstance(a, (ast.List, ast.Tuple)) for e in a.elts]
        for arg in args:
            if isinstance(arg, ast.Constant):
                if isinstance(arg.value, str) and ":" in arg.value and " " not in arg.value:
                    check_spec(arg.value, roots[0], starter)   # an adapter spec: read it too
            elif isinstance(arg, (ast.List, ast.Tuple)):
                continue
            elif name in LOADER_FUNCS or isinstance(arg, (ast.BinOp, ast.JoinedStr, ast.Call, ast.Subscript)):
                out.append((node.lineno, f"hands a computed value to crashlab's {name}() (a loader reads "
                                         "adapters by name)"))
    return out


def check_spec(spec: str, folder: Path, starter: str | None) -> None:
    """The Python an --adapter spec grades, where it is a file of the learner's (a module of the
    folder, or ``exec:python FILE``): read as above. A module outside the folder is crashlab's
    or an installed package's: one of crashlab's is refused."""
    inner = spec[5:] if spec.startswith("wire:") else spec
    roots = [Path(folder).resolve()]
    if inner.startswith("exec:"):
        words = shlex.split(inner[5:])
        for word in words[1:]:
            p = (Path(folder) / word)
            if word.endswith(".py") and p.is_file():
                check_module_file(p, roots, starter)
        if len(words) >= 3 and words[1] == "-m":
            found = _local_file(words[2], roots)
            if found:
                check_module_file(found, roots, starter)
        return
    module = inner.partition(":")[0]
    found = _local_file(module, roots)
    if found is not None:
        check_module_file(found, roots, starter)
        return
    if module.split(".")[0] in ("crashlab", "harness"):
        raise UsageError(f"--adapter {spec}: a module of crashlab's is not yours to submit; grade your own adapter")
