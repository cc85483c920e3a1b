"""``crashlab probe URL --map MAP.yaml --out PROFILE.yaml``: registered by crashlab.cli.args in one
line; prints the plan (the default) or, with ``--execute``, carries it out and writes the profile."""
from __future__ import annotations

import argparse
import sys

DEFAULT_BUDGET = 20
DEFAULT_WAIT = "1s"
EXIT_CODES = """exit codes:
  0  pass            the plan ran and left nothing behind, or a dry run (nothing sent)
  1  residue         effects remain, or a request may have made one the probe cannot name (both printed),
                     or the endpoint refused a connection midway (the profile holds what came before)
  3  usage error     a bad mapping file, URL or option, a host that is not allowed, or nothing listening
                     at the URL (its first connection refused); nothing was probed. Also an answer that is
                     not the service's own (a redirect, a 404 or 405 for a path it does not serve, a body
                     that is not JSON, a success without the fields the mapping file names, the first
                     request refused, an authentication failure (401, 403), 410, the intent it accepted
                     refused later), or answers that show the endpoint ignores the request (a new key
                     under another intent answered with the first key's reference, a key never sent
                     reported found): the probe stops there, releases what it made, prints the residue
                     and writes no profile
  4  out of room     the disk filled up or file descriptors ran out: what was not written is named
  6  internal error  a bug in crashlab: please report it with the command you ran
  130, 143           interrupted by SIGINT (Ctrl-C) or SIGTERM"""


def add_parser(cmd) -> None:
    p = cmd("probe", "learn what a test endpoint really does with an idempotency key; write a services profile",
            "Send a bounded plan of requests to a test endpoint, described by a mapping file (which path and "
            "method is the effect, the read by key, the search and the release; where the key goes; where an "
            "answer names its reference): the same key and intent twice, the same key with another payload, a "
            "read by key, an unknown key, two concurrent sends under one new key, an error answer and the key "
            "again, and the first key after a wait. Each answer is interpreted in AR-08's terms and the result is "
            "written as a scenario's services section with an evidence line per field (observed, or untested "
            "for the service owner to declare); `crashlab run SCENARIO --services PROFILE.yaml` runs the "
            "simulator on it.\n\nSafe by construction: without --execute it only prints the plan; it reaches "
            "loopback only, unless --allow-host names the host and the mapping file declares 'endpoint: test' "
            "(or sandbox); it never sends more than --budget requests; its keys are random crashlab-probe-... "
            "strings and its intent carries the probe's id; every effect it made is released where the mapping "
            "file maps a release, and whatever remains is printed. docs/probe.md explains the mapping file, the "
            "plan and what each answer means.")
    p.epilog = EXIT_CODES
    p.add_argument("url", metavar="URL", help="the endpoint's base URL; the mapping file's paths are appended "
                                             "(the sandbox: the worker base URL `crashlab sandbox serve` "
                                             "prints, http://127.0.0.1:PORT/w/RUN.w1)")
    p.add_argument("--map", required=True, metavar="MAP.yaml", help="the mapping file (docs/probe.md; "
                                                                     "examples/probe/sandbox-map.yaml)")
    p.add_argument("--out", metavar="PROFILE.yaml", help="write the services profile here (with --execute)")
    p.add_argument("--execute", action="store_true", help="send the requests (without it: print the plan, send "
                                                         "nothing)")
    p.add_argument("--dry-run", action="store_true", help="print the plan and send nothing (the default)")
    p.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                   help="also reach this non-loopback host (repeatable); the mapping file must declare "
                        "'endpoint: test' or 'endpoint: sandbox'")
    p.add_argument("--budget", type=int, default=DEFAULT_BUDGET, metavar="N",
                   help=f"send at most N requests, releases included (default {DEFAULT_BUDGET}); a plan that "
                        "could need more is refused before anything is sent")
    p.add_argument("--wait", default=DEFAULT_WAIT, metavar="DURATION",
                   help=f"how long to wait before sending the first key again (default {DEFAULT_WAIT}, at most 60s): "
                        "a key still replayed after it is retained at least this long")
    p.add_argument("--timeout", type=float, default=5.0, metavar="SECONDS",
                   help="seconds one request may take in all, connection to the last byte of its answer (default 5)")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from ..vocab.errors import UsageError
    from ..vocab.timefmt import parse_duration
    from .client import Client, check_target
    from .mapping import load_map
    from .plan import plan_text

    if args.execute and args.dry_run:
        raise UsageError("--execute and --dry-run contradict each other; give one")
    if args.budget < 1:
        raise UsageError(f"--budget {args.budget}: give a positive number of requests")
    try:
        wait_ms = parse_duration(args.wait)
    except ValueError as exc:
        raise UsageError(f"--wait {args.wait}: {exc}") from None
    if wait_ms > 60_000:
        raise UsageError(f"--wait {args.wait}: at most 60s (a probe is short; declare longer retention yourself)")
    if not 0 < args.timeout <= 60:
        raise UsageError(f"--timeout {args.timeout}: give 0 (excluded) to 60 seconds")
    pmap = load_map(args.map)
    check_target(args.url, pmap, tuple(args.allow_host))
    out = None
    if args.out:
        import os

        from ..vocab.files import check_output_file
        out = check_output_file(args.out, "--out")
        if os.path.exists(out) and os.path.samefile(out, args.map):
            raise UsageError(f"--out {args.out} is the mapping file; write the profile elsewhere")
    print(plan_text(pmap, args.url, wait_ms))
    if not args.execute:
        print("dry run: nothing was sent; add --execute to send these requests"
              + ("" if args.out else " (and --out PROFILE.yaml to write the profile)"))
        return 0
    client = Client(args.url, pmap, budget=args.budget, allow_hosts=tuple(args.allow_host), timeout_s=args.timeout)
    return report(pmap, client, args.url, wait_ms, out, args.map)


def report(pmap, client, url: str, wait_ms: int, out, map_path: str) -> int:
    from .interpret import conflicts, interpret
    from .plan import execute
    from .profile import _spelled, profile_text

    from ..vocab.errors import UsageError

    print("sending:")
    obs = execute(pmap, client, wait_ms=wait_ms, say=lambda line: print(line, flush=True))
    if obs.stopped and not any(ex.status for ex in client.sent):
        raise UsageError(f"nothing answers at {url}: {obs.stopped}; nothing was probed and no profile written",
                         hint="start the test endpoint, or check the URL's host and port")
    if obs.invalid is not None:
        print(f"stopped: {obs.invalid.message()}; the steps after it were not sent")
        _effects(obs)
        raise UsageError(f"{obs.invalid.message()}: not the service's own answer, so it says nothing about keys; "
                         f"no profile was written", hint=f"check {obs.invalid.check}")
    if obs.stopped:
        print(f"stopped: the endpoint refused a connection ({obs.stopped}); the steps after it were not sent "
              "and their fields stay untested")
    profile = interpret(pmap, obs)
    if obs.skipped:
        print(f"  not sent (what was seen made them moot): {', '.join(obs.skipped)}")
    print(f"\n{pmap.service} profile ({len(client.sent)} requests):")
    for knob, f in profile.fields.items():
        print(f"  {_spelled(knob)}: {f.value if f.status == 'observed' else 'untested'}\n      {f.text}")
    for name, f in profile.notes.items():
        if f.status == "observed":
            print(f"  ({name}) {f.text}")
    print("  untested (the service owner declares): "
          + ", ".join(_spelled(k) for k, f in {**profile.fields, **profile.notes}.items() if f.status == "untested"))
    for why in conflicts(profile):
        print(f"  warning: {why}", file=sys.stderr)
    released, residue = _effects(obs)
    meta = {"url": url, "map": map_path, "id": obs.probe_id, "requests": len(client.sent), "wait": f"{wait_ms}ms",
            "effects": list(obs.effects), "released": released, "residue": residue}
    if out is not None:
        from ..vocab.files import atomic_write_text
        atomic_write_text(out, profile_text(profile, meta, str(out)))
        print(f"profile: {out}")
    return 0 if not residue and not obs.unknown and not obs.stopped else 1


def _effects(obs) -> tuple[list[str], list[str]]:
    """Print the effects the probe made, released and left (the residue), and every request that
    may have made one it cannot name; returns (released, residue)."""
    print(f"\neffects made: {', '.join(obs.effects) or 'none'}")
    released = [r for r in obs.effects if obs.releases.get(r) is not None and obs.releases[r].ok]
    print(f"released: {', '.join(released) or 'none'}")
    residue = obs.residue
    print(f"residue: {', '.join(residue) or 'none'}"
          + (f" (they carry {obs.probe_id} in their intent; release them by hand)" if residue else ""))
    for ex in obs.unknown:
        print(f"  unknown: {ex.brief()}: the request may have made an effect the probe cannot name; search for "
              f"{obs.probe_id}")
    return released, residue
