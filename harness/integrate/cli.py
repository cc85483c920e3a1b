"""The integration commands, registered by crashlab.cli_args in one line: ``crashlab sandbox
serve`` (crashlab.sandbox.cli) and ``crashlab integrate``."""
from __future__ import annotations


def add_parsers(cmd) -> None:
    from ..sandbox.cli import add_parser as add_sandbox

    add_sandbox(cmd)
