"""Correct adapters written independently of reference_impl (gallery/independent): each
scores 20/20 in process and over the wire, and no verdict depends on their free choices."""
from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

import crashlab.gallery.independent as independent
from crashlab.run.conformance import run_one, run_suite
from crashlab.run.drivers import load_adapter
from crashlab.scenario import library

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "gallery" / "independent" / "fieldops.py"


@pytest.fixture(scope="module")
def lib():
    return library()


#: Library expectations allowed to reject these designs: none. (When one does, widen it where the
#: chapter permits the outcome, or name the chapter rule the design breaks in docs/adapters.md.)
CONTESTED: frozenset[str] = frozenset()


def uncontested(lost):
    """The lost points (or violations) that no contested expectation explains."""
    return [lp for lp in lost if not (lp.scenario in CONTESTED and lp.invariant.startswith("EXP-"))]


@pytest.mark.parametrize("name", ["Patient", "Brisk", "Conservative"])
def test_each_independent_design_scores_twenty(name, lib):
    card = run_suite(f"gallery.independent:{name}", lib)
    assert card.auto_fail == ()
    assert not uncontested(card.lost), [(lp.scenario, lp.invariant, lp.message) for lp in uncontested(card.lost)]


def test_the_wire_adapter_is_a_standalone_stdlib_script_and_scores_twenty(lib):
    imported = set()
    for path in (SCRIPT, SCRIPT.with_name("fieldops_core.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        imported |= {alias.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import)
                     for alias in node.names}
        imported |= {node.module.split(".")[0] for node in ast.walk(tree)
                     if isinstance(node, ast.ImportFrom) and node.module}
    assert imported <= set(sys.stdlib_module_names) | {"__future__", "fieldops_core"}, imported
    card = run_suite(f"exec:{sys.executable} {SCRIPT} --lease-ttl 25000 --checkpoints sparse --poll 6000", lib)
    assert card.auto_fail == ()
    assert not uncontested(card.lost), [(lp.scenario, lp.message) for lp in uncontested(card.lost)]


def test_the_independent_package_uses_no_reference_or_gallery_code():
    for path in (ROOT / "gallery" / "independent").glob("*.py"):
        text = path.read_text(encoding="utf-8")
        assert "reference_impl" not in text.replace("independently of reference_impl", ""), path
        tree = ast.parse(text)
        modules = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
        assert not any(m.startswith(("reference_impl", "gallery.")) for m in modules), (path, modules)


# the choices AR-08 leaves to a design: lease TTL (5 s to 300 s), checkpoint cadence (every fact,
# sparse, or only the chapter's responsibility boundaries), reading an ambiguous send at once (and
# redispatching on authoritative absence) or after a pause, how many reads, the order of reads and
# search or lookup where both are authoritative, backoff (0.5 s to 60 s, slept whole or in
# lease-keeping chunks), keeping or compensating a confirmed hold after a cancellation, and
# verifying a release by the hold's key or by its own
CHOICES = [
    dict(lease_ttl_ms=8_000, checkpoints="dense", poll_ms=2_000, read_order="lookup-first", reads=3),
    dict(lease_ttl_ms=20_000, checkpoints="sparse", poll_ms=3_000, read_order="search-first", reads=12),
    dict(lease_ttl_ms=29_000, checkpoints="dense", poll_ms=7_000, read_order="search-first", reads=5),
    dict(lease_ttl_ms=31_000, checkpoints="sparse", poll_ms=1_000, read_order="lookup-first", reads=60),
    dict(lease_ttl_ms=120_000, checkpoints="sparse", poll_ms=9_000, read_order="search-first", reads=2),
    dict(lease_ttl_ms=8_000, checkpoints="sparse", poll_ms=2_500, read_order="search-first", reads=4,
         conservative=True),
    dict(lease_ttl_ms=5_000, early_redispatch=True, backoff_ms=500, checkpoints="boundaries",
         release_read="compensation", poll_ms=1_000),
    dict(lease_ttl_ms=300_000, read_pause_ms=30_000, backoff_ms=60_000, checkpoints="dense", compensate=False,
         read_order="search-first"),
    dict(lease_ttl_ms=20_000, chunked_sleeps=True, backoff_ms=20_000, checkpoints="sparse", read_order="lookup-only"),
    dict(lease_ttl_ms=90_000, checkpoints="boundaries", compensate=False, read_order="search-only",
         early_redispatch=True, backoff_ms=60_000),
    dict(lease_ttl_ms=5_000, read_pause_ms=10_000, checkpoints="dense", release_read="compensation",
         backoff_ms=2_500, chunked_sleeps=True),
]

#: Where the quoted rule names the key itself, the library asks for the lookup by key, and a design
#: that only searches loses E4 there (docs/adapters.md, "Which read an evidence item names"): "query by
#: key" (trace 2), "query the exact semantic key" (handoff run 1), and the in-flight conflicts,
#: where only the lookup reports a request still in flight ("The ideal query accepts the semantic key").
NAMES_THE_KEY = frozenset({"t2-commit-before-record", "handoff-1-sent-unknown-cancelled",
                           "matrix-conflict-in-flight", "matrix-conflict-in-flight-second-run",
                           "matrix-reads-disagree"})


def test_no_verdict_depends_on_the_adapters_free_choices(lib, monkeypatch):
    verdicts: dict[str, set] = {}
    paces: dict[str, set] = {}
    for n, choices in enumerate(CHOICES):
        monkeypatch.setattr(independent, f"Varied{n}",
                            type(f"Varied{n}", (independent.IndependentAdapter,), {"choices": choices}),
                            raising=False)
        spec = load_adapter(f"crashlab.gallery.independent:Varied{n}")
        for sc in lib:
            run, res = run_one(sc, spec)
            found = tuple(sorted((v.invariant, v.point) for v in res.violations))
            if choices.get("read_order") == "search-only" and sc.id in NAMES_THE_KEY:
                # the decided exception: only the expectation that names the lookup, on E4
                assert found and all(inv.startswith("EXP-") and point == "E4" for inv, point in found), found
                continue
            verdicts.setdefault(sc.id, set()).add((res.verdict, found))
            paces.setdefault(sc.id, set()).add(len(run.events))
    changed = {sid: v for sid, v in verdicts.items() if len(v) > 1 and sid not in CONTESTED}
    assert not changed, changed
    assert all(v == {("pass", ())} for sid, v in verdicts.items() if sid not in CONTESTED)
    assert all(inv.startswith("EXP-") for sid in CONTESTED for _, found in verdicts.get(sid, ()) for inv, _ in found)
    # the choices really differ: the traces themselves are not the same
    assert sum(1 for p in paces.values() if len(p) > 1) > len(lib) // 2


def test_ending_the_effect_at_a_spent_ceiling_costs_one_point_the_refinement_names(lib, monkeypatch):
    """FAILED_NO_EFFECT at the attempt ceiling (every attempt refused before send) is truthful;
    refinement R1 prefers WAITING_RETRY and charges the choice once, D1, in one scenario."""
    monkeypatch.setattr(independent, "EndsAtCeiling", type("EndsAtCeiling", (independent.IndependentAdapter,),
                                                           {"choices": {"at_ceiling": "fail"}}), raising=False)
    card = run_suite("crashlab.gallery.independent:EndsAtCeiling", lib)
    assert card.total == 19 and card.auto_fail == ()
    assert {(lp.scenario, lp.point.split()[0]) for lp in card.lost} == {("seed002-duplicate-retry-request", "D1")}


def test_the_conservative_design_escalates_sooner_than_the_patient_one(lib):
    sc = next(s for s in lib if s.id == "matrix-reconciliation-down")
    reads = {}
    for name in ("Patient", "Conservative"):
        run, res = run_one(sc, f"gallery.independent:{name}")
        assert res.verdict == "pass", res.violations
        reads[name] = sum(1 for e in run.events if e["kind"] == "call" and e["op"] in ("lookup", "search"))
    assert reads["Conservative"] < reads["Patient"]


def test_escalate_every_ambiguity_loses_only_the_reconciliation_point(lib):
    card = run_suite("crashlab.gallery.alternatives:EscalateEveryAmbiguity", lib)
    assert card.total == 19 and card.auto_fail == ()
    assert {lp.point.split()[0] for lp in card.lost} == {"E4"}
    assert all(lp.rule and lp.rule["quote"] for lp in card.lost)
