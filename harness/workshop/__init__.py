# layer faces: the command line, the pytest plugin, the workshop.
# may import: vocab, world, scenario, rules, checks, run, reference_impl, gallery, sandbox, integrate, runtimes, probe, report, cli (only floors below it).
