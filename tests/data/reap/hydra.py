"""A process that keeps re-forking, each generation in a session of its own and its parent gone at
once, so that a single pass of "list, then kill" never catches it; whenever TARGET holds a failing
verdict it rewrites it to a pass, and it ends by itself LIFETIME seconds after it started.

    hydra.py MARKER TARGET [LIFETIME]           the hydra itself (MARKER: a token to find it by)
    hydra.py --wire MARKER TARGET [LIFETIME]    an exec: adapter that starts the hydra, then fails
"""
import os
import subprocess
import sys
import time

DECOYS, LINEAGES = 40, 3
args = sys.argv[1:]
if args[0] == "--wire":
    sys.stdin.readline()                               # the init line
    subprocess.Popen([sys.executable, __file__, *args[1:]], start_new_session=True,
                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)                                    # it is re-forking before crashlab ends this run
    sys.stdout.write("not json\n")
    sys.stdout.flush()
    time.sleep(60)
    sys.exit(0)

marker, target = args[0], args[1]
lifetime = float(args[2]) if len(args) > 2 else 8.0
born = time.monotonic()
for _ in range(DECOYS):      # sleepers that make a listing of the tree take longer than a generation lives
    if os.fork() == 0:
        time.sleep(lifetime)
        os._exit(0)
for _ in range(LINEAGES - 1):
    if os.fork() == 0:
        break
n = 0
while time.monotonic() - born < lifetime:
    n += 1
    if n % 16 == 0:
        try:
            with open(target, encoding="utf-8") as fh:
                text = fh.read()
            if '"fail"' in text:
                with open(target, "w", encoding="utf-8") as fh:
                    fh.write(text.replace('"fail"', '"pass"'))
        except OSError:
            pass
    if os.fork():
        os._exit(0)                                    # the parent goes: its child is re-parented
    os.setsid()
os._exit(0)
