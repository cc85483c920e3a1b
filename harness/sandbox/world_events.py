"""The sandbox's inbox and world: deliveries and polls, the scenario's events on the clock or
anchored to requests, other actors' background traffic. A part of crashlab.sandbox.server's
Sandbox (a mixin: the same lock, trace and clock)."""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Callable

from ..vocab import events
from ..vocab.model import PortCall
from ..world import transport
from ..world.ports import PortError

if TYPE_CHECKING:
    from ..world.services import Service
    from .server import Caller

#: Scenario events the sandbox writes to the trace but cannot deliver to an inbox: a deployment is the
#: supervisor's (its ``deployed`` hook: crashlab.integrate.deploy), carried out only when it has the next
#: code version's command (approvals are the sandbox's authority port).
UNDELIVERED = ("deploy",)
#: Scenario events that act on the sandbox's authority port (crashlab.sandbox.authority).
AUTHORITY_EVENTS = ("approve", "revoke", "capability_change")


class WorldEvents:
    """The inbox and the world's events of a Sandbox."""

    # ------------------------------------------------------------------ inbox and world events
    def deliver(self, run: str, etype: str, payload: dict, *, producer: str, event_id: str | None = None,
                producer_seq: int | None = None) -> dict:
        with self.lock:
            if event_id is None:
                self._event_ids += 1
                event_id = f"ev-{self._event_ids}"
            box = self.inbox[run]
            event = {"seq": len(box) + 1, "event_id": event_id, "type": etype, "producer": producer,
                     "producer_seq": producer_seq, "payload": payload, "at": self.clock.now()}
            box.append(event)
            self.emit(events.Deliver, run=run, event=event)
            return event

    def poll(self, caller: Caller, after: int) -> dict:
        with self.lock:
            self.hooks.observe(caller)
            key = (caller.run, "inbox", "poll")
            nth = self.ordinals[key] = self.ordinals.get(key, 0) + 1
            seq = self.emit(events.Call, worker=caller.name, run=caller.run, port="inbox", op="poll",
                            args={"after_seq": after}, nth=nth)["seq"]
            value = {"events": [e for e in self.inbox[caller.run] if e["seq"] > after]}
            self.polled[caller.run] = len(self.inbox[caller.run])
            self.emit(events.Result, worker=caller.name, run=caller.run, call=seq, ok=True, value=value,
                      error=None, delivered=True)
            return value

    def _schedule_world(self) -> None:
        for spec in self.scenario.runs:
            intake = {"intent": dict(spec.intent), "service": spec.service, "operation": spec.operation,
                      "deadline": spec.deadline_ms, "notify": spec.notify}
            self.at(spec.start_ms, lambda s=spec, p=intake: self.deliver(
                s.id, "intake", p, producer="intake", event_id=f"intake-{s.id}", producer_seq=1))
        for index, ev in enumerate(self.scenario.events):
            if ev.anchor is None:
                self.at(ev.at_ms, lambda e=ev: self._world_event(e), run=ev.run)
        for svc in self.services.values():
            if svc.profile.get("background_ms"):
                thread = threading.Thread(target=self._background, args=(svc,), name=f"crashlab-bg-{svc.name}",
                                          daemon=True)
                self._threads.append(thread)
                thread.start()

    def _background(self, svc: Service) -> None:
        """Other actors' reservations on ``svc`` (transport.background: the simulator's requests, at
        the same scenario times), until the sandbox stops."""
        parts = transport.background_parts(self.scenario.runs, svc.name)
        at = 0
        for gap, args in transport.background(transport.named_stream(self.scenario.seed, f"background:{svc.name}"),
                                              svc.profile["background_ms"], parts):
            at += gap
            if self._stop.wait(self.clock.real_s(at - self.clock.now())):
                return
            with self.lock:
                if self.ended:
                    return
                try:
                    svc.execute("reserve", args, cause="other_actor", run=None, call=None)
                except PortError as exc:
                    self.emit(events.OtherActorRejected, code=exc.code)

    def at(self, t_ms: int, action: Callable[[], None], run: str | None = None) -> None:
        """Do ``action`` at scenario time ``t_ms`` (now, if that has passed); ``upcoming`` counts it for
        ``run`` until it is done (a waiting run is not over while something is on its way to it)."""
        if t_ms <= self.clock.now():
            action()
            return
        with self.lock:
            self.upcoming[run] = self.upcoming.get(run, 0) + 1

        def fire() -> None:
            try:
                if not self._stop.is_set():
                    action()
            finally:
                with self.lock:
                    self.upcoming[run] -= 1
        timer = threading.Timer(self.clock.real_s(t_ms - self.clock.now()), fire)
        timer.daemon = True
        self._timers.append(timer)
        timer.start()

    def anchored(self, when: str, caller: Caller, call: PortCall, nth: int, *, at_once: bool = False) -> None:
        """Deliver the scenario events anchored ``when`` (before / after) a call like this one, each its
        delay later; ``at_once``: now, whatever the delay (a store write the supervisor has just read:
        the worker is blocked on its next request or poll, which must see what was anchored to it)."""
        with self.lock:
            for index, ev in enumerate(self.scenario.events):
                if ev.anchor == when and index not in self.anchors_fired and \
                        self.rules.matches(ev.match, caller.run, caller.run, caller.number, call, nth):
                    self.anchors_fired.add(index)
                    self.at(self.clock.now() + (0 if at_once else ev.at_ms),
                            lambda e=ev, c=call: self._world_event(e, c), run=ev.run)

    def _world_event(self, ev, anchor_call: PortCall | None = None) -> None:
        data = dict(ev.data)
        if data.pop("same_key", False):
            data["args"] = {**data.get("args", {}), "key": anchor_call.args.get("key") if anchor_call else None}
        with self.lock:
            if self.ended:
                return
            self.trace.emit_scenario(ev.type, run=ev.run, data=data, line=ev.line)
            if ev.type == "other_actor":
                svc = self.services[data.get("service", "reservation")]
                try:
                    svc.execute(data.get("op", "reserve"), dict(data.get("args") or {}), cause="other_actor",
                                run=None, call=None)
                except PortError as exc:
                    self.emit(events.OtherActorRejected, code=exc.code)
                return
            if ev.run is not None and ev.type in AUTHORITY_EVENTS:
                self.authority.scenario_event(ev.type, ev.run, data)
                return
            if ev.type == "deploy":
                self.hooks.deployed(dict(data))    # the supervisor's to carry out (docs/integration.md)
                return
            if ev.run is None or ev.type in UNDELIVERED:
                return
        etype = data.pop("kind", "event") if ev.type == "event" else ev.type
        copies = 1 + int(data.pop("duplicates", 0))
        gap = int(data.pop("duplicate_after_ms", 0))
        event_id = data.pop("event_id", None)
        producer_seq = data.pop("producer_seq", None)
        producer = data.pop("producer", "user")
        if event_id is None:
            with self.lock:
                self._event_ids += 1
                event_id = f"ev-{self._event_ids}"
        for copy in range(copies):
            deliver = (lambda: self.deliver(ev.run, etype, dict(data), producer=producer, event_id=event_id,
                                            producer_seq=producer_seq))
            if copy and gap:
                self.at(self.clock.now() + gap * copy, deliver, run=ev.run)
            else:
                deliver()
