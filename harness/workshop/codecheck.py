"""Grading a code rung: the learner's decision on every scenario of the rung, never on one.

A code rung lists its scenarios in data/rungs.yaml (``code_scenarios``): the rung's own trace
and the ones where a shortcut fails (a decision that ignores its inputs, the forbidden
"reconcile, then send again" fallback when the read stays down). The code passes only when
every scenario passes.

A kit's code is the learner's own: ``adapter.py`` keeps its plumbing section as written and
its editable part imports nothing of the reference design or the gallery beyond what the
starter itself imports; an ``--adapter`` naming the reference or the gallery is refused.
"""
from __future__ import annotations

import ast
import functools
import shlex
import sys
from pathlib import Path

from ..vocab.errors import UsageError
from . import evidence as E
from .solutions import PLUMBING

FORBIDDEN = ("crashlab.reference_impl", "crashlab.gallery", "crashlab.workshop")
STARTERS = E.DATA / "starters"


def own_scenario(name: str, variant: str):
    """The learner's own version of a code scenario: the same scenario with the learner's
    identifiers (evidence.Variant), so a decision that recognises the shared kit's runs,
    approvals or events instead of reading its inputs fails there. Its name stays."""
    return _own_scenario(name, variant)


@functools.lru_cache(maxsize=64)
def _own_scenario(name: str, variant: str):
    from ..scenario.loader import load_text

    source = Path(E.scenario_of(name).source)
    text = source.read_text(encoding="utf-8").replace(name, "\0NAME\0")
    return load_text(E.Variant(variant).text(text).replace("\0NAME\0", name), file=str(source))


@functools.lru_cache(maxsize=64)
def _own_keys(name: str, variant: str) -> dict:
    """The learner's own run's keys -> the keys their listing shows (the reference design on both
    versions of the scenario, event by event: the same events, other names)."""
    from ..run.conformance import run_one

    own = E.Variant(variant)
    result, _ = run_one(own_scenario(name, variant), "crashlab.reference_impl:ReferenceAdapter")
    out = {}
    for shared, mine in zip(E.trace(name), result.events):
        for a, b in zip(E._HEX.findall(str(shared)), E._HEX.findall(str(mine))):
            out.setdefault(b, own.text(a))
    return out


def scenarios(r) -> tuple[str, ...]:
    """Every scenario the rung's code is graded on, the rung's own first."""
    first = r.code_scenario or r.scenario
    return (first,) + tuple(n for n in r.code_scenarios if n != first)


# --------------------------------------------------------------------------- the guard
def _imports(text: str) -> list[tuple[str, int]]:
    """(dotted name, line) of every import, ``from a import b`` giving ``a.b``; the text of a
    string naming a forbidden module counts too (importlib, __import__)."""
    try:
        tree = ast.parse(text)
    except SyntaxError:
        return []       # the loader reports it with its line
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            out += [(f"{node.module}.{a.name}", node.lineno) for a in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and \
                any(f in node.value for f in FORBIDDEN + ("reference_impl", "gallery")):
            out.append((node.value, node.lineno))
    return out


def _forbidden(name: str) -> bool:
    return any(name == f or name.startswith(f + ".") or f in name for f in FORBIDDEN) or \
        "reference_impl" in name or "gallery" in name


def guard(path: Path, starter: str) -> None:
    """UsageError when the kit's code is not the learner's own work (see the module note)."""
    text = path.read_text(encoding="utf-8")
    start = (STARTERS / f"{starter}.py").read_text(encoding="utf-8")
    head, start_head = text, start
    if PLUMBING in start:
        start_head, _, start_tail = start.partition(PLUMBING)
        if PLUMBING not in text:
            raise UsageError(f"{path}: the plumbing section is gone; keep it as the starter wrote it (run "
                             "`crashlab workshop start` in a fresh folder to see it) and edit only the decision")
        head, _, tail = text.partition(PLUMBING)
        if tail.split() != start_tail.split():
            raise UsageError(f"{path}: the plumbing section was changed; restore it as the starter wrote it "
                             "and edit only the decision above it")
    allowed = {name for name, _ in _imports(start_head)}
    for name, line in _imports(head):
        if _forbidden(name) and name not in allowed:
            raise UsageError(f"{path}:{line}: imports {name}: the reference design and the gallery are not "
                             "yours to submit; write the decision yourself (only what the starter imports "
                             "may be used)")
    from .provenance import check_decision
    check_decision(path, head, start_head)      # a split, encoded or computed name, exec, getattr...


def refuse_spec(spec: str) -> None:
    """An --adapter naming the reference design or a gallery entry does not grade a code rung."""
    inner = spec[5:] if spec.startswith("wire:") else spec
    if not inner.startswith("exec:") and _forbidden(inner.partition(":")[0]):
        raise UsageError(f"--adapter {spec}: the reference design and the gallery are not yours to submit; "
                         "grade your own adapter (module:attribute or exec:COMMAND)")
    if inner.startswith("exec:") and any(f in inner for f in FORBIDDEN):
        raise UsageError(f"--adapter {spec}: the command runs the reference design or the gallery; "
                         "grade your own adapter")


# --------------------------------------------------------------------------- loading and grading
def _compiles(path: Path) -> None:
    """A kit adapter that does not parse is the learner's error with its line, not a lost run."""
    try:
        compile(path.read_text(encoding="utf-8"), str(path), "exec")
    except SyntaxError as exc:
        raise UsageError(f"{path}:{exc.lineno}: not valid Python ({exc.msg})") from None


def _run(scenario, spec, kit: Path | None):
    """One scenario in a worker process; a kit's adapter.py is imported there from the kit folder."""
    import os

    from ..run.conformance import run_checked

    if kit is None:
        return run_checked(scenario, spec)
    before = os.getcwd()
    os.chdir(kit)
    try:
        return run_checked(scenario, spec)
    finally:
        os.chdir(before)


def source(kit_dir: Path, *, wire: bool, adapter: str | None) -> str:
    """What was graded, as the progress file records it."""
    if adapter:
        return f"--adapter {adapter}"
    if wire and (kit_dir / "wire_adapter.py").exists():
        return "wire_adapter.py (--wire)"
    return "adapter.py (--wire)" if wire else "adapter.py"


def grade_code(r, kit_dir: Path, *, wire: bool = False, adapter: str | None = None, offset=None,
               variant: str | None = None):
    """Run every scenario of the rung with the learner's adapter; -> (passed, lines). The
    learner's code runs only in supervised worker processes (as ``crashlab run`` runs any
    adapter: crashlab.run.judge, crashlab.run.jobs); crashlab checks the traces here. The
    findings are told in the learner's own numbering (``offset``, ``variant``: E.own_words)."""
    from ..run.conformance import failure_message
    from ..run.drivers import load_adapter
    from .grade import belief, code_belief

    here = None
    if adapter:
        refuse_spec(adapter)
        from .provenance import check_spec
        check_spec(adapter, Path.cwd(), r.starter)     # the learner's Python files it grades, read
        spec = load_adapter(adapter, import_code=False)
    elif wire and (kit_dir / "wire_adapter.py").exists():
        guard(kit_dir / "wire_adapter.py", r.wire_starter or r.starter)
        own = f"-m crashlab.workshop.ownids {shlex.quote(variant)} {shlex.quote(sys.executable)} " if variant else ""
        spec = load_adapter(f"exec:{shlex.quote(sys.executable)} {own}"
                            f"{shlex.quote(str(kit_dir.resolve() / 'wire_adapter.py'))}")
    elif wire or variant:   # a personal kit's code sees its own run-time identifiers (ownids)
        guard(kit_dir / "adapter.py", r.starter)
        _compiles(kit_dir / "adapter.py")
        serve = ("from crashlab.workshop.ownids import serve; sys.exit(serve(sys.argv[2], 'adapter:Adapter'))"
                 if variant else "from crashlab.run.wire import serve; sys.exit(serve('adapter:Adapter'))")
        spec = load_adapter(f"exec:{shlex.quote(sys.executable)} -c \"import sys; sys.path.insert(0, sys.argv[1]); "
                            f"{serve}\" {shlex.quote(str(kit_dir.resolve()))}"
                            + (f" {shlex.quote(variant)}" if variant else ""))
    else:
        if not (kit_dir / "adapter.py").exists():
            raise UsageError(f"{kit_dir / 'adapter.py'}: no adapter here; run `crashlab workshop start` again "
                             "to restore it")
        guard(kit_dir / "adapter.py", r.starter)
        _compiles(kit_dir / "adapter.py")
        spec, here = load_adapter("adapter:Adapter", import_code=False), kit_dir.resolve()
    names = scenarios(r)
    lines, failed = [], 0
    again = "crashlab workshop check " + r.id + (" --wire" if wire else "") + \
        (f" --adapter {shlex.quote(adapter)}" if adapter else "")
    for name in names:
        scenario, words = (own_scenario(name, variant), _own_keys(name, variant)) if variant else (E.scenario_of(name), {})
        verdict = _run(scenario, spec, here)
        if verdict.verdict == "pass":
            lines.append(f"  pass  {name} (disposition {verdict.disposition})")
            continue
        failed += 1
        lines.append(f"  FAIL  {name}")
        message = failure_message(verdict).replace(spec.text, "your adapter")
        if variant:     # the run was the learner's own: its names are theirs; its keys told as their listing's
            from .ownids import own_text
            message = own_text(variant, message)     # the run-time identifiers their code saw
            message = E._HEX.sub(lambda m: words.get(m.group(0), m.group(0)), E.own_words(message, offset, None, names))
        else:
            message = E.own_words(message, offset, variant, names)
        lines += ["    " + line for line in message.splitlines()
                  if not line.strip().startswith("repro:")]  # the learner's repro is the check command itself
        entry = code_belief(r.id, name)
        if entry:
            lines.append("    " + belief(entry, "\n    "))
    head = f"code: {'PASS' if not failed else 'FAIL'} ({len(names) - failed} of {len(names)} scenarios)"
    return not failed, [head] + lines + ([f"  again: {again}"] if failed else [])
