"""``crashlab sandbox serve SCENARIO``: the scenario's services on 127.0.0.1 until Ctrl-C."""
from __future__ import annotations

import argparse
import sys
import threading


def add_parser(cmd) -> None:
    p = cmd("sandbox", "serve a scenario's synthetic services over real HTTP on 127.0.0.1",
            "Serve the scenario's services (the simulator's own semantics, profiles and fault rules) as HTTP "
            "endpoints on 127.0.0.1, one base URL per worker (/w/{run}.w{number}); Ctrl-C stops it and writes "
            "the effect log as a crashlab trace. The mapping is in docs/integration.md.")
    p.add_argument("action", choices=("serve",), help="serve")
    p.add_argument("scenario", metavar="SCENARIO", help="library scenario id or a .yaml file")
    p.add_argument("--port", type=int, default=0, metavar="N", help="port on 127.0.0.1 (default: any free port)")
    p.add_argument("--time-scale", type=float, default=1.0, metavar="N",
                   help="scenario milliseconds per real millisecond (default 1)")
    p.add_argument("--log", metavar="PATH", help="write the effect log (a crashlab trace) here on exit")
    p.set_defaults(handler=serve)


def serve(args: argparse.Namespace) -> int:
    from ..vocab.errors import UsageError
    from ..scenario.loader import resolve
    from ..world.trace import write_jsonl
    from .server import Sandbox

    if not 0 <= args.port <= 65535:
        raise UsageError(f"--port {args.port} is not a port number (0 to 65535)")
    sc = resolve(args.scenario)
    sb = Sandbox(sc, time_scale=args.time_scale, port=args.port)
    sb.start()
    try:
        print(f"crashlab sandbox: {sc.id} on {sb.root} (time scale {sb.clock.scale:g}); Ctrl-C stops", flush=True)
        for spec in sc.runs:
            print(f"  run {spec.id}: worker base URL {sb.root}/w/{spec.id}.w1", flush=True)
        threading.Event().wait()
    finally:
        sb.stop()
        if args.log:
            write_jsonl(sb.end({s.id: {"finished": None, "waiting": None, "workers": 0} for s in sc.runs}),
                        args.log)
            print(f"crashlab sandbox: effect log written to {args.log}", file=sys.stderr)
    return 0
