"""An exec: adapter that never speaks the protocol. Its first run only leaves a mark; every later run
waits for the traces crashlab already wrote in its --out folder (read from crashlab's command line)
and replaces each by a symbolic link to the file $SWAP_TO names."""
import os
import sys
import time
from pathlib import Path

sys.stdin.readline()  # init
with open(f"/proc/{os.getppid()}/cmdline", "rb") as fh:
    argv = [a.decode() for a in fh.read().split(b"\0") if a]
out = Path(argv[argv.index("--out") + 1])
decoy = Path(os.environ["SWAP_TO"])
mark = decoy.with_name("first-run-done")
if not mark.exists():
    mark.write_text("")
    sys.exit(0)
deadline = time.monotonic() + 20
while not list(out.glob("*.jsonl")) and time.monotonic() < deadline:
    time.sleep(0.05)
for trace in out.glob("*.jsonl"):
    trace.unlink()
    trace.symlink_to(decoy)
