# layer real: real processes, sockets and stores.
# may import: vocab, world, scenario, rules, checks, run, reference_impl, gallery, integrate, runtimes, probe (only floors below it).
"""A scenario's synthetic services as real HTTP endpoints on 127.0.0.1 (docs/integration.md).

``Sandbox(scenario, time_scale=..., hooks=...)`` serves them with crashlab's own service
semantics (crashlab.world.services) and rule matching (crashlab.world.faults); ``crashlab sandbox serve``
is its command-line face and crashlab.integrate its supervisor.
"""
from .httpmap import FAULTS, ROUTES, STATUS, Route
from .server import Answer, Caller, Clock, Hooks, Sandbox

__all__ = ["FAULTS", "ROUTES", "STATUS", "Answer", "Caller", "Clock", "Hooks", "Route", "Sandbox"]
