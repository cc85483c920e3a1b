"""In-process adapters that start processes meant to outlive crashlab (tests/test_isolation_reap.py).
Their arguments come from the environment: CRASHLAB_TEST_REAP = "MARKER TARGET LIFETIME"."""
import os
import subprocess
import sys
import time

HYDRA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "hydra.py")


class Hydra:
    """Starts the re-forking hydra (a session of its own), then returns without finishing: a failure."""

    async def run(self, p):
        await p.run.info()
        subprocess.Popen([sys.executable, HYDRA, *os.environ["CRASHLAB_TEST_REAP"].split()], start_new_session=True,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(0.5)


ORPHAN = """
import os, sys, time
marker, lifetime = sys.argv[1], float(sys.argv[2])
if os.fork() == 0:
    with open(marker, "w") as fh:
        fh.write(str(os.getpid()))
    time.sleep(lifetime)
    with open(marker + ".late", "w") as fh:
        fh.write("written after the run")
os._exit(0)
"""


class Orphan:
    """Starts a process (a session of its own) that forks a grandchild and ends: the grandchild
    sleeps, then writes MARKER.late. Then it ends its worker process at once (os._exit): the
    grandchild's parent and its worker are both gone. (An in-process adapter's own os.fork ends
    the child at once: it starts processes through subprocess.)"""

    async def run(self, p):
        await p.run.info()
        marker, _target, lifetime = os.environ["CRASHLAB_TEST_REAP"].split()
        subprocess.run([sys.executable, "-c", ORPHAN, marker, lifetime], start_new_session=True,
                       stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(500):
            if os.path.exists(marker) and open(marker).read():
                break
            time.sleep(0.01)
        os._exit(0)
