"""A ``wire:`` worker and the harness share one CPU while the worker lives (crashlab.run.affinity);
the harness gets every CPU back after, an ``exec:`` program is never pinned, and a process forked
from a pinned harness is not pinned."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from crashlab.run import affinity
from crashlab.scenario import resolve
from support import kinds, run, scenario

HERE = Path(__file__).parent
SEVERAL = len(os.sched_getaffinity(0)) > 1 if hasattr(os, "sched_getaffinity") else False
pytestmark = pytest.mark.skipif(not SEVERAL, reason="pinning needs sched_setaffinity and two CPUs or more")


@pytest.fixture(autouse=True)
def _path(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), str(HERE.parent)]))


def said_cpus(result) -> list[set[int]]:
    return [{int(c) for c in e["args"]["reason"].split()[1].split(",")}
            for e in kinds(result, "call") if e["op"] == "sleep"]


def test_a_wire_worker_runs_on_the_one_cpu_the_harness_was_given_and_the_harness_gets_all_back():
    before = os.sched_getaffinity(0)
    pinned: list[set[int]] = []
    real_pin = affinity.pin

    def watched(pids, lasting=()):
        held = real_pin(pids, lasting)
        pinned.append(os.sched_getaffinity(0))
        return held
    affinity.pin = watched
    try:
        result = run(scenario(), "wire:affinity_adapters:SaysItsCpus")
    finally:
        affinity.pin = real_pin
    [cpus] = said_cpus(result)
    assert len(cpus) == 1 and pinned == [cpus] and cpus <= before
    assert os.sched_getaffinity(0) == before and affinity._held == 0


def test_workers_alive_at_once_keep_the_pin_until_the_last_ends():
    before = os.sched_getaffinity(0)
    for name in ("matrix-lease-loss", "t4-approval-wait-crash", "combined-cancellation-under-pressure"):
        result = run(resolve(name), "wire:crashlab.reference_impl:ReferenceAdapter")
        assert kinds(result, "start")
        assert os.sched_getaffinity(0) == before and affinity._held == 0, name


def test_the_count_of_pinned_workers_decides_when_the_harness_is_unpinned():
    before = os.sched_getaffinity(0)
    assert affinity.pin([]) and affinity.pin([])
    assert len(os.sched_getaffinity(0)) == 1
    affinity.unpin()
    assert len(os.sched_getaffinity(0)) == 1      # one worker still holds it
    affinity.unpin()
    assert os.sched_getaffinity(0) == before
    affinity.unpin()                               # one too many changes nothing
    assert os.sched_getaffinity(0) == before and affinity._held == 0


def test_a_process_forked_from_a_pinned_harness_gets_every_cpu_back():
    before = os.sched_getaffinity(0)
    assert affinity.pin([])
    try:
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.write(write, ",".join(map(str, sorted(os.sched_getaffinity(0)))).encode())
            os._exit(0)
        os.waitpid(pid, 0)
        child = {int(c) for c in os.read(read, 4096).decode().split(",")}
        os.close(read)
        os.close(write)
    finally:
        affinity.unpin()
    assert child == before


def test_an_exec_program_keeps_every_cpu():
    before = os.sched_getaffinity(0)
    shim = f"exec:{sys.executable} -m crashlab.run.wire affinity_adapters:SaysItsCpus"
    [cpus] = said_cpus(run(scenario(), shim))
    assert cpus == before


def test_a_worker_still_waiting_at_the_horizon_ends_with_the_simulation_and_unpins_the_harness():
    from crashlab.run.drivers import _LIVE

    before = os.sched_getaffinity(0)
    result = run(scenario(), "wire:affinity_adapters:SleepsPastTheHorizon")
    reasons = [e["args"]["reason"] for e in kinds(result, "call") if e["op"] == "sleep"]
    assert reasons[-1] == "past the horizon" and result.events[-1]["kind"] == "end"
    assert not _LIVE and affinity._held == 0 and os.sched_getaffinity(0) == before
    from crashlab.run import warm
    from crashlab.run.reap import descendants

    [server] = [srv for key, srv in warm._SERVERS.items() if key[0] == "affinity_adapters:SleepsPastTheHorizon"]
    assert set(descendants(server.proc.pid)) <= server.keep     # the worker it forked is gone


def test_a_job_pool_worker_pins_to_its_own_slots_cpu():
    cpus = sorted(os.sched_getaffinity(0))
    try:
        for slot in range(len(cpus) + 1):
            affinity.prefer(slot)
            assert affinity.pin([])
            try:
                assert os.sched_getaffinity(0) == {cpus[slot % len(cpus)]}
            finally:
                affinity.unpin()
    finally:
        affinity._slot = None
    assert os.sched_getaffinity(0) == set(cpus)


def test_two_job_pool_workers_run_their_wire_workers_on_different_cpus(tmp_path):
    from crashlab.run.jobs import Done, Pool

    def cpus_of_a_worker(_):
        result = run(scenario(), "wire:affinity_adapters:SaysItsCpus")
        return {"cpus": sorted(said_cpus(result)[0]), "pid": os.getpid()}

    replies = list(Pool(2).map(cpus_of_a_worker, list(range(6))))
    assert all(isinstance(r, Done) for r in replies), replies
    cpus = {r.header["pid"]: tuple(r.header["cpus"]) for r in replies}
    assert all(len(c) == 1 for c in cpus.values()) and len(set(cpus.values())) == len(cpus), replies


def test_a_pin_belongs_to_the_thread_that_made_it_and_is_given_back_from_any_thread():
    import threading

    before = os.sched_getaffinity(0)
    seen: dict[str, object] = {}
    go = threading.Event()

    def other():            # started before the pin: it does not inherit the pinned mask
        go.wait(10)
        seen["pinned"] = affinity.pin([])     # another thread holds the pin: this one is not pinned
        seen["cpus"] = os.sched_getaffinity(0)
    thread = threading.Thread(target=other)
    thread.start()
    assert affinity.pin([])
    go.set()
    thread.join()
    assert seen == {"pinned": False, "cpus": before}
    gives_back = threading.Thread(target=affinity.unpin)   # e.g. kill_all_adapters on another thread
    gives_back.start()
    gives_back.join()
    assert os.sched_getaffinity(0) == before and affinity._held == 0


def test_the_warm_server_gets_every_cpu_back_after_the_last_worker():
    from crashlab.run import warm

    before = os.sched_getaffinity(0)
    run(scenario(), "wire:affinity_adapters:SaysItsCpus")
    [server] = [srv for key, srv in warm._SERVERS.items()
                if key[0] == "affinity_adapters:SaysItsCpus" and key[2] == os.getpid()]
    assert server.keep and all(os.sched_getaffinity(pid) == before for pid in server.keep)


@pytest.mark.parametrize("spec", ["wire:affinity_adapters:SaysWhyItWaits",
                                  f"exec:{sys.executable} -m crashlab.run.wire affinity_adapters:SaysWhyItWaits"])
def test_what_a_worker_waiting_at_the_horizon_wrote_is_kept_for_crashlab_run(spec):
    result = run(scenario(), spec)
    assert result.events[-1]["kind"] == "end"
    [(worker, text)] = result.stderr.items()
    assert worker.endswith("/w1") and "waiting for a reply that never comes" in text
