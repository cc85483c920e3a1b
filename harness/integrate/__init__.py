"""Integration runs: a real worker against the sandbox (docs/integration.md)."""

#: The adapter name an integration trace's header carries: this, then the worker command.
PREFIX = "integrate:"


def is_integration(header: dict) -> bool:
    """Whether a trace's header is an integration run's (its verdict is its integration card's)."""
    return isinstance(header, dict) and str(header.get("adapter") or "").startswith(PREFIX)
