"""A subprocess adapter that misbehaves on the wire in the way its first argument names."""
import json
import os
import sys
import time

mode = sys.argv[1]
sys.stdin.readline()  # init
out = sys.stdout.buffer


def write(data: bytes) -> None:
    out.write(data)
    out.flush()


REQ = b'{"id":1,"port":"run","op":"info","args":{}}\n'
if mode == "flood":
    while True:  # requests without ever reading a reply: the pipes fill up
        write(REQ * 1000)
elif mode == "endless":
    while True:
        write(b"x" * 65536)
elif mode == "trickle":
    while True:
        write(b"x")
        time.sleep(0.05)
elif mode == "huge_line":
    write(b'{"id":1,"port":"run","op":"info","args":{"pad":"' + b"x" * (200 << 20) + b'"}}\n')
elif mode == "close_stdout":
    os.close(1)
    time.sleep(600)
elif mode == "fork_child":
    pid = os.fork()
    if pid == 0:
        time.sleep(600)
        os._exit(0)
    with open(sys.argv[2], "w") as fh:
        fh.write(str(pid))
    write(b"not json\n")
    time.sleep(600)
elif mode == "deep":
    write(b'{"id":1,"port":"run","op":"info","args":{"x":' + b"[" * 100_000 + b"]" * 100_000 + b"}}\n")
elif mode == "big_id":
    write(b'{"id":' + b"7" * 5000 + b',"port":"run","op":"info","args":{}}\n')
elif mode == "nan":
    write(b'{"id":1,"port":"clock","op":"sleep","args":{"ms":NaN,"reason":"x"}}\n')
elif mode == "infinity":
    write(b'{"id":1,"port":"clock","op":"sleep","args":{"ms":-Infinity,"reason":"x"}}\n')
elif mode == "surrogate":
    write(b'{"id":1,"port":"ledger","op":"read","args":{"key":"k\\ud800"}}\n')
elif mode == "nested_ok_depth":
    write(b'{"id":1,"port":"run","op":"info","args":{"x":' + b"[" * 80 + b"]" * 80 + b"}}\n")
elif mode == "lines":  # the fuzz test: write each line of a file, one per request
    with open(sys.argv[2], "rb") as fh:
        for line in fh.read().split(b"\n"):
            write(line + b"\n")
            if not sys.stdin.readline():
                break
    sys.exit(0)
elif mode == "escape":  # a grandchild in a session of its own, that writes a file after crashlab is done
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            with open(sys.argv[2], "w") as fh:
                fh.write(str(os.getpid()))
            time.sleep(3)
            with open(sys.argv[2] + ".late", "w") as fh:
                fh.write("rewritten after the run")
            os._exit(0)
        os._exit(0)
    for _ in range(500):  # until the grandchild is there
        if os.path.exists(sys.argv[2]) and open(sys.argv[2]).read():
            break
        time.sleep(0.01)
    write(b"not json\n")
elif mode == "loris":  # every request whole just inside the per-line deadline, for ever
    n = 0
    while True:
        n += 1
        req = b'{"id":%d,"port":"run","op":"info","args":{}}\n' % n
        for i in range(0, len(req), 8):
            time.sleep(0.6 * 8 / len(req))
            write(req[i:i + 8])
        if not sys.stdin.readline():
            break
elif mode in ("sigstop_parent", "sigterm_parent", "sigint_parent"):
    import signal
    write(REQ)
    sys.stdin.readline()
    os.kill(os.getppid(), {"sigstop_parent": signal.SIGSTOP, "sigterm_parent": signal.SIGTERM,
                           "sigint_parent": signal.SIGINT}[mode])
    time.sleep(30)
sys.stdin.read()
