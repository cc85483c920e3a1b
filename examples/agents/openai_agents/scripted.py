"""A scripted model for the OpenAI Agents SDK examples: no provider, no network, no API key.

``ScriptedModel`` is an Agents SDK ``Model`` that reads the conversation (Responses-format input
items) and answers as a tool-calling model would, by script:

1. no answer from ``reserve`` yet: call ``reserve`` with the intent the user's request carries;
2. ``reserve``'s last answer is the SDK's error message (the tool raised, and the default
   ``failure_error_function`` turned the exception into an output): call ``reserve`` again, up to
   ``MAX_RESERVE_CALLS`` calls in all;
3. the hold is confirmed and the request asks for a notification: call ``notify``;
4. otherwise: a final answer, no tool call.

Every tool call gets a fresh ``call_id`` each time the model runs, as a real model's would. The
model is handed to the ``Agent`` as an instance, so the SDK never builds an OpenAI client.
"""
from __future__ import annotations

import json
import uuid

from agents import ModelResponse, Usage
from agents.models.interface import Model
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText

MAX_RESERVE_CALLS = 3
#: how the SDK's default failure_error_function words a tool's exception
ERROR = "An error occurred while running the tool"


def _field(item, name: str):
    return item.get(name) if isinstance(item, dict) else getattr(item, name, None)


def call(name: str, args: dict) -> ResponseFunctionToolCall:
    return ResponseFunctionToolCall(type="function_call", name=name, arguments=json.dumps(args, sort_keys=True),
                                    call_id=f"call_{uuid.uuid4().hex[:12]}", id=f"fc_{uuid.uuid4().hex[:12]}",
                                    status="completed")


def decide(items: list) -> object:
    """The script: the next output item for this conversation."""
    ask = json.loads(next(str(_field(i, "content")) for i in items if _field(i, "role") == "user"))
    names = {_field(i, "call_id"): _field(i, "name") for i in items if _field(i, "type") == "function_call"}
    answers: dict[str, list[str]] = {"reserve": [], "notify": []}
    for i in items:
        if _field(i, "type") == "function_call_output" and names.get(_field(i, "call_id")) in answers:
            answers[names[_field(i, "call_id")]].append(str(_field(i, "output")))
    reserves = answers["reserve"]
    if not reserves or (reserves[-1].startswith(ERROR) and len(reserves) < MAX_RESERVE_CALLS):
        return call("reserve", {"intent": ask["intent"]})
    if reserves[-1].startswith("CONFIRMED") and ask.get("notify") and not answers["notify"]:
        part = ask["intent"].get("part")
        return call("notify", {"message": f"part {part} reserved for {ask['intent'].get('incident')}"})
    return ResponseOutputMessage(id=f"msg_{uuid.uuid4().hex[:12]}", type="message", role="assistant",
                                 status="completed",
                                 content=[ResponseOutputText(type="output_text", text=f"done: {reserves[-1]}",
                                                             annotations=[])])


class ScriptedModel(Model):
    """A tool-calling model played by a script (see the module's docstring)."""

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema, handoffs,
                           tracing, *, previous_response_id=None, conversation_id=None, prompt=None):
        items = input if isinstance(input, list) else [{"role": "user", "content": input}]
        return ModelResponse(output=[decide(items)], usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("the scripted model does not stream")
