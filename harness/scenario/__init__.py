# layer scenario: the scenario format: reading, validating, generating scenarios.
# may import: vocab, world (only floors below it).
"""Scenarios: the YAML format, its loader and the compiled, frozen form the world runs.

The public face of the scenario modules; each name lives in one of them:

- ``timefmt``: the scenario clock's notation (clock times, durations, ``format_time``);
- ``scenario.format``: the format's vocabulary (fields, event types, faults, profile knobs);
- ``vocab.compiled``: the compiled form (``Scenario``, ``RunSpec``, ``WorldEvent``, ``Rule``, ``Match``);
- ``scenario.yaml``: safe, bounded YAML with line numbers (``parse_yaml``) and the field reader;
- ``scenario.loader``: files, documents and library ids to a ``Scenario`` (``load_file``, ``library``);
- ``scenario.schema``: the JSON Schema and the library table generated from the format's tables.

The format is documented in docs/scenarios.md; ``schema_document()`` renders the same
rules as the JSON Schema shipped in harness/data/scenario.schema.json.
"""
from __future__ import annotations

from ..vocab.compiled import Match, Rule, RunSpec, Scenario, WorldEvent
from .format import (ANCHORS, APPROVAL_MODES, BOUNDARIES, CARD_FIELDS, COMPENSATION_AUTHORITY, DEFAULT_ENV,
                     DEFAULT_HORIZON_MS, DEFAULT_ORIGIN_MS, DELIVERY_FIELDS, DEPLOY_ALTERS, DISPOSITIONS,
                     EVENT_FIELDS, EVENT_TYPES, EVIDENCE_FORMS, EXPECT_FIELDS, EXPECT_RULE_FIELDS, FAULTS,
                     HISTORY_FIELDS, ID_PATTERN, INBOX_EVENTS, INVARIANT_PATTERN, KNOWLEDGE, MATCH_FIELDS,
                     PRIMARY_OPERATION, PROFILE_CHOICES, RESERVED_PAYLOAD_KEYS, RULE_ACTION, RULE_FIELDS, RUN_FIELDS,
                     RUN_STATES, RUNLESS_EVENTS, SEED_MAX, TAG_PATTERN, TOP_FIELDS, TRACE_KINDS, TRANSPORT_FAULTS,
                     VERDICTS)
from .loader import from_dict, library, library_dir, load_file, load_text, resolve
from .schema import SCHEMA_PATH, TABLE_BEGIN, TABLE_END, library_table, schema_document, schema_text
from .yaml import MAX_SCENARIO_BYTES, MAX_YAML_DEPTH, MAX_YAML_NODES, parse_yaml
from ..vocab.timefmt import CLOCK_HINT, DURATION_HINT, clock_ms, format_time, parse_duration, parse_time

__all__ = [
    # the compiled form
    "Match", "Rule", "RunSpec", "Scenario", "WorldEvent",
    # loading
    "from_dict", "library", "library_dir", "load_file", "load_text", "parse_yaml", "resolve",
    "MAX_SCENARIO_BYTES", "MAX_YAML_DEPTH", "MAX_YAML_NODES",
    # time
    "CLOCK_HINT", "DURATION_HINT", "clock_ms", "format_time", "parse_duration", "parse_time",
    # generated documents
    "SCHEMA_PATH", "TABLE_BEGIN", "TABLE_END", "library_table", "schema_document", "schema_text",
    # the vocabulary
    "ANCHORS", "APPROVAL_MODES", "BOUNDARIES", "CARD_FIELDS", "COMPENSATION_AUTHORITY", "DEFAULT_ENV",
    "DEFAULT_HORIZON_MS", "DEFAULT_ORIGIN_MS", "DELIVERY_FIELDS", "DEPLOY_ALTERS", "DISPOSITIONS", "EVENT_FIELDS",
    "EVENT_TYPES", "EVIDENCE_FORMS", "EXPECT_FIELDS", "EXPECT_RULE_FIELDS", "FAULTS", "HISTORY_FIELDS", "ID_PATTERN",
    "INBOX_EVENTS", "INVARIANT_PATTERN", "KNOWLEDGE", "MATCH_FIELDS", "PRIMARY_OPERATION", "PROFILE_CHOICES",
    "RESERVED_PAYLOAD_KEYS", "RULE_ACTION", "RULE_FIELDS", "RUN_FIELDS", "RUN_STATES", "RUNLESS_EVENTS", "SEED_MAX",
    "TAG_PATTERN", "TOP_FIELDS", "TRACE_KINDS", "TRANSPORT_FAULTS", "VERDICTS",
]
