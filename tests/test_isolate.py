"""The namespaces crashlab starts untrusted processes in (crashlab.run.isolate)."""
from __future__ import annotations

import subprocess

import pytest

from crashlab.run import isolate
from crashlab.vocab.errors import UsageError


def test_process_isolation_leaves_the_command_as_it_is(monkeypatch):
    monkeypatch.setenv(isolate.ENV, "process")
    assert isolate.wrap(["python3", "a.py"]) == ["python3", "a.py"]
    assert isolate.current().mode == "process"


def test_an_unknown_mode_is_a_usage_error_naming_the_variable(monkeypatch):
    monkeypatch.setenv(isolate.ENV, "docker")
    with pytest.raises(UsageError, match="CRASHLAB_ISOLATION='docker' is not one of"):
        isolate.current()


def _namespaces_or_skip(monkeypatch):
    monkeypatch.setenv(isolate.ENV, "auto")
    found = isolate.current()
    if found.mode != "namespaces":
        pytest.skip(f"no namespaces on this machine: {found.detail}")


def test_inside_namespaces_only_the_writable_folder_can_be_written(monkeypatch, tmp_path):
    _namespaces_or_skip(monkeypatch)
    mine, theirs = tmp_path / "mine", tmp_path / "crashlab-out"
    mine.mkdir(), theirs.mkdir()
    script = f"touch {theirs}/results.json; touch {mine}/scratch; ls /proc | grep -c '^[0-9]'"
    done = subprocess.run(isolate.wrap(["sh", "-c", script], writable=[str(mine)]),
                          capture_output=True, text=True, timeout=30)
    assert "Read-only file system" in done.stderr
    assert not (theirs / "results.json").exists() and (mine / "scratch").exists()
    assert int(done.stdout.split()[-1]) < 5  # its own PID namespace: crashlab's processes are not there


def test_inside_namespaces_there_is_no_network_unless_asked(monkeypatch):
    _namespaces_or_skip(monkeypatch)
    probe = ["python3", "-c", "import socket; print(len(socket.if_nameindex()))"]
    alone = subprocess.run(isolate.wrap(probe), capture_output=True, text=True, timeout=30)
    shared = subprocess.run(isolate.wrap(probe, network=True), capture_output=True, text=True, timeout=30)
    import socket
    assert alone.stdout.strip() == "1"  # loopback only
    assert int(shared.stdout.strip()) == len(socket.if_nameindex())  # the host's, to reach 127.0.0.1


def test_namespaces_required_but_unavailable_is_a_usage_error(monkeypatch):
    monkeypatch.setenv(isolate.ENV, "namespaces")
    monkeypatch.setattr(isolate, "_probe", lambda: (False, "bwrap not found"))
    with pytest.raises(UsageError, match="bwrap not found"):
        isolate.current()
