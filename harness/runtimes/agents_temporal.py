"""An agent framework on Temporal: what the Pydantic AI and OpenAI Agents SDK profiles share.

Both run an agent inside the worker's own Temporal workflow, each model request and each tool call an
activity (unless the application runs a tool in the workflow's own code). crashlab starts the dev server as
for ``--runtime temporal`` and reads the same history (crashlab.runtimes.temporal); each framework's
``annotate`` adds what its JSON payloads say: the tool calls each model request answered with, and which
activity ran which call. Here: reading the payloads, and the card's line from the annotated rows.
"""
from __future__ import annotations

import base64
import binascii
import json
from pathlib import Path
from typing import Callable

from .temporal import TemporalServer

_ENDS = ("ACTIVITY_TASK_COMPLETED", "ACTIVITY_TASK_FAILED", "ACTIVITY_TASK_TIMED_OUT", "ACTIVITY_TASK_CANCELED")


def payloads(attrs: dict, field: str) -> list:
    """The JSON values of ``attrs[field]``'s payloads ([] where one is not JSON)."""
    values = []
    for payload in ((attrs.get(field) or {}).get("payloads") or []):
        try:
            values.append(json.loads(base64.b64decode(payload.get("data", ""), validate=True)))
        except (binascii.Error, ValueError, TypeError):
            continue
    return values


def activity_config(row: dict) -> str:
    """A scheduled activity's config as the card names it: its timeouts and its retry policy."""
    retry = row.get("retry_policy") or {}
    attempts = int(retry.get("maximumAttempts", 0))
    policy = (f"RetryPolicy(maximum_attempts={attempts or 'unlimited'}, initial_interval="
              f"{retry.get('initialInterval', '?')}, backoff_coefficient={retry.get('backoffCoefficient', '?')}, "
              f"maximum_interval={retry.get('maximumInterval', '?')})")
    timeouts = {t: row.get(t) if row.get(t) not in (None, "0s") else "none"    # unset: absent, or "0s"
                for t in ("startToCloseTimeout", "heartbeatTimeout")}
    return (f"start_to_close_timeout={timeouts['startToCloseTimeout']}, "
            f"heartbeat_timeout={timeouts['heartbeatTimeout']}, {policy}")


def attempts(rows: list[dict], scheduled: int) -> str:
    """How one activity's attempts show in the history: the last one's number and end, and what is missing."""
    attempt, how, failure = 1, "not ended", ""
    for row in rows:
        if row.get("scheduled") != scheduled:
            continue
        if row["event"] == "ACTIVITY_TASK_STARTED":
            attempt, failure = int(row.get("attempt", 1)), row.get("failure", "")
        elif row["event"] in _ENDS:
            how = row["event"].removeprefix("ACTIVITY_TASK_").lower().replace("_", " ")
    why = f": {failure}" if failure else ""
    lost = "" if attempt == 1 else f" (attempt 1 not in the history{why})" if attempt == 2 else \
        f" (attempts 1..{attempt - 1} not in the history{why.replace(':', ', the last:', 1)})"
    return f"attempt {attempt} {how}{lost}"


def asked(rows: list[dict]) -> dict[str, list[str]]:
    """Each tool the model asked for, with the call ids it used, in the history's order."""
    calls: dict[str, list[str]] = {}
    for row in rows:
        for call in row.get("tool_calls", ()):
            ids = calls.setdefault(str(call["tool"]), [])
            if call["call_id"] not in ids:
                ids.append(str(call["call_id"]))
    return calls


def summary(label: str, rows: list[dict], ran: dict[str, dict]) -> str:
    """One line for the card: the workflow, the model requests recorded, each tool the model asked for (with
    its call ids) and whether each call ran as a Temporal activity (``ran``: call id -> the activity's
    scheduled row; its attempts) or in the workflow, the tool activities' config, and what the history lacks."""
    if rows and "error" in rows[0]:
        return f"Temporal history not read: {rows[0]['error']}"
    if not rows:
        return f"Temporal has no workflow under this id (the worker never started the {label.split(' on ')[0]} agent)"
    closed = next((r["event"].removeprefix("WORKFLOW_EXECUTION_").lower() for r in reversed(rows)
                   if r["event"].startswith("WORKFLOW_EXECUTION_") and r["event"] != "WORKFLOW_EXECUTION_STARTED"),
                  "open")
    models = sum(1 for r in rows if "tool_calls" in r)
    parts = []
    for tool, ids in asked(rows).items():
        how = [f"{i} ran as a Temporal activity, {attempts(rows, ran[i]['event_id'])}" if i in ran else
               f"{i} ran in the workflow (no activity: a replay runs it again)" if closed != "open" else
               f"{i} has no activity yet" for i in ids]
        parts.append(f"the model called {tool} {len(ids)} time(s): {'; '.join(how)}")
    config = f"; tool activities scheduled with {activity_config(next(iter(ran.values())))}" if ran else ""
    return (f"{label}: workflow {closed}; {models} model request(s) recorded; "
            f"{'; '.join(parts) or 'no tool call recorded'}{config}; an attempt cut by a kill has no event of "
            "its own (the next attempt's number and last failure stand for it)")


class AgentOnTemporal(TemporalServer):
    """The Temporal dev server for one ``crashlab integrate``, its history read for one framework: its
    runtime ``name`` and quiet environment (no telemetry) for every worker, its ``annotate`` and ``summary``."""

    def __init__(self, work: Path, *, name: str, quiet: dict[str, str], annotate: Callable[[dict], dict],
                 summary: Callable[[list[dict]], str]) -> None:
        super().__init__(work)
        self.env = {**self.env, "CRASHLAB_RUNTIME_NAME": name, **quiet}
        self.annotate, self.summary = annotate, summary
