"""A worker whose finish is accepted stops, and the platform releases its lease at once: the next
worker (woken by a later inbox event) acquires without waiting out the finished worker's TTL."""
from __future__ import annotations

from crashlab.run.conformance import run_one
from crashlab.scenario import resolve

ADAPTER = "crashlab.gallery.independent:Conservative"


def _events(sid="combined-cancellation-under-pressure"):
    run, _ = run_one(resolve(sid), ADAPTER)
    return run.events


def test_an_accepted_finish_releases_the_lease():
    events = _events()
    finish = next(e for e in events if e["kind"] == "finish" and e["accepted"])
    release = [e for e in events if e["kind"] == "lease" and e["op"] == "release"]
    assert release and release[0]["seq"] > finish["seq"]
    assert release[0]["worker"] == finish["worker"] and release[0]["expires_at"] == finish["t"]


def test_the_next_worker_is_not_kept_waiting_by_a_finished_one():
    events = _events()
    finish = next(e for e in events if e["kind"] == "finish" and e["accepted"])
    later = [e for e in events if e["seq"] > finish["seq"] and e["kind"] == "result"
             and e.get("error") and e["error"].get("code") == "lease_held"]
    assert later == [], "a worker started after the finish met the finished worker's lease"


def test_an_unaccepted_finish_releases_nothing():
    events = _events()
    stale = [e for e in events if e["kind"] == "finish" and not e["accepted"]]
    assert stale
    released_by = {e["worker"] for e in events if e["kind"] == "lease" and e["op"] == "release"}
    assert not released_by & {e["worker"] for e in stale}
