# layer adapters: the reference adapter and the gallery of variants.
# may import: vocab, world, scenario, rules, checks, run, gallery (only floors below it).
"""The reference AR-08 v0.1.0 adapter: ``crashlab.reference_impl:ReferenceAdapter``.

Reading order (each module cites the chapter section it implements):

* ``matrix.py``      the recovery matrix as data; every failure is classified through it
* ``transitions.py`` the declared transitions, chosen from durable evidence after every step
* ``bootstrap.py``   the ten-step recovery bootstrap every worker runs first
* ``effects.py``     prepare / dispatch / reconcile / compensate through the effect ledger
* ``canonical.py``   versioned canonicalization: proposal hash, fingerprint, semantic key
* ``migrations.py``  deployment compatibility: replay, migrate, pin or stop
* ``record.py``      the durable run record and its two checkpoint layouts
* ``inbox.py``       event ordering, deduplication and dispositions
* ``packet.py``      the decision packet handed to an operator
* ``session.py``     one worker's ports, lease, checkpoint version and ledger mirror
* ``adapter.py``     the worker loop and the actions, including the truthful terminal
* ``behaviour.py``   the decisions a variant may replace (every default is the reference)
"""
from .adapter import ReferenceAdapter

__all__ = ["ReferenceAdapter"]
