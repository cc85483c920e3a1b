# layer world: the simulated world and its one semantics: services, transport, faults, ports, traces.
# may import: vocab (only floors below it).
"""The simulated world and its one semantics: services, the transport (shared with the sandbox),
faults, the platform, the ports an adapter acts through, the boundary and the trace file."""


def __getattr__(name: str):
    """``from crashlab.world import World``: the old module's names, with a DeprecationWarning."""
    import importlib
    import warnings

    from pathlib import Path

    if name.startswith("__") or (Path(__file__).parent / f"{name}.py").exists():
        raise AttributeError(name)                 # a submodule: the import system loads it
    module = importlib.import_module(f"{__name__}.world")
    try:
        value = getattr(module, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    warnings.warn(f"crashlab.world.{name} moved to crashlab.world.world.{name}; the old name goes away in the "
                  "next release", DeprecationWarning, stacklevel=2)
    return value
