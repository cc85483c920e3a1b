"""The reference AR-08 v0.1.0 adapter: ``reference_impl:ReferenceAdapter``."""
from .adapter import ReferenceAdapter

__all__ = ["ReferenceAdapter"]
