"""An agent framework on DBOS Transact: what the Pydantic AI and OpenAI Agents SDK profiles share.

Both frameworks run an agent inside a ``@DBOS.workflow`` and make each model request a DBOS step;
a function tool runs inline in the workflow unless the application makes it a DBOS step itself.
crashlab prepares DBOS's system database as for ``--runtime dbos`` (crashlab.runtimes.dbos) and
reads the same record, then adds what the framework put in it: every tool call the model asked for,
read from the recorded output of each model-request step (its name and its tool-call id), and
whether each tool ran as a recorded unit (a step row under the tool's name) or inline (no row: a
recovered workflow runs it again, whatever it sent the first time).

A step's output is a pickle written by the worker. crashlab never unpickles it (that would run the
worker's code in crashlab's process): it walks the pickle's opcodes with ``pickletools`` and picks
out the string values of two field names, the tool's name and its call id.
"""
from __future__ import annotations

import base64
import binascii
import pickletools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from .dbos import DbosState

_STRINGS = {"SHORT_BINUNICODE", "BINUNICODE", "BINUNICODE8", "UNICODE", "STRING", "BINSTRING", "SHORT_BINSTRING"}
_GETS = {"GET", "BINGET", "LONG_BINGET"}
_PUTS = {"PUT", "BINPUT", "LONG_BINPUT"}
_MARK = object()


@dataclass(frozen=True, slots=True)
class Framework:
    """How one framework shows up in DBOS's record."""
    runtime: str                          # "pydantic-ai-dbos"
    label: str                            # "Pydantic AI"
    is_model_step: Callable[[str], bool]  # a step name -> whether it is a model request
    name_key: str                         # the tool call's field holding the tool's name
    id_key: str                           # ... and its call id
    quiet: Mapping[str, str]              # environment turning the framework's telemetry off


def tool_calls(output: str | None, name_key: str, id_key: str) -> list[dict]:
    """The ``{"tool", "call_id"}`` pairs in one recorded step output (DBOS's base64 pickle), in order:
    each dict the pickle builds that holds both fields as strings. The opcodes are followed on a stack
    of placeholders (strings kept, nothing built, nothing imported); [] for an output that is not one."""
    try:
        ops = list(pickletools.genops(base64.b64decode(output or "", validate=True)))
    except (binascii.Error, ValueError, TypeError):     # not base64, or a truncated or foreign pickle
        return []
    memo: dict[int, object] = {}
    stack: list = []
    calls: list[dict] = []
    try:
        for op, arg, _ in ops:
            if op.name == "MEMOIZE":
                memo[len(memo)] = stack[-1]
                continue
            if op.name in _PUTS:
                memo[int(arg)] = stack[-1]
                continue
            before = op.stack_before
            if pickletools.markobject in before:
                at = len(stack) - 1 - stack[::-1].index(_MARK)
                items = stack[at + 1:]
                del stack[at - before.index(pickletools.markobject):]
            else:
                items = stack[len(stack) - len(before):] if before else []
                del stack[len(stack) - len(items):]
            if op.name in ("SETITEMS", "DICT", "SETITEM"):
                pairs = items[1:] if op.name == "SETITEM" else items
                fields = {k: v for k, v in zip(pairs[::2], pairs[1::2])
                          if k in (name_key, id_key) and isinstance(v, str)}
                if len(fields) == 2:
                    calls.append({"tool": fields[name_key], "call_id": fields[id_key]})
            for _ in op.stack_after:
                stack.append(_MARK if op.name == "MARK" else arg if op.name in _STRINGS
                             else memo.get(int(arg)) if op.name in _GETS else None)
    except (ValueError, IndexError):                    # a pickle that does not balance: what was read
        return calls
    return calls


def ran_as_step(tool: str, step_names: list[str]) -> int:
    """How many step rows carry the tool's name (``reserve``, ``module.reserve``, ``agent__reserve``)."""
    return sum(1 for s in step_names if s == tool or s.endswith(f".{tool}") or s.endswith(f"__{tool}"))


class AgentOnDbos(DbosState):
    """DBOS's system database for one ``crashlab integrate``, read for one agent framework."""

    def __init__(self, work: Path, framework: Framework) -> None:
        super().__init__(work)
        self.framework = framework
        self.env = {**self.env, "CRASHLAB_RUNTIME_NAME": framework.runtime, **framework.quiet}

    def record(self, run: str) -> list[dict]:
        """DBOS's rows (crashlab.runtimes.dbos), then one row per tool call a model step's output holds."""
        rows = super().record(run)
        fw = self.framework
        outputs = self._rows("SELECT function_id, function_name, output FROM operation_outputs "
                             "WHERE workflow_uuid = ? AND output IS NOT NULL ORDER BY function_id", (run,))
        for step in outputs:
            if fw.is_model_step(str(step["function_name"])):
                rows += [{"table": "tool_calls", "function_id": step["function_id"], **call}
                         for call in tool_calls(step["output"], fw.name_key, fw.id_key)]
        return rows

    def summary(self, record: list[dict]) -> str:
        return summary(record, self.framework)


def summary(record: list[dict], fw: Framework) -> str:
    """One line for the card: the workflow, the model steps recorded, each tool the model asked for
    (with its call ids) and whether it ran as a DBOS step or inline, and what the record lacks."""
    if record and "error" in record[0]:
        return f"DBOS record not read: {record[0]['error']}"
    wf = next((r for r in record if r.get("table") == "workflow_status"), None)
    if wf is None:
        return f"DBOS has no workflow under this id (the worker never started the {fw.label} agent)"
    steps = [str(r["function_name"]) for r in record if r.get("table") == "operation_outputs"]
    models = sum(1 for s in steps if fw.is_model_step(s))
    asked: dict[str, list[str]] = {}
    for row in record:
        if row.get("table") == "tool_calls":
            ids = asked.setdefault(str(row["tool"]), [])
            if row["call_id"] not in ids:
                ids.append(str(row["call_id"]))
    ended = wf.get("status") in ("SUCCESS", "ERROR")
    parts = []
    for tool, ids in asked.items():
        rows = ran_as_step(tool, steps)
        how = f"ran as a DBOS step ({rows} row(s))" if rows else \
            "ran inline (no DBOS step: recovery runs it again)" if ended else \
            "has no step row yet (inline, or a step cut by a kill: the workflow has not ended)"
        parts.append(f"the model called {tool} {len(ids)} time(s) ({', '.join(ids)}), {how}")
    starts = int(wf.get("recovery_attempts") or 0)
    return (f"{fw.label} on DBOS: workflow {wf['status']}, started {starts} time(s); {models} model step(s) "
            f"recorded; {'; '.join(parts) or 'no tool call recorded'}; a step cut by a kill has no row")
