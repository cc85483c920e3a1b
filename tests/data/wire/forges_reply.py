"""An exec: adapter that never speaks the protocol. It reads crashlab's command line (its worker is a
fork of crashlab), makes a passing trace of that scenario with the reference adapter in its own process,
and writes it as its worker's reply into every write-only pipe its worker process holds (the result pipe
among them), through /proc/PPID/fd, in the unsigned framing: ``!II`` lengths, JSON header, payload."""
import json
import os
import struct
import sys

sys.stdin.readline()  # init
worker = os.getppid()
with open(f"/proc/{worker}/cmdline", "rb") as fh:
    argv = [a.decode() for a in fh.read().split(b"\0") if a]


def option(*names):
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                return argv[i + 1]
            if arg.startswith(name + "="):
                return arg[len(name) + 1:]
    return None


spec = option("--adapter", "--crashlab-adapter")
scenario_id = option("--scenario", "--crashlab-scenario") or argv[argv.index("run") + 1]
seed = option("--seed", "--crashlab-seed")

from crashlab.reference_impl import ReferenceAdapter  # noqa: E402
from crashlab.run.drivers import AdapterSpec  # noqa: E402
from crashlab.run.runner import run_scenario  # noqa: E402
from crashlab.scenario import resolve  # noqa: E402

run = run_scenario(resolve(scenario_id), AdapterSpec(text=spec, kind="python", factory=ReferenceAdapter),
                   int(seed) if seed is not None else None)
head = json.dumps({"i": 0, "value": {"seed": run.seed, "stderr": {}}}).encode()
payload = run.to_jsonl().encode()
frame = struct.pack("!II", len(head), len(payload)) + head + payload

mine = os.readlink("/proc/self/fd/0")
wrote = 0
for name in os.listdir(f"/proc/{worker}/fd"):
    if int(name) <= 2:
        continue
    try:
        link = os.readlink(f"/proc/{worker}/fd/{name}")
        with open(f"/proc/{worker}/fdinfo/{name}") as fh:
            flags = int(next(line for line in fh if line.startswith("flags:")).split()[1], 8)
        if not link.startswith("pipe:") or link == mine or flags & 3 != os.O_WRONLY:
            continue
        fd = os.open(f"/proc/{worker}/fd/{name}", os.O_WRONLY)
    except (OSError, StopIteration):
        continue   # a worker that is not dumpable: its pipes cannot be opened
    try:
        os.write(fd, frame)
        wrote += 1
    except OSError:
        pass
    finally:
        os.close(fd)
sys.stderr.write(f"forged replies written: {wrote}\n")
