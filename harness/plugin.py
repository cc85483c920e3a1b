"""pytest plugin (entry point ``pytest11``): conformance scenarios as pytest tests."""
from __future__ import annotations


def pytest_addoption(parser):
    group = parser.getgroup("crashlab", "crashlab conformance harness")
    group.addoption("--crashlab-adapter", action="store", default=None, metavar="SPEC",
                    help="adapter to test: module:attribute or exec:COMMAND")
