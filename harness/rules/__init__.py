# layer rules: what a rule set says: its number, history and fixes.
# may import: vocab, world, scenario (only floors below it).
"""The rule set: its number and history, and the one-line fix of every check."""
