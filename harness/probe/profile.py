"""The profile file ``crashlab probe`` writes, and ``--services PROFILE.yaml`` reads.

It is a scenario's ``services:`` section (the same knobs, the same spelling: a scenario can paste
it) plus two side keys the reader accepts and the simulator ignores: ``evidence`` (per service,
per field: ``observed`` with the responses that decided it, or ``untested`` for the service owner
to declare) and ``probe`` (where and when it was measured, the effects it made and released).

Applied to a scenario, each service of the profile replaces the fields it declares in the
scenario's service of the same name; the fields it leaves out keep the scenario's own values.
"""
from __future__ import annotations

import copy
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any, Iterable

import yaml

from ..vocab.errors import InvalidScenario, UsageError
from ..vocab.compiled import Scenario
from ..scenario.yaml import _Reader, parse_yaml
from .interpret import FIELDS, Profile

PROFILE_FIELDS = frozenset({"services", "evidence", "probe"})
#: knobs that mean nothing apart: a profile that declares the first declares the others with it
#: (absent: their default), so the scenario's own value of them does not stay behind
TOGETHER = {"consistency": ("lag_ms",)}


def _spelled(knob: str) -> str:
    return knob[:-3] if knob.endswith("_ms") else knob


def _value(knob: str, value: Any) -> Any:
    return f"{value}ms" if knob.endswith("_ms") and isinstance(value, int) else value


def profile_doc(profile: Profile, meta: dict) -> dict:
    services = {_spelled(k): _value(k, v) for k, v in profile.services().items()}
    evidence: dict[str, Any] = {}
    for knob in FIELDS[profile.service]:
        finding = profile.fields.get(knob)
        if finding is None:
            continue
        item: dict[str, Any] = {finding.status: finding.text}
        if finding.responses:
            item["responses"] = list(finding.responses)
        evidence[_spelled(knob)] = item
    for name, finding in profile.notes.items():
        item = {finding.status: finding.text}
        if finding.responses:
            item["responses"] = list(finding.responses)
        evidence[name] = item
    return {"services": {profile.service: services}, "evidence": {profile.service: evidence}, "probe": meta}


HEADER = """\
# A crashlab service profile, written by `crashlab probe` (docs/probe.md).
# services: what the probe observed, in a scenario's own `services:` spelling.
# evidence: per field, `observed` with the responses that decided it, or `untested`: the
#   service owner declares those (add them under services; the scenario's values apply until then).
# Run the simulator on it: crashlab run SCENARIO --services {name}
#                          crashlab conformance --services {name}
"""


def profile_text(profile: Profile, meta: dict, name: str) -> str:
    doc = profile_doc(profile, meta)
    body = yaml.safe_dump(doc, sort_keys=False, width=100, allow_unicode=True, default_flow_style=False)
    return HEADER.format(name=name) + body


# --------------------------------------------------------------------------- reading it back
def load_profile(path: str | Path) -> dict[str, dict]:
    """The profile's services, validated as a scenario's ``services:`` section is (errors name the
    file, line and field): service name -> the raw fields it declares."""
    from ..scenario.loader import read_services

    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"--services {p}: no such file", hint="write one with `crashlab probe ... --out FILE`")
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"--services {p}: cannot read it: {exc}") from None
    doc = parse_yaml(text, file=str(p))
    if not isinstance(doc, dict) or "services" not in doc:
        raise InvalidScenario("a services profile is a mapping with a 'services' section (and optionally "
                              "'evidence' and 'probe'), as `crashlab probe` writes it", file=str(p), line=1)
    rd = _Reader(str(p))
    rd.mapping({"": doc}, "", "", PROFILE_FIELDS)
    for side in ("evidence", "probe"):
        if side in doc and not isinstance(doc[side], dict):
            rd.fail(doc, side, side, "expected a mapping (it is read by people, not by the simulator)")
    read_services(doc, file=str(p))          # the same checks as a scenario's services
    return {name: dict(fields or {}) for name, fields in doc["services"].items()}


def apply_profile(scenario: Scenario, services: dict[str, dict], source: str) -> Scenario:
    """``scenario`` with the profile's fields replacing its same-named services' fields."""
    from ..scenario.loader import from_dict

    missing = sorted(set(services) - set(scenario.services))
    if missing:
        raise UsageError(f"--services {source}: the scenario {scenario.id} has no {', '.join(missing)} service "
                         f"(its services: {', '.join(sorted(scenario.services))})",
                         hint="a profile replaces services of the same name; pick a scenario that has it")
    doc = copy.deepcopy(dict(scenario.raw))
    declared = dict(doc.get("services") or {name: {} for name in scenario.services})
    for name, fields in services.items():
        own = dict(declared.get(name) or {})
        knobs = set(fields)
        for knob in fields:
            knobs.update(TOGETHER.get(knob[:-3] if knob.endswith("_ms") else knob, ()))
        for knob in knobs:             # one spelling per knob: the profile's replaces the scenario's
            for spelling in (knob, knob + "_ms", knob[:-3] if knob.endswith("_ms") else None):
                own.pop(spelling, None)
        own.update(copy.deepcopy(fields))
        declared[name] = own
    doc["services"] = declared
    try:
        return from_dict(doc, file=scenario.source)
    except InvalidScenario as exc:
        raise UsageError(f"--services {source} does not fit the scenario {scenario.id}: {exc.message}",
                         hint="the profile's fields contradict what the scenario sets up") from None


def apply_to_all(scenarios: Iterable[Scenario], path: str) -> tuple[list[Scenario], list[str]]:
    """Every scenario with the profile applied where it has the profile's services; the ids touched.
    A profile none of whose services any scenario has is a usage error."""
    services = load_profile(path)
    out, touched = [], []
    for sc in scenarios:
        mine = {k: v for k, v in services.items() if k in sc.services}
        if mine:
            out.append(apply_profile(sc, mine, path))
            touched.append(sc.id)
        else:
            out.append(sc)
    if not touched:
        raise UsageError(f"--services {path}: no selected scenario has a {', '.join(sorted(services))} service",
                         hint="a profile replaces services of the same name")
    return out, touched


def with_services(scenarios: list[Scenario], path: str) -> list[Scenario]:
    """``--services PROFILE``: the scenarios with the profile's services in place of their own
    same-named ones (one scenario must have every one of them); which scenarios it touched goes
    to standard error."""
    if len(scenarios) == 1:
        changed, touched = [apply_profile(scenarios[0], load_profile(path), path)], [scenarios[0].id]
    else:
        changed, touched = apply_to_all(scenarios, path)
    left = [s.id for s in scenarios if s.id not in touched]
    differ = [new.id for old, new in zip(scenarios, changed) if _effective(old) != _effective(new)]
    print(f"--services {path}: applied to {len(touched)} of {len(scenarios)} scenario(s): {_few(touched)}"
          + (f"; untouched (no service of that name): {_few(left)}" if left else ""), file=sys.stderr)
    if differ:
        print(f"--services {path}: it changed the services of {len(differ)}: {_few(differ)}; their expectations "
              "(expect:, checked as EXP-*) were written for their own services, so these are judged by the "
              "invariants only (docs/probe.md)", file=sys.stderr)
    return [replace(new, expect={}) if new.id in differ else new for new in changed]


def _effective(sc: Scenario) -> dict:
    """A scenario's services with the optional knobs it leaves out at their value (false)."""
    from ..world.services import PROFILE_OPTIONAL

    return {name: {**PROFILE_OPTIONAL.get(name, {}), **prof} for name, prof in sc.services.items()}


def _few(ids: list[str], n: int = 8) -> str:
    return ", ".join(ids[:n]) + (f", ... ({len(ids) - n} more)" if len(ids) > n else "")


def unjudged(before: list[Scenario], after: list[Scenario]) -> list[str]:
    """The scenarios whose expectations ``with_services`` set aside (they had some, and now none)."""
    return [new.id for old, new in zip(before, after) if old.expect and not new.expect]


def profiled(card, path: str, unjudged_ids: Iterable[str]):
    """The scorecard (or one ScenarioResult) of a run under ``--services PROFILE``, saying so where it
    is read: each repro command names the profile; each scenario it judged by the invariants only
    carries a note that says why; a scorecard's ``services`` (results JSON, docs/results.md) names
    the profile and those scenarios, and its ``services_line`` is what the terminal prints."""
    from shlex import quote

    ids = set(unjudged_ids)
    from ..checks.rubric import SET_ASIDE

    note = (f"{SET_ASIDE}{path} changed its services, and its expectations (expect:, EXP-*) were written for "
            "its own (docs/probe.md)")

    def one(res):
        return replace(res, repro=f"{res.repro} --services {quote(path)}" if res.repro else res.repro,
                       notes=res.notes + ((note,) if res.id in ids else ()))
    if not hasattr(card, "scenarios"):
        return one(card)
    listed = [s.id for s in card.scenarios if s.id in ids]
    return replace(card, scenarios=tuple(one(s) for s in card.scenarios),
                   extra={**card.extra, "services": {"profile": path, "without_expectations": listed}})


def services_line(card) -> str | None:
    """The line a scorecard of a run under ``--services`` is printed with (None for any other run)."""
    services = card.extra.get("services")
    if not isinstance(services, dict):
        return None
    ids = services.get("without_expectations") or []
    return (f"services: {services.get('profile')}; {len(ids)} of {len(card.scenarios)} scenario(s) judged by the "
            "invariants only, their expectations set aside (written for their own services): "
            + (_few(list(ids)) if ids else "none") + " (docs/probe.md)")
