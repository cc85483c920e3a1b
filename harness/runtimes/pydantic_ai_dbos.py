"""Pydantic AI on DBOS Transact under ``crashlab integrate --runtime pydantic-ai-dbos``.

The agent carries Pydantic AI's ``DBOSDurability`` capability and runs inside the worker's own
``@DBOS.workflow``: every model request is a DBOS step (``{agent}__model.request``), and a function
tool runs inline in the workflow unless the application makes it a DBOS step. crashlab prepares
DBOS's system database as for ``--runtime dbos`` and reads its record, adding the tool calls each
model step recorded and whether each tool ran as a step or inline (crashlab.runtimes.agents_dbos).
The unit of work is the DBOS workflow whose id, and executor id, is the run's ``CRASHLAB_RUNTIME_ID``.
"""
from __future__ import annotations

import pydantic_ai  # noqa: F401  (the extra: load() names it when missing)

from . import Runtime
from .agents_dbos import AgentOnDbos, Framework
from .dbos import VERSION as DBOS_VERSION

VERSION = "2.68.0"
FRAMEWORK = Framework(
    runtime="pydantic-ai-dbos", label="Pydantic AI",
    is_model_step=lambda name: name.endswith("__model.request"),
    name_key="tool_name", id_key="tool_call_id",
    # no Logfire, no OpenTelemetry export: nothing leaves 127.0.0.1
    quiet={"LOGFIRE_SEND_TO_LOGFIRE": "false", "OTEL_SDK_DISABLED": "true"})

RUNTIME = Runtime(
    name="pydantic-ai-dbos",
    title=f"Pydantic AI (DBOSDurability) on DBOS Transact {DBOS_VERSION} (SQLite system database)",
    extra="pydantic-ai",
    tested_version=f"pydantic-ai-slim {VERSION}",
    retry_owner_settings=(
        "Agent(retries=1): a tool's ModelRetry (or arguments that fail validation) goes back to the model, which "
        "may call the tool again under a new tool_call_id, once per tool by default",
        "DBOSDurability(model_step_config=StepConfig(retries_allowed=False, max_attempts=3, interval_seconds=1.0, "
        "backoff_rate=2.0)): DBOS's retry of a model request step, off by default",
        "a function tool runs inline in the workflow (no step, no retry of its own) unless it is a "
        "@DBOS.step(retries_allowed=False default, max_attempts=3)",
        "workflow recovery on launch (executor_id): recorded steps are replayed, an inline tool runs again",
    ),
    start=lambda work: AgentOnDbos(work, FRAMEWORK),
)
