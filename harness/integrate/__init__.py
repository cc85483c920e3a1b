# layer real: real processes, sockets and stores.
# may import: vocab, world, scenario, rules, checks, run, reference_impl, gallery, sandbox, runtimes, probe (only floors below it).
"""Integration runs: a real worker against the sandbox (docs/integration.md)."""

from ..checks.card import PREFIX, is_integration  # noqa: E402,F401 (they live with the card)
