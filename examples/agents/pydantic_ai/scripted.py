"""A scripted model for the Pydantic AI examples: no provider, no network, no weights.

``script`` is a ``FunctionModel`` function: it reads the conversation and answers as a tool-calling
model would, by script:

1. no answer from ``reserve`` yet: call ``reserve`` with the intent the user's request carries;
2. ``reserve``'s last answer asks for a retry (the tool raised ``ModelRetry``: a ``ToolReturnPart``
   whose ``outcome`` is ``"retried"``): call ``reserve`` again, up to ``MAX_RESERVE_CALLS`` calls in all;
3. the hold is confirmed and the request asks for a notification: call ``notify``;
4. otherwise: a final answer, no tool call.

Every tool call gets a fresh ``tool_call_id`` each time the model runs, as a real model's would.
Pydantic AI's ``TestModel`` calls every tool once with made-up arguments and cannot read the
request's intent, hence this function.
"""
from __future__ import annotations

import json
import uuid

from pydantic_ai.messages import (ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart,
                                  UserPromptPart)
from pydantic_ai.models.function import AgentInfo, FunctionModel

MAX_RESERVE_CALLS = 3


def call(name: str, args: dict) -> ModelResponse:
    return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"call_{uuid.uuid4().hex[:12]}")])


def script(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    parts = [p for m in messages if isinstance(m, ModelRequest) for p in m.parts]
    ask = json.loads(next(str(p.content) for p in parts if isinstance(p, UserPromptPart)))
    answers = {name: [p for p in parts if isinstance(p, ToolReturnPart) and p.tool_name == name]
               for name in ("reserve", "notify")}
    reserves = answers["reserve"]
    if not reserves or (reserves[-1].outcome == "retried" and len(reserves) < MAX_RESERVE_CALLS):
        return call("reserve", {"intent": ask["intent"]})
    confirmed = reserves[-1].outcome != "retried" and str(reserves[-1].content).startswith("CONFIRMED")
    if confirmed and ask.get("notify") and not answers["notify"]:
        part = ask["intent"].get("part")
        return call("notify", {"message": f"part {part} reserved for {ask['intent'].get('incident')}"})
    return ModelResponse(parts=[TextPart(f"done: {reserves[-1].content}")])


def model() -> FunctionModel:
    return FunctionModel(script, model_name="crashlab-scripted")
