"""The OpenAI Agents SDK on DBOS Transact under ``crashlab integrate --runtime openai-agents-dbos``.

The agent runs through ``dbos_openai_agents.DBOSRunner`` inside the worker's own ``@DBOS.workflow``:
every model call is the DBOS step ``_model_call_step``, and a function tool runs inline in the
workflow (in the model's order) unless the application makes it a DBOS step. crashlab prepares
DBOS's system database as for ``--runtime dbos`` and reads its record, adding the tool calls each
model step recorded and whether each tool ran as a step or inline (crashlab.runtimes.agents_dbos).
The unit of work is the DBOS workflow whose id, and executor id, is the run's ``CRASHLAB_RUNTIME_ID``.
Tracing is off in every worker (``OPENAI_AGENTS_DISABLE_TRACING=1``; the examples also call
``set_tracing_disabled(True)``).
"""
from __future__ import annotations

import agents  # noqa: F401  (the extra: load() names it when missing)
import dbos_openai_agents  # noqa: F401

from . import Runtime
from .agents_dbos import AgentOnDbos, Framework
from .dbos import VERSION as DBOS_VERSION

VERSION = "0.22.3"
RUNNER_VERSION = "0.3.0"
FRAMEWORK = Framework(
    runtime="openai-agents-dbos", label="OpenAI Agents SDK",
    is_model_step=lambda name: name == "_model_call_step" or name.endswith("._model_call_step"),
    name_key="name", id_key="call_id",
    quiet={"OPENAI_AGENTS_DISABLE_TRACING": "1", "OPENAI_AGENTS_TRACE_INCLUDE_SENSITIVE_DATA": "false"})

RUNTIME = Runtime(
    name="openai-agents-dbos",
    title=f"OpenAI Agents SDK (DBOSRunner: dbos-openai-agents {RUNNER_VERSION}) on DBOS Transact {DBOS_VERSION} "
          "(SQLite system database)",
    extra="openai-agents",
    tested_version=f"openai-agents {VERSION}",
    retry_owner_settings=(
        "function_tool(failure_error_function=default_tool_error_function): a raising tool becomes a message the "
        "model may answer by calling it again under a new call_id, up to Runner.run(max_turns=10)",
        "ModelSettings(retry=ModelRetrySettings(max_retries=None)): the runner's retry of a model call, off by default",
        "DBOSRunner: each model call is the step _model_call_step (@DBOS.step() defaults: retries_allowed=False); a "
        "function tool runs inline (no step, no retry of its own) unless it is a @DBOS.step",
        "workflow recovery on launch (executor_id): recorded steps are replayed, an inline tool runs again",
    ),
    start=lambda work: AgentOnDbos(work, FRAMEWORK),
)
