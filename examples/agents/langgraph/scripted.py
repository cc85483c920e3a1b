"""A scripted chat model for the LangGraph examples: no provider, no network, no weights.

``ScriptedModel`` is a LangChain ``BaseChatModel`` that reads the conversation and answers as a
tool-calling model would, by script:

1. no answer from ``reserve`` yet: call ``reserve`` with the intent the user's request carries;
2. ``reserve`` answered with an error (``ToolNode(handle_tool_errors=True)`` turned an exception into
   a message): call ``reserve`` again, up to ``MAX_RESERVE_CALLS`` calls in all;
3. the hold is confirmed and the request asks for a notification: call ``notify``;
4. otherwise: a final answer, no tool call.

Every tool call gets a fresh ``tool_call_id`` each time the model runs (as a real model's would):
a model step that LangGraph runs again after a lost checkpoint asks for the same tool under a new
id. langchain_core's ``GenericFakeChatModel`` and ``FakeMessagesListChatModel`` replay a fixed list
of messages, and cannot read the request's intent nor mint a new id per run, hence this class.
"""
from __future__ import annotations

import json
import uuid
from typing import Any

from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

MAX_RESERVE_CALLS = 3


def request(intent: dict, notify: bool) -> HumanMessage:
    """The user's request, as the examples put it to the model: the intake's intent, in JSON."""
    return HumanMessage(content=json.dumps({"ask": "reserve this part", "intent": intent, "notify": notify},
                                           sort_keys=True))


def call(name: str, args: dict) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call_{uuid.uuid4().hex[:12]}",
                                              "type": "tool_call"}])


class ScriptedModel(BaseChatModel):
    """A tool-calling chat model played by a script (see the module's docstring)."""

    @property
    def _llm_type(self) -> str:
        return "crashlab-scripted"

    def bind_tools(self, tools: Any, **kwargs: Any) -> "ScriptedModel":
        return self                       # the script knows its two tools by name

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self.decide(messages))])

    @staticmethod
    def decide(messages: list[BaseMessage]) -> AIMessage:
        ask = json.loads(next(m.content for m in messages if isinstance(m, HumanMessage)))
        answers = {name: [m for m in messages if isinstance(m, ToolMessage) and m.name == name]
                   for name in ("reserve", "notify")}
        reserves = answers["reserve"]
        if not reserves or (reserves[-1].status == "error" and len(reserves) < MAX_RESERVE_CALLS):
            return call("reserve", {"intent": ask["intent"]})
        confirmed = str(reserves[-1].content).startswith("CONFIRMED")
        if confirmed and ask.get("notify") and not answers["notify"]:
            part = ask["intent"].get("part")
            return call("notify", {"message": f"part {part} reserved for {ask['intent'].get('incident')}"})
        return AIMessage(content=f"done: {reserves[-1].content}")
