"""Adapters that never speak the protocol and try, instead, to get out of their process, each
saying on standard error what it managed (tests/test_isolation_adapters.py reads that with
``crashlab run -v``). Run as ``exec:python tests/escape_attempts.py MODE ARGS...``, or over the wire
as ``wire:escape_attempts:Escape`` with the mode and its arguments in ``CRASHLAB_ESCAPE``
(a JSON list)."""
import json
import os
import socket
import struct
import sys
import time


def say(mode: str, text: str) -> None:
    print(f"escape {mode}: {text}", file=sys.stderr, flush=True)


def _forged_frame(scenario_id: str, spec: str) -> bytes:
    """A worker's reply for job 0 carrying a passing trace: the reference adapter's own run of the
    scenario, renamed to this adapter (what a worker would return if this adapter were correct)."""
    from crashlab.run.drivers import load_adapter
    from crashlab.run.runner import run_scenario
    from crashlab.scenario import resolve

    run = run_scenario(resolve(scenario_id), load_adapter("crashlab.reference_impl:ReferenceAdapter"), None)
    lines = run.to_jsonl().splitlines()
    head = json.loads(lines[0])
    head["adapter"] = spec
    payload = "\n".join([json.dumps(head, sort_keys=True, separators=(",", ":")), *lines[1:]]).encode() + b"\n"
    header = json.dumps({"i": 0, "value": {"seed": run.seed, "stderr": []}}).encode()
    return struct.pack("!II", len(header), len(payload)) + header + payload


def _cmdline(pid: int) -> list:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return fh.read().decode(errors="replace").split("\0")
    except OSError:
        return []


def _ancestors() -> list:
    """Its parent and grandparent (a worker, or the warm server and its worker): never further, so
    that a test writes into no pipe of a process other than the crashlab it runs."""
    out, pid = [], os.getpid()
    for _ in range(2):
        try:
            with open(f"/proc/{pid}/stat") as fh:
                pid = int(fh.read().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        if pid <= 1:
            break
        out.append(pid)
    return out


def forge(scenario_id: str) -> str:
    """Write a forged passing reply into every pipe its parent and grandparent hold."""
    mine = set()
    for fd in (0, 1, 2):
        try:
            mine.add(os.readlink(f"/proc/self/fd/{fd}"))
        except OSError:
            pass
    frame, opened = None, 0
    for pid in _ancestors():
        argv = _cmdline(pid)   # a worker is forked from crashlab: its command line names this adapter
        if "--adapter" not in argv[:-1]:
            continue
        frame = frame or _forged_frame(scenario_id, argv[argv.index("--adapter") + 1])
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if not target.startswith("pipe:") or target in mine:
                    continue
                out = os.open(f"/proc/{pid}/fd/{fd}", os.O_WRONLY | os.O_NONBLOCK)
            except OSError:
                continue
            try:
                os.write(out, frame)
                opened += 1
            except OSError:
                pass
            finally:
                os.close(out)
    return f"wrote the forged reply into {opened} pipe(s) of crashlab's processes"


def write(*paths: str) -> str:
    """A .pth in the virtualenv, and a file at every path given; then one in its own TMPDIR."""
    import sysconfig

    done = []
    tmp = os.environ.get("TMPDIR", "")
    targets = [os.path.join(sysconfig.get_paths()["purelib"], "zz_crashlab_escape.pth"), *paths,
               os.path.join(tmp, "scratch")]
    for path in targets:
        try:
            with open(path, "w") as fh:
                fh.write("import os\n")
            done.append(f"wrote {path}")
        except OSError as exc:
            done.append(f"refused {path}: {exc.strerror}")
    return "; ".join(done)


def connect(port: str) -> str:
    try:
        socket.create_connection(("127.0.0.1", int(port)), timeout=2).close()
        return "connected"
    except OSError as exc:
        return f"could not connect: {exc}"


def linger(path: str) -> str:
    """A grandchild in a session of its own that sleeps, then writes ``path`` (while the adapter
    waits for it, and after)."""
    read, written = os.pipe()
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.close(0), os.close(1)   # not holding the protocol's pipes open: the run ends on time
            os.write(written, str(os.getpid()).encode() + b"\n")
            for _ in range(20):
                time.sleep(0.5)
                try:
                    with open(path, "a") as fh:
                        fh.write("written by the grandchild\n")
                except OSError:
                    pass
            os._exit(0)
        os._exit(0)
    pid = os.read(read, 64).decode().strip()
    time.sleep(1.5)
    return f"grandchild pid {pid}"


ATTEMPTS = {"forge": forge, "write": write, "connect": connect, "linger": linger}


class Escape:
    """``wire:escape_attempts:Escape``: the attempt in ``CRASHLAB_ESCAPE``, then a return without
    one port call."""

    async def run(self, ports):
        mode, *args = json.loads(os.environ["CRASHLAB_ESCAPE"])
        say(mode, ATTEMPTS[mode](*args))


if __name__ == "__main__":
    say(sys.argv[1], ATTEMPTS[sys.argv[1]](*sys.argv[2:]))
    sys.stdin.readline()   # the init line
    sys.exit(0)
