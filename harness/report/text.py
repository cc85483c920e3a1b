"""``crashlab show``: a trace read as a text timeline, one event per line.

A port call and its result are printed as one line at the call (``→ ok`` / ``→ timeout
(indefinite) at 10:01:00.149``), like a message-sequence diagram read top to bottom; the
three timelines, faults, workers and world events each get their own line. Clock reads,
random draws and empty inbox polls are left out unless ``--all`` is given.
"""
from __future__ import annotations

import sys
from pathlib import Path

from ..vocab.errors import UsageError
from ..vocab.timefmt import format_time
from . import style
from .lanes import actor

#: Port calls that say nothing about the run: hidden unless --all.
QUIET_CALLS = frozenset({("clock", "now"), ("random", "draw")})


def _outcome(result: dict | None, origin: int, call_t: int) -> str:
    if result is None:
        return "→ (no result: the worker never got one)"
    if result.get("ok"):
        value = style._args(result.get("value"), 70)
        text = "→ ok" + (f" {value}" if value else "")
    else:
        err = result.get("error") or {}
        text = f"→ {err.get('code')} ({'definite' if err.get('definite') else 'indefinite'})"
    t = int(result.get("t") or 0)
    if t != call_t:
        text += f" at {format_time(t, origin)}"
    if result.get("delivered") is False:
        text += " [never delivered: the worker crashed]"
    return text


def lines(events: list[dict], *, lanes: set[str] | None = None, worker: str | None = None,
          around: int | None = None, context: int = 12, everything: bool = False) -> list[str]:
    """The timeline as text lines (without the header)."""
    if not events:
        return []
    origin = int(events[0].get("origin_ms") or 0)
    results = {ev.get("call"): ev for ev in events if ev.get("lane") == "port" and ev.get("kind") == "result"}
    # a call another event names (a fault on it, a pause at it, its remote effect) or --around names (itself or
    # its result, printed on its line) is printed even when quiet: show never cites an event it hides
    cited = {ev.get("call") for ev in events if ev.get("kind") != "result" and isinstance(ev.get("call"), int)}
    focus = around
    if around is not None:
        named = next((ev for ev in events if ev.get("seq") == around), None)
        if named is not None and named.get("lane") == "port" and named.get("kind") == "result":
            focus = named.get("call") if isinstance(named.get("call"), int) else around
        cited.add(focus)
    shown: list[tuple[int, str]] = []
    width = seq_width(events)
    for ev in events[1:]:
        lane, kind = ev.get("lane"), ev.get("kind")
        if lane == "meta" or (lane == "port" and kind == "result"):
            continue
        if lanes and lane not in lanes:
            continue
        target = ev.get("worker") or ev.get("run") or ""
        if worker and not (target == worker or target.endswith("/" + worker)):
            continue
        if lane == "port" and kind == "call":
            res = results.get(ev.get("seq"))
            if not everything and ev.get("seq") not in cited and ((ev.get("port"), ev.get("op")) in QUIET_CALLS or (
                    ev.get("port"), ev.get("op")) == ("inbox", "poll") and res is not None and res.get("ok")
                    and not (res.get("value") or {}).get("events")):
                continue
        who, body = who_and_body(ev, results, origin)
        text = (f"{ev.get('seq'):>{width}}  {format_time(int(ev.get('t') or 0), origin):<14} {lane:<9} "
                f"{style.shorten(who, 14):<14} {body}")
        shown.append((int(ev.get("seq") or 0), text))
    if around is not None:
        at = next((i for i, (seq, _) in enumerate(shown) if seq >= focus), len(shown) - 1)
        lo, hi = max(0, at - context), min(len(shown), at + context + 1)
        return [(">>" + text[2:]) if seq == focus else text for seq, text in shown[lo:hi]]
    return [text for _, text in shown]


def who_and_body(ev: dict, results: dict, origin: int) -> tuple[str, str]:
    """One event's actor and what it did, as `crashlab show` and the report's event table print
    them: a port call with its result on one line; crashlab's own action (a grant, a failpoint, a
    crash, a takeover) is crashlab's, done to its target (``worker-1: crash ...``)."""
    target = ev.get("worker") or ev.get("run") or ""
    who = actor(ev) or target
    if ev.get("lane") == "port" and ev.get("kind") == "call":
        return who, (f"{ev.get('port')}.{ev.get('op')}({style._args(ev.get('args'), 70)}) "
                     + _outcome(results.get(ev.get("seq")), origin, int(ev.get("t") or 0)))
    body = style.summarize(ev, origin).split(" ", 2)[2]
    if target and body.startswith(target + " "):
        body = body[len(target) + 1:]
    if who != target and target:
        body = f"{target}: {body}"
    return who, body


def seq_width(events: list[dict]) -> int:
    """The seq column's width: two spaces to spare before the longest number, where ``--around``
    puts its ``>>`` (never over a digit of the number it marks)."""
    return max(5, len(str(max((int(ev.get("seq") or 0) for ev in events), default=0))) + 2)


def header(events: list[dict]) -> list[str]:
    head = events[0]
    origin = int(head.get("origin_ms") or 0)
    runs = ", ".join(f"{r.get('id')} ({r.get('operation')} on {r.get('service')}"
                     + (f", deadline {format_time(int(r['deadline']), origin)}" if r.get("deadline") is not None
                        else "") + ")" for r in head.get("runs") or () if isinstance(r, dict))
    return [f"{head.get('scenario')} — {head.get('title')}",
            f"seed {head.get('seed')} · adapter {head.get('adapter')} · clock from {format_time(0, origin)}"
            + (f" · runs: {runs}" if runs else ""),
            f"{'seq':>{seq_width(events)}}  {'time':<14} {'lane':<9} {'who':<14} event"]


def dispositions(events: list[dict]) -> list[str]:
    end = events[-1] if events and events[-1].get("kind") == "end" else {}
    out = []
    for run, info in (end.get("runs") or {}).items():
        if isinstance(info, dict):
            out.append(f"{run}: {info.get('finished') or info.get('waiting') or 'no terminal disposition'}")
    return out


def load(path: str | Path) -> list[dict]:
    from ..world.trace import read_jsonl

    return read_jsonl(Path(path))


# --------------------------------------------------------------------------- command
def cmd_show(args, out=None) -> int:
    out = out or sys.stdout
    events = load(args.trace)
    if args.around is not None and not any(ev.get("seq") == args.around for ev in events):
        raise UsageError(f"{args.trace}: no event #{args.around} (the trace has #0 to #{len(events) - 1})")
    body = lines(events, lanes=set(args.lane or ()), worker=args.worker, around=args.around,
                 context=max(0, args.context), everything=args.all)
    for line in header(events) + body:
        print(line, file=out)
    if not body:
        print("(no event matches)", file=out)
    if args.around is None and not args.lane and not args.worker:
        for line in dispositions(events):
            print("end: " + line, file=out)
        from ..integrate import is_integration

        if is_integration(events[0]):    # a real worker's run: its one verdict is its card's, as check says
            from ..run.conformance import recheck_saved
            from ..checks.card import judged

            recheck_saved(events, args.trace)          # a trace edited out of shape: a usage error naming it
            print(f"integration verdict: {judged(events).verdict.upper()} (crashlab check {args.trace} prints "
                  "the card)", file=out)
    return 0
