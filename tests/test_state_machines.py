"""The state machines are data (crashlab.vocab.model); as graphs (networkx) they must let every run
finish and every effect's knowledge settle: no state is a trap, none is unreachable."""
import networkx as nx
import pytest

from crashlab.vocab.model import (KNOWLEDGE_TRANSITIONS, RUN_TRANSITIONS, TERMINAL_STATES, UNRESOLVED_KNOWLEDGE,
                           Knowledge, RunState)


START = "(no entry yet)"


def graph(table) -> nx.DiGraph:
    g = nx.DiGraph()
    for src, dsts in table.items():
        src = START if src is None else src
        g.add_node(src)
        g.add_edges_from((src, dst) for dst in dsts)
    return g


RUN = graph(RUN_TRANSITIONS)
KNOW = graph(KNOWLEDGE_TRANSITIONS)


@pytest.mark.parametrize("state", [s for s in RunState if s not in TERMINAL_STATES])
def test_every_non_terminal_run_state_can_reach_a_terminal_one(state):
    assert nx.descendants(RUN, state) & TERMINAL_STATES, f"{state.value} can never finish"


def test_every_run_state_is_reachable_from_intake_and_terminal_states_are_final():
    assert set(RunState) - {RunState.INTAKE} <= nx.descendants(RUN, RunState.INTAKE)
    for state in TERMINAL_STATES:
        assert set(RUN.successors(state)) <= {state}, f"{state.value} has a way out"


@pytest.mark.parametrize("state", sorted(UNRESOLVED_KNOWLEDGE, key=lambda k: k.value))
def test_unresolved_knowledge_can_settle(state):
    settled = {k for k in Knowledge if k not in UNRESOLVED_KNOWLEDGE}
    assert nx.descendants(KNOW, state) & settled


def test_every_knowledge_state_is_reachable_and_a_first_entry_is_proposed():
    assert set(Knowledge) <= nx.descendants(KNOW, START)
    assert set(KNOW.successors(START)) == {Knowledge.PROPOSED}


def test_the_reachability_check_catches_a_trap():
    trapped = dict(RUN_TRANSITIONS)
    trapped[RunState.RECONCILING] = frozenset({RunState.RECONCILING})
    assert not nx.descendants(graph(trapped), RunState.RECONCILING) & TERMINAL_STATES
