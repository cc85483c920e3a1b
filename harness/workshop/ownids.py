"""A personal kit's identifiers made at run time: the learner's code sees its own.

The simulator numbers what it makes while a run goes (an approval ``AP-1``, an approval request
``AR-1``, an operator ticket ``OP-1``, an inbox event ``ev-1``) the same way for every run, so
on a learner's own scenario variant (codecheck.own_scenario) those would still be the shared
kit's, and a decision that recognises ``AP-1`` by name would pass every kit. Here every such
identifier on its way to the learner's code is renamed by the learner's own shuffle of that
kind (evidence.Variant's, the one their listing shows), and renamed back on its way out, so
the run is the same run and crashlab judges the same trace.

``serve(variant, spec)`` runs a kit's Python adapter over the wire with the renaming (one
process per worker, as crashlab.run.wire.serve); ``python -m crashlab.workshop.ownids
VARIANT COMMAND...`` puts it between crashlab and any wire program (a kit's wire_adapter.py).
"""
from __future__ import annotations

import re
import sys

#: The kinds of identifier the simulator makes at run time.
KINDS = ("AP", "AR", "OP", "ev")
_TOKEN = re.compile(r"\b(" + "|".join(KINDS) + r")-([1-9]\d{0,2})\b")


def _maps(variant: str, kind: str) -> tuple[dict, dict]:
    from .evidence import _permutation
    perm = _permutation(variant, kind, 1000)
    forward = {n: perm[n] or 1000 for n in range(1, 1000)}
    return forward, {v: n for n, v in forward.items()}


class Renamer:
    """The learner's own names for run-time identifiers (``own``) and back (``shared``)."""

    def __init__(self, variant: str) -> None:
        self._f, self._b = {}, {}
        for kind in KINDS:
            self._f[kind], self._b[kind] = _maps(variant, kind)

    def own(self, text: str) -> str:
        return _TOKEN.sub(lambda m: f"{m.group(1)}-{self._f[m.group(1)][int(m.group(2))]}", text)

    def shared(self, text: str) -> str:
        def back(m: re.Match) -> str:
            n = self._b[m.group(1)].get(int(m.group(2)))
            return f"{m.group(1)}-{n}" if n is not None else m.group(0)
        return re.sub(r"\b(" + "|".join(KINDS) + r")-(\d{1,4})\b", back, text)


def own_text(variant: str | None, text: str) -> str:
    """A finding about the learner's run, with the run-time identifiers their code saw."""
    return Renamer(variant).own(text) if variant else text


class _In:
    def __init__(self, stream, rename) -> None:
        self.stream, self.rename = stream, rename

    def readline(self) -> str:
        return self.rename(self.stream.readline())


class _Out:
    def __init__(self, stream, rename) -> None:
        self.stream, self.rename = stream, rename

    def write(self, text: str) -> int:
        return self.stream.write(self.rename(text))

    def flush(self) -> None:
        self.stream.flush()


def serve(variant: str, spec: str) -> int:
    """crashlab.run.wire.serve for ``spec``, the learner's own run-time identifiers in between."""
    from ..run.wire import serve as wire_serve
    r = Renamer(variant)
    return wire_serve(spec, _In(sys.stdin, r.own), _Out(sys.stdout, r.shared))


def proxy(variant: str, command: list[str]) -> int:
    """Run a wire program with the renaming between it and crashlab (line by line, both ways)."""
    import subprocess
    import threading
    r = Renamer(variant)
    child = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)

    def down() -> None:
        try:
            for line in sys.stdin:
                child.stdin.write(r.own(line))
                child.stdin.flush()
        except (BrokenPipeError, OSError):
            pass
        finally:
            try:
                child.stdin.close()
            except OSError:
                pass

    threading.Thread(target=down, daemon=True).start()
    for line in child.stdout:
        sys.stdout.write(r.shared(line))
        sys.stdout.flush()
    return child.wait()


if __name__ == "__main__":
    sys.exit(proxy(sys.argv[1], sys.argv[2:]))
