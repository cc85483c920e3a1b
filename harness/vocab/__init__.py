# layer vocab: states, tables, results, errors and file names: the trace vocabulary.
# may import: nothing of crashlab (only floors below it).
"""The trace vocabulary: run states and port calls, event kinds and their tables, results, errors,
file names, the scenario clock and a scenario's compiled form: what every other floor speaks."""
