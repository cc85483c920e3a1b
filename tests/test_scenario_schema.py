"""The JSON Schema of the scenario format agrees with the loader, and the docs table is current."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import yaml

jsonschema = pytest.importorskip("jsonschema")

from crashlab.vocab.errors import InvalidScenario  # noqa: E402
from crashlab.scenario import (SCHEMA_PATH, TABLE_BEGIN, TABLE_END, from_dict,  # noqa: E402
                              library, library_dir, library_table, schema_document, schema_text)

REGENERATE = "regenerate with `python tools/docgen.py`"
DOCS_PATH = Path(__file__).resolve().parent.parent / "docs" / "scenarios.md"


@pytest.fixture(scope="module")
def validator():
    schema = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def test_the_shipped_schema_is_generated_from_the_loader_tables():
    assert SCHEMA_PATH.read_text(encoding="utf-8") == schema_text(), f"the schema is stale; {REGENERATE}"
    assert schema_document()["$schema"] == "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.parametrize("path", sorted(library_dir().glob("*.yaml")), ids=lambda p: p.stem)
def test_every_library_file_passes_schema_and_loader(validator, path):
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    assert not errors, "; ".join(f"{'/'.join(map(str, e.absolute_path))}: {e.message[:200]}" for e in errors)
    assert from_dict(doc, file=str(path)).id == path.stem


GOOD = {
    "id": "g", "title": "good",
    "clock": {"origin": "10:00", "horizon": "30m"},
    "services": {"reservation": {"lag": "5s", "consistency": "eventual", "callback_delay": None},
                 "notification": None},
    "runs": [{"id": "run-1", "intent": {"tenant": "T-1"}, "approval": {"mode": "manual", "delay": 0},
              "deadline": "10:20", "notify": True}],
    "events": [{"at": "10:01", "type": "cancel", "reason": "r", "duplicates": 1, "duplicate_after": "2s"},
               {"at": 90_000, "type": "event", "kind": "intake", "payload": {"x": 1}},
               {"at": "10:02:30.500", "type": "deploy", "schema_version": 2},
               {"at": "10:03", "type": "other_actor", "service": "reservation", "op": "reserve",
                "args": {"intent": {"tenant": "T-2", "incident": "I-9", "part": "P-1", "slot": "S-1",
                                    "quantity": 1}}}],
    "faults": [{"match": {"port": "reservation", "op": "reserve", "nth": 1}, "fault": "late_arrival",
                "delay": "1m30s"},
               {"match": {"port": "ledger", "op": "append"}, "fault": "error", "code": "unavailable", "times": 0}],
    "crashes": [{"match": {"port": "run", "op": "finish", "from": "10:01"}, "boundary": "after",
                 "restart_after": "10s"}],
    "pauses": [{"match": {"worker": 1}, "resume_after": "2m"}],
    "expect": {"dispositions": ["SUCCEEDED"], "remote_effects": {"run-1": 1},
               "evidence": ["reservation.lookup", "ledger:SENT_UNKNOWN", "finish:SUCCEEDED", "escalation"],
               "verdict": "pass"},
    "env": {"code_version": 2},
}

# each mutation makes the document invalid for both the schema and the loader
BAD = {
    "unknown top field": lambda d: d.update(colour="red"),
    "bad id": lambda d: d.update(id="Bad Id"),
    "empty title": lambda d: d.update(title=""),
    "bad origin": lambda d: d["clock"].update(origin="25:99"),
    "bad horizon": lambda d: d["clock"].update(horizon="soon"),
    "unknown service": lambda d: d["services"].update(teleport={}),
    "unknown knob": lambda d: d["services"]["reservation"].update(colour=1),
    "bad knob value": lambda d: d["services"]["reservation"].update(lookup="by_guess"),
    "bool for int": lambda d: d["services"]["reservation"].update(stock=True),
    "no runs": lambda d: d.update(runs=[]),
    "run without intent": lambda d: d["runs"][0].pop("intent"),
    "bad approval mode": lambda d: d["runs"][0]["approval"].update(mode="maybe"),
    "bad operation": lambda d: d["runs"][0].update(operation="release"),
    "unknown event type": lambda d: d["events"][0].update(type="explode"),
    "event field of another type": lambda d: d["events"][0].update(schema_version=2),
    "event kind missing": lambda d: d["events"][1].pop("kind"),
    "reserved payload key": lambda d: d["events"][1]["payload"].update(event_id="e"),
    "deploy without versions": lambda d: d["events"].__setitem__(2, {"at": "10:02", "type": "deploy"}),
    "other actor op": lambda d: d["events"][3].update(op="lookup"),
    "run on a deploy": lambda d: d["events"][2].update(run="run-1"),
    "unknown fault": lambda d: d["faults"][0].update(fault="explode"),
    "error without code": lambda d: d["faults"][1].pop("code"),
    "code on a transport fault": lambda d: d["faults"][0].update(code="timeout"),
    "unknown port": lambda d: d["faults"][0]["match"].update(port="teleport"),
    "unknown op": lambda d: d["faults"][0]["match"].update(op="teleport"),
    "nth zero": lambda d: d["faults"][0]["match"].update(nth=0),
    "empty match": lambda d: d["crashes"][0].update(match={}),
    "fault field on a crash": lambda d: d["crashes"][0].update(fault="refused"),
    "bad boundary": lambda d: d["crashes"][0].update(boundary="during"),
    "bad knowledge": lambda d: d["pauses"][0]["match"].update(knowledge="MAYBE"),
    "negative duration": lambda d: d["pauses"][0].update(resume_after=-5),
    "bad disposition": lambda d: d["expect"].update(dispositions=["DONE"]),
    "bad evidence": lambda d: d["expect"].update(evidence=["reservation.teleport"]),
    "bad remote effects": lambda d: d["expect"].update(remote_effects=-1),
    "bad verdict": lambda d: d["expect"].update(verdict="maybe"),
    "bad env key": lambda d: d["env"].update(colour=1),
    "null field": lambda d: d.update(seed=None),
}


def test_schema_and_loader_accept_the_same_good_document(validator):
    assert not list(validator.iter_errors(GOOD))
    from_dict(copy.deepcopy(GOOD), file="good.yaml")


@pytest.mark.parametrize("name", sorted(BAD))
def test_schema_and_loader_refuse_the_same_bad_document(validator, name):
    doc = copy.deepcopy(GOOD)
    BAD[name](doc)
    assert list(validator.iter_errors(doc)), f"the schema accepts: {name}"
    with pytest.raises(InvalidScenario):
        from_dict(doc, file="bad.yaml")


def test_the_docs_library_table_is_current():
    text = DOCS_PATH.read_text(encoding="utf-8")
    embedded = text.split(TABLE_BEGIN, 1)[1].split(TABLE_END, 1)[0].strip("\n") + "\n"
    assert embedded == library_table(library()), f"docs/scenarios.md's library table is stale; {REGENERATE}"
