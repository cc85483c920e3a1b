# layer real: real processes, sockets and stores.
# may import: vocab, world, scenario, rules, checks, run, reference_impl, gallery, sandbox, integrate, runtimes (only floors below it).
"""``crashlab probe``: learn what a service really does with a key, by a bounded plan of requests."""
