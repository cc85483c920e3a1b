# layer run: running adapters: one run, workers, suites, sweeps, exploration, golden traces.
# may import: vocab, world, scenario, rules, checks (only floors below it).
"""Running adapters: one run (runner), loading and isolating adapters (drivers, warm, wire, jobs),
suites (conformance), sweeps, exploration and golden traces."""
