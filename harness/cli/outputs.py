"""Every output path of a command, made absolute before an adapter is imported, and refused when it
is an input or another output."""
from __future__ import annotations

from pathlib import Path


#: Each command's outputs: (argparse attribute, option, folder kind, or None for a file); see
#: crashlab.vocab.files.plan_outputs for what is refused.
OUTPUT_OPTIONS = {
    "run": (("out", "--out", "traces"), ("report", "--report", "report")),
    "conformance": (("out", "--out", "traces"), ("json", "--json", None), ("report", "--report", "report")),
    "sweep": (("out", "--out", "traces"), ("json", "--json", None), ("findings", "--findings", "findings")),
    "merge": (("json", "--json", None),),
    "report": (("out", "--out", "report"),),
    "explore": (("json", "--json", None), ("save", "--save", None), ("findings", "--findings", "findings")),
    "compare": (("save", "--save", "findings"),),
    "integrate": (("out", "--out", "traces"), ("json", "--json", None)),
}


def _plan_outputs(args) -> None:
    """Make every output path of the command absolute, before any adapter (which may change the
    working directory) is even imported; refuse an output that is an input or another output."""
    from ..vocab.files import folder_inputs, plan_outputs

    options = OUTPUT_OPTIONS.get(args.command)
    if not options:
        return
    inputs: list[tuple[str, Path]] = []
    if args.command == "run":
        inputs = [("the scenario file", Path(args.scenario))]
    for given in getattr(args, "scenarios", None) or ():
        inputs += [("the scenario file", f) for f in folder_inputs(given, (".yaml", ".yml"))]
    for given in (getattr(args, "results", None) or ()) if args.command == "merge" else ():
        inputs.append(("the results JSON", Path(given)))
    for given in (getattr(args, "inputs", None) or ()) if args.command == "report" else ():
        inputs += [("the input", f) for f in folder_inputs(given, (".jsonl", ".json"))]
    planned = plan_outputs([(opt, getattr(args, attr, None), kind) for attr, opt, kind in options], inputs)
    for attr, opt, _ in options:
        if opt in planned:
            setattr(args, attr, str(planned[opt]))
