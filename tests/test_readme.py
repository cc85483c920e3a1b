"""Every command README.md prints in its ```sh blocks either runs here, as printed, or is listed
below with the reason it cannot (a placeholder for your own code or files, the package index, a
durable runtime's extra, another machine's output). A new README command that is neither fails
``test_every_readme_command_is_run_or_listed``; a listed command the README no longer prints fails
it too.

Where the commands run: a fresh temporary folder is the working directory, holding one symlink,
``examples`` -> the repository's ``examples/``. The README's repo-relative inputs
(``examples/probe/sandbox-map.yaml``, ``python3 examples/integration/worker.py``) resolve as from
the repository root, while every output (``crashlab-out/``, ``report/``, ``profile.yaml``,
``s2.json``, ``workshop/``) lands in the temporary folder and the worktree stays clean. ``crashlab``
and ``python3`` are the running virtualenv's (its ``bin`` first on PATH). The only substitution is
the sandbox's port: the README's ``--port 8080`` becomes ``--port 0`` (any free port, on a machine
where 8080 may be taken) and the probe's ``http://127.0.0.1:8080`` becomes the root the sandbox
printed; the probe's worker path is the README's own and must be one the sandbox printed.

The heavy part (``test_the_readme_commands_run_as_printed``) is one test that runs the commands in
README order (``check`` reads the trace ``run`` wrote): under a minute on an idle machine, half of
it the integration suite; every command has its own timeout, so a hang fails the test instead of
stalling the file. The commands in SLOW (the crash-matrix share) run only with
CRASHLAB_README_SLOW=1.
"""
from __future__ import annotations

import os
import re
import shlex
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
BIN = Path(sys.executable).parent
TIMEOUT_S = 240             # per command: the slowest (the crash-matrix share) takes ~35 s idle

#: command -> (exit codes accepted, text its output must contain or None), in README order
RUN: dict[str, tuple[frozenset[int], str | None]] = {
    "crashlab list": (frozenset({0}), "t2-commit-before-record"),
    "crashlab run t2-commit-before-record": (frozenset({0}), "crashlab-out/t2-commit-before-record.seed102.jsonl"),
    "crashlab check crashlab-out/t2-commit-before-record.seed102.jsonl": (frozenset({0}), "PASS"),
    "crashlab replay crashlab-out/t2-commit-before-record.seed102.jsonl": (frozenset({0}), "identical"),
    "crashlab report crashlab-out/ --out report/": (frozenset({0}), None),
    "crashlab show crashlab-out/t2-commit-before-record.seed102.jsonl": (frozenset({0}), "SUCCEEDED"),
    "crashlab --version": (frozenset({0}), "rule set"),
    # SLOW: one share of the crash matrix covers a subset of the runs: exit 2 (inconclusive) is
    # accepted besides 0 because the conformance exit codes are being changed so that a run over a
    # subset may say so; any failure (1) or usage error (3) still fails the test
    "crashlab sweep --shard 2/4 --json s2.json": (frozenset({0, 2}), "shard 2/4"),
    # a known-bad exhibit over the full library: its exit status is the failure, and the README says 0/20
    "crashlab conformance --adapter crashlab.gallery.retries:BlindRetry -q": (frozenset({1}), "0/20"),
    "crashlab integrate --suite --worker 'python3 examples/integration/worker.py {url} {db}' --store 'sqlite:{db}'":
        (frozenset({0}), " 0 fail, 0 inconclusive"),
    # the sandbox (in the background) and the probe: see _serve_and_probe
    "crashlab sandbox serve examples/probe/sandbox-services.yaml --port 8080 & sleep 1": (frozenset({143}), None),
    "crashlab probe http://127.0.0.1:8080/w/run-1.w1 --map examples/probe/sandbox-map.yaml --execute --out "
    "profile.yaml": (frozenset({0}), "residue: none"),
    # the full library on the probed profile: must pass outright
    "crashlab conformance --services profile.yaml": (frozenset({0}), "verdict: PASS"),
    "crashlab workshop list": (frozenset({0}), "t1"),
    "crashlab workshop start t1": (frozenset({0}), "workshop/t1"),
}

#: runnable, but too slow for every test run (the whole file stays under two minutes without them):
#: run with CRASHLAB_README_SLOW=1. The crash-matrix share takes ~35 s on an idle machine and three
#: minutes on a loaded one; tests/test_sweep.py runs sharded sweeps and their merge on a small selection.
SLOW = frozenset({"crashlab sweep --shard 2/4 --json s2.json"})

PLACEHOLDER = "placeholder"
SKIP: dict[str, tuple[str, str]] = {
    "python3 -m venv .venv && .venv/bin/pip install -q '.[report]' && .venv/bin/crashlab conformance --json "
    "crashlab-out/results.json --report crashlab-out/report":
        ("network", "creates a virtualenv and installs from the package index; the conformance run it ends with "
                    "is the full library's, as `crashlab conformance --services profile.yaml` here"),
    "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/python -m pytest -q":
        ("network", "installs from the package index and runs this whole test suite"),
    "crashlab run my.yaml --adapter my_pkg.adapter:MyAdapter --seed 7": (PLACEHOLDER, "my.yaml, my_pkg.adapter"),
    'crashlab run t1-crash-before-dispatch --adapter "exec:node my-adapter.js" -v': (PLACEHOLDER, "my-adapter.js"),
    'crashlab conformance --adapter "exec:node my-adapter.js" --json results.json --report report/':
        (PLACEHOLDER, "my-adapter.js"),
    "crashlab conformance --adapter my_pkg.adapter:MyAdapter --report report/ --report-failures":
        (PLACEHOLDER, "my_pkg.adapter"),
    "crashlab conformance --adapter wire:my_pkg.adapter:MyAdapter": (PLACEHOLDER, "my_pkg.adapter"),
    "crashlab replay their-trace.jsonl --adapter my_pkg.adapter:MyAdapter": (PLACEHOLDER, "their-trace.jsonl"),
    "crashlab conformance --scenarios my-scenarios/ --with-library": (PLACEHOLDER, "my-scenarios/"),
    "crashlab diff reference.jsonl candidate.jsonl": (PLACEHOLDER, "reference.jsonl, candidate.jsonl"),
    "crashlab export --format chrome TRACE -o t.json": (PLACEHOLDER, "TRACE"),
    "crashlab compare --adapter A --adapter B": (PLACEHOLDER, "A, B"),
    "crashlab compare --results old.json --results new.json": (PLACEHOLDER, "old.json, new.json"),
    "crashlab explore --adapter my_pkg.adapter:MyAdapter --examples 100000": (PLACEHOLDER, "my_pkg.adapter"),
    "crashlab sweep --adapter my_pkg.adapter:MyAdapter --json sweep.json": (PLACEHOLDER, "my_pkg.adapter"),
    "crashlab merge s1.json s2.json s3.json s4.json":
        ("other machines", "s1, s3 and s4 are the other machines' shares; tests/test_sweep.py merges shards"),
    "crashlab integrate --runtime dbos --suite --worker 'python3 examples/runtimes/dbos/careful.py'":
        ("runtime", "needs the dbos extra and its database; tests/test_runtimes_dbos.py runs it where installed"),
    "pip install 'crashlab==0.2.*'": ("network", "installs an older release from the package index"),
    "crashlab conformance --adapter my_pkg.adapter:MyAdapter --rules 2 --json results.json":
        (PLACEHOLDER, "my_pkg.adapter"),
    "pytest --crashlab-adapter=my_pkg.adapter:MyAdapter": (PLACEHOLDER, "my_pkg.adapter"),
    "pytest --crashlab-adapter=my_pkg.adapter:MyAdapter --crashlab-crash-points": (PLACEHOLDER, "my_pkg.adapter"),
}


def _strip_comment(line: str) -> str:
    """The line without its shell comment: a ``#`` that starts a word outside quotes."""
    quote = None
    for i, c in enumerate(line):
        if quote:
            quote = None if c == quote else quote
        elif c in "'\"":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def readme_commands(text: str | None = None) -> list[str]:
    """Every command line of README.md's ```sh blocks, in order, comments dropped (a line that is
    only a comment, such as the indented continuation of the comment above it, is no command)."""
    text = README.read_text(encoding="utf-8") if text is None else text
    out = []
    for block in re.findall(r"^```sh\n(.*?)^```", text, flags=re.S | re.M):
        for line in block.splitlines():
            command = _strip_comment(line).strip()
            if command:
                out.append(command)
    return out


def test_the_readme_parser_drops_comments_and_keeps_quoted_hashes():
    text = "x\n```sh\n# a comment\ncrashlab run a   # why\n                 # more of why\ncrashlab x 'a #b'\n```\n"
    assert readme_commands(text) == ["crashlab run a", "crashlab x 'a #b'"]
    assert len(readme_commands()) == len(RUN) + len(SKIP)


def test_every_readme_command_is_run_or_listed():
    commands = readme_commands()
    unlisted = [c for c in commands if c not in RUN and c not in SKIP]
    assert not unlisted, ("README.md prints commands tests/test_readme.py neither runs nor lists with a reason; "
                          "add each to RUN (with its exit code) or SKIP:\n  " + "\n  ".join(unlisted))
    stale = [c for c in [*RUN, *SKIP] if c not in commands]
    assert not stale, "tests/test_readme.py lists commands README.md no longer prints:\n  " + "\n  ".join(stale)
    assert not set(RUN) & set(SKIP)
    for command, (kind, reason) in SKIP.items():
        if kind == PLACEHOLDER:     # each placeholder named in the reason is in the command
            assert all(name in command for name in reason.split(", ")), command
        elif kind == "runtime":
            assert "--runtime" in command
        elif kind == "network":
            assert "pip install" in command


def _env() -> dict:
    env = dict(os.environ)
    env["PATH"] = f"{BIN}{os.pathsep}{env.get('PATH', '')}"
    return env


def _check(command: str, code: int, output: str) -> None:
    codes, text = RUN[command]
    assert code in codes, f"README command exited {code} (expected {sorted(codes)}): {command}\n{output[-3000:]}"
    if text is not None:
        assert text in output, f"README command's output lacks {text!r}: {command}\n{output[-3000:]}"


def _run(command: str, cwd: Path) -> None:
    done = subprocess.run(["bash", "-c", command], cwd=cwd, env=_env(), capture_output=True, text=True,
                          timeout=TIMEOUT_S)
    _check(command, done.returncode, done.stdout + done.stderr)


def _serve_and_probe(serve_cmd: str, probe_cmd: str, cwd: Path) -> None:
    """The README's pair: the sandbox in the background (on a free port), the probe against the worker
    URL the README prints, then the sandbox stopped as the README's ``kill %1`` does; no process and
    no listening port is left behind."""
    line = serve_cmd.removesuffix("& sleep 1").strip().replace("--port 8080", "--port 0")
    proc = subprocess.Popen(shlex.split(line), cwd=cwd, env=_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, start_new_session=True)
    port = None
    try:
        printed = []
        for out in proc.stdout:          # the banner, then one worker base URL per run
            printed.append(out)
            if "worker base URL" in out:
                break
        root = re.search(r"on (http://127\.0\.0\.1:(\d+))", "".join(printed))
        assert root, f"`{line}` printed no root URL:\n{''.join(printed)}"
        port = int(root[2])
        served = re.findall(r"worker base URL (\S+)", "".join(printed))
        url = re.search(r"http://127\.0\.0\.1:8080(\S*)", probe_cmd)
        assert url and root[1] + url[1] in served, \
            f"the README probes {url and url[0]}, but the sandbox serves {served}"
        probe = probe_cmd.replace("http://127.0.0.1:8080", root[1])
        done = subprocess.run(["bash", "-c", probe], cwd=cwd, env=_env(), capture_output=True, text=True,
                              timeout=TIMEOUT_S)
        _check(probe_cmd, done.returncode, done.stdout + done.stderr)
        assert (cwd / "profile.yaml").is_file()
        proc.send_signal(signal.SIGTERM)     # the README's `kill %1`
        _check(serve_cmd, proc.wait(timeout=30), "")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=30)
        proc.stdout.close()
    with pytest.raises(OSError):           # nothing listens there any more
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def _folder(tmp_path: Path) -> Path:
    assert (BIN / "crashlab").exists(), f"no crashlab beside {sys.executable}"
    (tmp_path / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
    return tmp_path


def test_the_readme_commands_run_as_printed(tmp_path):
    _folder(tmp_path)
    commands = [c for c in readme_commands() if c in RUN and c not in SLOW]
    serve = next(c for c in commands if c.startswith("crashlab sandbox serve"))
    probe = commands[commands.index(serve) + 1]
    assert probe.startswith("crashlab probe ")
    for command in commands:
        if command == serve:
            _serve_and_probe(serve, probe, tmp_path)
        elif command != probe:
            _run(command, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir() if p.is_symlink()) == ["examples"]


@pytest.mark.skipif(not os.environ.get("CRASHLAB_README_SLOW"), reason="slow README commands (the crash-matrix "
                    "share, ~35 s idle): set CRASHLAB_README_SLOW=1")
@pytest.mark.parametrize("command", sorted(SLOW))
def test_the_slow_readme_commands_run_as_printed(command, tmp_path):
    assert command in readme_commands()
    _run(command, _folder(tmp_path))
