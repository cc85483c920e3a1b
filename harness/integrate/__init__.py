"""Integration runs: a real worker against the sandbox (docs/integration.md)."""
