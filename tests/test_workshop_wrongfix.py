"""Wrong fixes caught: a decision built on a misconception the chapter names fails a scenario of
its rung, and the feedback names that misconception; the honest decision passes every scenario."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from crashlab.cli import main
from crashlab.workshop import solutions
from crashlab.workshop.codecheck import scenarios
from crashlab.workshop.ladder import rung
from test_workshop_shortcuts import _decide, room  # noqa: F401 (room is a fixture)

WRONG_FIXES = [  # (rung, function, the wrong fix, the scenario it fails, the misconception named)
    ("t3", "replay_disposition",
     'def replay_disposition(recorded_state, recorded_effects):\n'
     '    return recorded_state if recorded_state.startswith("CANCELLED") else "SUCCEEDED"\n',
     "workshop-t3-failed-record-before-response", "a finished run succeeded unless it was cancelled"),
    ("t4", "approval_is_live",
     'def approval_is_live(answer, resumed_wait):\n    return bool(answer.get("approval_id"))\n',
     "matrix-approval-revoked", "an approval that has an id is live"),
    ("t6", "dedup_key",
     'import json\n\n\ndef dedup_key(delivery):\n    return json.dumps(delivery["payload"], sort_keys=True)\n',
     "workshop-t6-two-retry-requests", "the same payload"),
]


@pytest.mark.parametrize("rung_id,name,model,scenario,belief", WRONG_FIXES, ids=[w[0] for w in WRONG_FIXES])
def test_a_wrong_fix_fails_and_the_feedback_names_its_misconception(room, capsys, rung_id, name, model,
                                                                     scenario, belief):
    assert scenario in scenarios(rung(rung_id))
    assert main(["workshop", "start", rung_id]) == 0
    kit = Path("workshop") / rung_id
    _decide(kit, name, model)
    capsys.readouterr()
    assert main(["workshop", "check", rung_id]) == 1
    out = capsys.readouterr().out
    assert "code: FAIL" in out and f"FAIL  {scenario}" in out
    assert "a common reason is the belief that" in out and belief in out
    # the honest reference answer passes every scenario, the new one included
    _decide(kit, name, solutions.SOLUTIONS[rung(rung_id).starter])
    main(["workshop", "check", rung_id])
    out = capsys.readouterr().out
    assert re.search(r"code: PASS \((\d+) of \1 scenarios\)", out) and f"pass  {scenario}" in out
    assert "a common reason is the belief" not in out
