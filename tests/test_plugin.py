"""The pytest plugin, tested with pytester from a directory that has no tests of its own."""
import textwrap

import crashlab.run.conformance  # noqa: F401  (loaded once: pytester restores sys.modules between runs)

BROKEN = textwrap.dedent('''
    from crashlab.reference_impl import ReferenceAdapter

    class Declares:
        """Claims success without ever sending anything."""

        async def run(self, ports):
            await ports.run.finish("SUCCEEDED", reason="trust me")
''')


def test_conformance_suite_collected_from_an_empty_directory(pytester):
    result = pytester.runpytest("--crashlab-adapter=crashlab.reference_impl:ReferenceAdapter",
                                "--crashlab-scenario=t1-crash-before-dispatch",
                                "--crashlab-scenario=t2-commit-before-record", "-v")
    # both scenarios pass; the rubric over them cannot: they exercise no cancellation (D2) and more
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["crashlab: adapter crashlab.reference_impl:ReferenceAdapter, seed per scenario",
                                 "*t1-crash-before-dispatch PASSED*", "*crashlab::rubric FAILED*"])


def test_rubric_of_a_subset_names_the_points_not_exercised_and_never_keeps_them(pytester):
    result = pytester.runpytest("--crashlab-adapter=crashlab.reference_impl:ReferenceAdapter",
                                "--crashlab-scenario=t2-commit-before-record", "-v")
    result.assert_outcomes(passed=1, failed=1)
    assert result.ret == 1
    result.stdout.fnmatch_lines(["*t2-commit-before-record PASSED*", "*crashlab::rubric FAILED*",
                                 "rubric 17/20 (17/17 exercised points kept; 3 not exercised: C4, E5, D2)*unknown",
                                 "*not exercised: C4, E5, D2: no selected scenario had events for their rules*",
                                 "crashlab rubric: 17/20 (17/17 exercised points kept; 3 not exercised: C4, E5, D2), "
                                 "verdict unknown"])
    assert "20/20" not in result.stdout.str()


def test_rubric_of_a_subset_is_an_xfail_when_asked(pytester):
    result = pytester.runpytest("--crashlab-adapter=crashlab.reference_impl:ReferenceAdapter",
                                "--crashlab-scenario=t2-commit-before-record", "--crashlab-inconclusive=xfail")
    result.assert_outcomes(passed=1, xfailed=1)
    assert result.ret == 0


def test_rubric_of_a_failing_adapter_fails(pytester):
    pytester.makepyfile(broken_adapter=BROKEN)
    pytester.syspathinsert()
    result = pytester.runpytest("--crashlab-adapter=broken_adapter:Declares", "--crashlab-scenario=t2-commit-before-record",
                                "--crashlab-inconclusive=xfail")
    result.assert_outcomes(failed=2)   # the scenario, and the rubric (a lost point is no xfail)
    result.stdout.fnmatch_lines(["*verdict fail*", "lost: *D4 unknown stays unknown, with a next owner*"])


def test_failure_names_invariant_evidence_and_repro(pytester):
    pytester.makepyfile(broken_adapter=BROKEN)
    pytester.syspathinsert()
    result = pytester.runpytest("--crashlab-adapter=broken_adapter:Declares",
                                "--crashlab-scenario=t2-commit-before-record")
    result.assert_outcomes(failed=2)    # the scenario, and the rubric it costs points of
    result.stdout.fnmatch_lines(["*scenario t2-commit-before-record: fail*",
                                 "*TRUTH-02*[[]evidence #*",
                                 "*repro: crashlab run t2-commit-before-record --adapter broken_adapter:Declares --seed*"])


def test_tag_filter_and_seed_override(pytester):
    result = pytester.runpytest("--crashlab-adapter=crashlab.reference_impl:ReferenceAdapter", "--crashlab-tag=seed-000",
                                "--crashlab-seed=5", "-v")
    result.assert_outcomes(passed=2, failed=1)   # the rubric: two scenarios do not exercise every point
    result.stdout.fnmatch_lines(["crashlab: adapter crashlab.reference_impl:ReferenceAdapter, seed 5"])


def test_users_own_scenario_files_are_collected(pytester):
    pytester.makefile(".crashlab.yaml", mine=textwrap.dedent('''
        id: my-own
        title: my own scenario
        runs:
          - intent: {tenant: T-1, incident: I-9, part: P-1, slot: S-1, technician: TECH-1, quantity: 1,
                     principal: U-1}
        faults:
          - match: {port: reservation, op: reserve, nth: 1}
            fault: lost_response
        expect:
          dispositions: [SUCCEEDED]
          remote_effects: 1
    '''))
    result = pytester.runpytest("-v")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*mine.crashlab.yaml::my-own PASSED*"])


def test_fixture_runs_a_scenario_against_an_adapter(pytester):
    pytester.makepyfile(broken_adapter=BROKEN)
    pytester.makepyfile(test_mine=textwrap.dedent('''
        import pytest

        def test_reference_passes(crashlab):
            result = crashlab.check("t6-duplicate-input-event")
            assert result.verdict == "pass"

        def test_broken_is_caught(crashlab):
            result = crashlab.run("t2-commit-before-record", adapter="broken_adapter:Declares")
            assert result.verdict == "fail"
            with pytest.raises(AssertionError, match="TRUTH-02"):
                crashlab.check("t2-commit-before-record", adapter="broken_adapter:Declares")
    '''))
    pytester.syspathinsert()
    result = pytester.runpytest()
    result.assert_outcomes(passed=2)


def test_crash_points_on_request(pytester):
    result = pytester.runpytest("--crashlab-adapter=crashlab.reference_impl:ReferenceAdapter",
                                "--crashlab-scenario=matrix-validation-failure", "--crashlab-crash-points", "-q")
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed", 0) == 1   # only crashlab::rubric: one scenario does not exercise every point
    result.stdout.fnmatch_lines(["FAILED *crashlab::rubric*"])
    assert outcomes["passed"] > 10  # the scenario itself plus before/after every port call


def test_bad_adapter_spec_is_a_usage_error(pytester):
    result = pytester.runpytest("--crashlab-adapter=nosuchmodule:X")
    assert result.ret == 4  # pytest's usage-error exit code
    result.stderr.fnmatch_lines(["*no module named 'nosuchmodule'*"])
