"""The ports an in-process adapter sees.

An adapter is any object with ``async def run(self, ports: Ports) -> None``. Every
method below returns a :class:`~crashlab.vocab.model.PortCall`; awaiting it hands the call to
the harness, which runs it on the simulated world (one step, one place where a fault or
a crash can be injected) and resumes the coroutine with the result, or raises
:class:`PortError`. No asyncio loop is involved: the harness drives the coroutine itself,
so an adapter must await nothing but ports.

The same calls travel over the wire for subprocess adapters (docs/protocol.md): the
method name is ``op``, the attribute is ``port``, the keyword arguments are ``args``.
All arguments and results are plain JSON values. ``ARGUMENTS`` is the shape of every call's
arguments (docs/protocol.md "Arguments"): the one table crashlab checks every call against, in-process
and over the wire (crashlab.world.boundary.refuse_malformed), before the world sees it.
"""
from __future__ import annotations

from typing import Any, Mapping, Protocol

from ..vocab.model import ERROR_CODES, FieldSpec, PortCall


class PortError(Exception):
    """A port answered with an error. ``definite`` is True when it certainly did not happen."""

    def __init__(self, code: str, message: str = "", *, definite: bool | None = None,
                 details: dict | None = None) -> None:
        known = ERROR_CODES.get(code)
        self.code = code
        self.definite = known.definite if definite is None and known else bool(definite)
        self.message = message or (known.meaning if known else code)
        self.details = dict(details or {})
        super().__init__(f"{code}: {self.message}")

    def to_json(self) -> dict:
        return {"code": self.code, "definite": self.definite, "message": self.message,
                **({"details": self.details} if self.details else {})}


# --------------------------------------------------------------------------- argument shapes
#: Any JSON value: the receiving store checks it further (a checkpoint or an effect entry
#: against its schema, answered ``invalid`` and recorded as an adapter fault).
ANY = object
_NULL = type(None)
_SCALAR = (str, int, float)      # an identifier compared with an intent's field


def _arg(path: str, types, required: bool = True) -> FieldSpec:
    return FieldSpec(path, types if isinstance(types, tuple) else (types,), required)


_SEND = (_arg("key", (str, _NULL), False), _arg("retry_owner", str, False), _arg("fence", int, False))

#: The arguments of every port operation: field -> JSON type(s), required or not. A dotted
#: path is a field inside an object argument (checked when present). A call whose arguments
#: miss a required field, carry another field, or hold a value of another type is answered
#: ``bad_request`` naming the port, the operation and the field; the world never sees it.
#: Value rules (a positive ``ttl_ms``, ``low <= high``, a known disposition) and the schemas of
#: checkpoints and effect entries stay with the port that owns them.
ARGUMENTS: Mapping[tuple[str, str], tuple[FieldSpec, ...]] = {
    ("clock", "now"): (),
    ("clock", "sleep"): (_arg("ms", int), _arg("reason", str)),
    ("random", "draw"): (_arg("low", int), _arg("high", int), _arg("reason", str)),
    ("lease", "acquire"): (_arg("ttl_ms", int),),
    ("lease", "renew"): (_arg("epoch", int), _arg("ttl_ms", int)),
    ("lease", "read"): (),
    ("checkpoints", "load"): (),
    ("checkpoints", "write"): (_arg("checkpoint", ANY), _arg("expected_version", int),
                               _arg("lease_epoch", int)),
    ("checkpoints", "history"): (),
    ("ledger", "append"): (_arg("entry", ANY),),
    ("ledger", "read"): (_arg("semantic_key", str),),
    ("ledger", "by_run"): (),
    ("inbox", "poll"): (_arg("after_seq", int, False),),
    ("authority", "request"): (_arg("proposal_hash", str), _arg("action", str),
                               _arg("summary", (dict, _NULL), False)),
    ("authority", "check"): (_arg("proposal_hash", str), _arg("action", str)),
    ("operator", "escalate"): (_arg("packet", dict),),
    ("run", "info"): (),
    ("run", "finish"): (_arg("disposition", str), _arg("effects", (list, _NULL), False),
                        _arg("next_owner", (str, _NULL), False), _arg("reason", (str, _NULL), False),
                        _arg("packet", (dict, _NULL), False), _arg("packet.pinned_env", dict, False),
                        _arg("wake_at", (int, _NULL), False)),
    ("reservation", "describe"): (),
    ("reservation", "reserve"): (_arg("intent", dict),) + _SEND,
    ("reservation", "lookup"): (_arg("key", str),),
    ("reservation", "search"): (_arg("incident", _SCALAR), _arg("slot", _SCALAR)),
    ("reservation", "aggregate"): (_arg("part", _SCALAR),),
    ("reservation", "release"): (_arg("ref", str), _arg("intent", dict, False)) + _SEND,
    ("notification", "describe"): (),
    ("notification", "send"): (_arg("intent", dict),) + _SEND,
    ("registry", "describe"): (),
    ("registry", "publish"): (_arg("intent", dict),) + _SEND,
    ("registry", "get_version"): (_arg("package", _SCALAR), _arg("version", _SCALAR)),
    ("registry", "wait_job"): (_arg("job_id", str), _arg("wait_ms", (int, _NULL), False)),
}

_TYPE_NAMES = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object", list: "array",
               _NULL: "null", ANY: "any JSON value"}


def type_names(types: tuple) -> str:
    """``string or null``: the JSON names of a field's accepted types."""
    return " or ".join(_TYPE_NAMES[t] for t in types)


def arguments_markdown() -> str:
    """docs/protocol.md "Arguments": ARGUMENTS as a table."""
    rows = ["| port | op | field | type | required |", "|---|---|---|---|---|"]
    for (port, op), fields in ARGUMENTS.items():
        if not fields:
            rows.append(f"| `{port}` | `{op}` | (none) | | |")
        for spec in fields:
            rows.append(f"| `{port}` | `{op}` | `{spec.path}` | {type_names(spec.types)} | "
                        f"{'yes' if spec.required else 'no'} |")
    return "\n".join(rows) + "\n"


class _Port:
    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def _call(self, op: str, **args: Any) -> PortCall:
        return PortCall(port=self._name, op=op, args=args)


class ClockPort(_Port):
    def now(self) -> PortCall:
        """-> ``{"now": ms}``: simulated milliseconds since the scenario origin."""
        return self._call("now")

    def sleep(self, ms: int, reason: str) -> PortCall:
        """Sleep on the simulated clock. ``reason`` is recorded; backoffs start with "backoff"."""
        return self._call("sleep", ms=ms, reason=reason)


class RandomPort(_Port):
    def draw(self, low: int, high: int, reason: str) -> PortCall:
        """-> ``{"value": n}`` with low <= n <= high, from the run's seeded stream; recorded."""
        return self._call("draw", low=low, high=high, reason=reason)


class LeasePort(_Port):
    def acquire(self, ttl_ms: int) -> PortCall:
        """-> ``{"epoch", "owner", "expires_at"}``; error ``lease_held`` while another owner's lease lives.
        Every acquisition issues a new, higher epoch."""
        return self._call("acquire", ttl_ms=ttl_ms)

    def renew(self, epoch: int, ttl_ms: int) -> PortCall:
        """-> ``{"epoch", "expires_at"}``; error ``stale_epoch`` if epoch is no longer current or expired."""
        return self._call("renew", epoch=epoch, ttl_ms=ttl_ms)

    def read(self) -> PortCall:
        """-> ``{"epoch", "owner", "expires_at"}`` or ``{"epoch": 0}`` when never acquired."""
        return self._call("read")


class CheckpointPort(_Port):
    def load(self) -> PortCall:
        """-> ``{"version": n, "checkpoint": {...}}`` for the latest, or ``{"version": 0, "checkpoint": None}``."""
        return self._call("load")

    def write(self, checkpoint: dict, expected_version: int, lease_epoch: int) -> PortCall:
        """Compare-and-set: succeeds only if ``expected_version`` is the latest and
        ``lease_epoch`` is the current, unexpired epoch. -> ``{"version": expected_version + 1}``.
        Errors: ``version_conflict``, ``stale_epoch``, ``invalid`` (schema), ``unavailable``."""
        return self._call("write", checkpoint=checkpoint, expected_version=expected_version,
                          lease_epoch=lease_epoch)

    def history(self) -> PortCall:
        """-> ``{"versions": [{"version", "checkpoint"}, ...]}``: every version is kept."""
        return self._call("history")


class LedgerPort(_Port):
    def append(self, entry: dict) -> PortCall:
        """Append one effect-ledger entry (schema: crashlab.vocab.model.EFFECT_ENTRY_FIELDS).
        -> ``{"index": n}``. The ledger is append-only; the latest entry per key is its state."""
        return self._call("append", entry=entry)

    def read(self, semantic_key: str) -> PortCall:
        """-> ``{"entries": [...]}``: the history of one semantic key, oldest first."""
        return self._call("read", semantic_key=semantic_key)

    def by_run(self) -> PortCall:
        """-> ``{"entries": [...]}``: every entry of this run, oldest first."""
        return self._call("by_run")


class InboxPort(_Port):
    def poll(self, after_seq: int = 0) -> PortCall:
        """-> ``{"events": [{"seq", "event_id", "type", "producer", "producer_seq", "payload", "at"}]}``
        delivered so far with seq > after_seq. Events may be duplicated, reordered or late."""
        return self._call("poll", after_seq=after_seq)


class AuthorityPort(_Port):
    def request(self, proposal_hash: str, action: str, summary: dict | None = None) -> PortCall:
        """Ask for approval of ``action`` bound to ``proposal_hash``. -> ``{"request_id"}``.
        The answer arrives later as an inbox event of type ``approval``."""
        return self._call("request", proposal_hash=proposal_hash, action=action, summary=summary or {})

    def check(self, proposal_hash: str, action: str) -> PortCall:
        """-> ``{"live": bool, "approval_id", "expires_at", "revoked", "capability_version", "reason"}``."""
        return self._call("check", proposal_hash=proposal_hash, action=action)


class OperatorPort(_Port):
    def escalate(self, packet: dict) -> PortCall:
        """Hand the decision packet to an operator. -> ``{"ticket"}``; answers arrive as inbox
        events of type ``operator_answer``."""
        return self._call("escalate", packet=packet)


class RunPort(_Port):
    def info(self) -> PortCall:
        """-> ``{"run_id", "worker", "env": {"code_version", "schema_version",
        "canonicalization_version", ...}, "services": [...], "intent_hint"}``."""
        return self._call("info")

    def finish(self, disposition: str, *, effects: list | None = None, next_owner: str | None = None,
               reason: str = "", packet: dict | None = None, wake_at: int | None = None) -> PortCall:
        """End this worker with a terminal disposition or a durable waiting state
        (WAITING_HUMAN, WAITING_OPERATOR, WAITING_RETRY, PINNED). ``effects`` lists
        ``{"semantic_key", "knowledge"}``; ``next_owner`` is required while anything is
        unresolved. In a waiting state the platform starts a fresh worker when the inbox
        receives an event, or at ``wake_at`` (e.g. the business deadline). A PINNED finish
        names the old versions in ``packet["pinned_env"]``; the next worker runs with them.
        -> ``{"accepted": bool}`` (False for a stale worker or an already terminal run)."""
        return self._call("finish", disposition=disposition, effects=effects or [],
                          next_owner=next_owner, reason=reason, packet=packet, wake_at=wake_at)


class ServicePort(_Port):
    """A synthetic remote service. ``call("reserve", key=..., intent=..., ...)``; ``describe()``
    returns its capability profile (idempotency, retention, lookup, consistency, ...)."""

    def call(self, op: str, **args: Any) -> PortCall:
        return self._call(op, **args)

    def describe(self) -> PortCall:
        return self._call("describe")


class Ports:
    """Everything an in-process adapter may touch."""

    __slots__ = ("clock", "random", "lease", "checkpoints", "ledger", "inbox", "authority",
                 "operator", "run", "_services")

    def __init__(self, services: list[str]) -> None:
        self.clock = ClockPort("clock")
        self.random = RandomPort("random")
        self.lease = LeasePort("lease")
        self.checkpoints = CheckpointPort("checkpoints")
        self.ledger = LedgerPort("ledger")
        self.inbox = InboxPort("inbox")
        self.authority = AuthorityPort("authority")
        self.operator = OperatorPort("operator")
        self.run = RunPort("run")
        self._services = {name: ServicePort(name) for name in services}

    def service(self, name: str) -> ServicePort:
        try:
            return self._services[name]
        except KeyError:
            raise PortError("not_found", f"no service {name!r} in this scenario "
                            f"(have: {', '.join(sorted(self._services)) or 'none'})") from None

    @property
    def services(self) -> list[str]:
        return sorted(self._services)


class Adapter(Protocol):
    """What ``--adapter module:attribute`` must name (a class or a factory returning this)."""

    async def run(self, ports: Ports) -> None: ...
