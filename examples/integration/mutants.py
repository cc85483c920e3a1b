"""A gallery of integration mutants: one-decision mistakes of the careful workers, each run by
``crashlab integrate`` and judged on the integration card.

Every mutant is a careful worker (examples/integration/worker.py, or a runtime example
examples/runtimes/NAME/careful.py, which runs the same worker's decisions) started with one
``--mistake=NAME`` flag: exactly one decision away from a worker that passes. :data:`MUTANTS` is the
registry: the mistake in one sentence, the AR-08 passage it violates, the scenario that exposes it,
the rules the chapter names for it (each must fail on the card) and the rules that should catch it
but do not on an integration run (``gaps``, with a note saying why).

    python examples/integration/mutants.py                  # every plain mutant once, a table
    python examples/integration/mutants.py --runs 3         # each three times: any flaky verdict shows
    python examples/integration/mutants.py --worker dbos    # the DBOS mutants (needs crashlab[dbos])
    python examples/integration/mutants.py --runs 3 --write docs/integration-mutants.md

``--write`` replaces the measured table in that page (between its markers): the rows of the mutants
run, and the page's own rows of the others (another worker's, not run this time). tests/test_integrate_mutants.py
runs the plain mutants in CI, and the runtime ones where the runtime is installed.
"""
from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "examples" / "integration" / "scenarios"
RUNTIME_SCENARIOS = ROOT / "examples" / "runtimes" / "scenarios"
WORKERS = ("plain", "dbos", "celery", "temporal", "restate")
#: how to get a runtime worker's runtime, for a test that skips
INSTALL = {"dbos": "pip install -e '.[dbos]'", "celery": "pip install -e '.[celery]' and a redis-server on PATH",
           "temporal": "pip install -e '.[temporal]'",
           "restate": "pip install -e '.[restate]' and npm install --prefix .runtimes/npm "
                      "@restatedev/restate-server-linux-x64@1.7.12"}
MODULES = {"dbos": "dbos", "celery": "celery", "temporal": "temporalio", "restate": "restate"}


@dataclass(frozen=True, slots=True, kw_only=True)
class Mutant:
    id: str                              # stable, kebab-case: WORKER-MISTAKE
    worker: str                          # plain | dbos | celery | temporal | restate
    mistake: str                         # the --mistake flag of the careful worker
    statement: str                       # the mistake in one sentence
    section: str                         # the AR-08 section the passage is in
    quote: str                           # the passage it violates, verbatim
    scenarios: tuple[str, ...]           # library ids or paths under the repository
    rules: tuple[str, ...]               # the rules the chapter names: each must fail on the card
    gaps: tuple[str, ...] = ()           # named rules an integration run does not fail (see note)
    note: str = ""

    def __post_init__(self) -> None:
        if self.worker not in WORKERS:
            raise ValueError(f"{self.id}: unknown worker {self.worker!r}")
        if not self.rules and not self.gaps:
            raise ValueError(f"{self.id}: names no rule")
        if set(self.rules) & set(self.gaps):
            raise ValueError(f"{self.id}: a rule is both required and a gap")

    @property
    def runtime(self) -> str | None:
        return None if self.worker == "plain" else self.worker

    def command(self, marker: str = "") -> str:
        """The worker command, the mistake planted (``marker``: an extra word a test finds leftovers by)."""
        if self.worker == "plain":
            cmd = f"{sys.executable} {ROOT / 'examples' / 'integration' / 'worker.py'} {{url}} {{db}}"
        else:
            cmd = f"{sys.executable} {ROOT / 'examples' / 'runtimes' / self.worker / 'careful.py'}"
        return f"{cmd} --mistake={self.mistake}" + (f" --out-marker={marker}" if marker else "")


def _p(mistake: str, statement: str, section: str, quote: str, scenario: str, rules: tuple[str, ...],
       **fields) -> Mutant:
    fields.setdefault("id", f"plain-{mistake.replace('_', '-')}")
    return Mutant(worker="plain", mistake=mistake, statement=statement,
                  section=section, quote=quote, scenarios=(scenario,), rules=rules, **fields)


_CLASSIFY = "Classify before retrying"
_ENVELOPE = "Build a failure envelope before a retry policy"
_SEMANTIC = "Specify semantic idempotency, not merely a key header"

PLAIN: tuple[Mutant, ...] = (
    _p("blind_retry", "After a 5xx the worker sends again at once, with no read.", _CLASSIFY,
       "A timeout after an effect is not failure evidence. Blind retry can duplicate a non-idempotent action.",
       "examples/integration/scenarios/keyless-502.yaml", ("EFF-01", "RETRY-01")),
    _p("closed_as_not_sent", "A connection that closed with no answer is taken as 'nothing was sent' and the "
       "request is sent again.", _ENVELOPE,
       "For TIMEOUT_BEFORE_SEND, the transport must prove that no bytes could have been accepted.",
       "matrix-weak-service", ("RETRY-01", "EFF-01")),
    _p("closed_as_not_sent", "A connection closed before anything reached the service is taken as 'nothing was "
       "sent' and the request is sent again: over loopback the worker cannot tell it from a close after sending.",
       _ENVELOPE, "For TIMEOUT_BEFORE_SEND, the transport must prove that no bytes could have been accepted.",
       "matrix-timeout-before-send", ("RETRY-01",), id="plain-closed-as-not-sent-before-send",
       note="The trace records the sandbox's timeout_before_send as definite, as the simulator's transport "
            "would tell an adapter; on an integration trace the checks take it as the closed connection "
            "the worker saw, which proves nothing was sent only after a read."),
    _p("sent_unknown_after", "SENT_UNKNOWN is appended only after the answer, so the ledger says PROPOSED while "
       "the request is out.", "Six crash points in one reservation",
       "After send, before remote commit is known. The ledger becomes SENT_UNKNOWN.",
       "matrix-ambiguous-effect", ("PREP-02",)),
    _p("no_lease", "The worker keeps no lease: paused past its lease, it resumes and writes as if it still "
       "owned the run.", "Checkpoint identity and ownership",
       "A worker that loses the lease stops issuing effects even if local work continues.",
       "examples/integration/scenarios/paused-past-lease.yaml", ("TERM-01", "OWN-03")),
    _p("early_negative_read", "The first empty read is trusted: a search before the late-delivery bound is "
       "taken as proof that nothing landed, and the request is sent again.", _SEMANTIC,
       "Without that support, a negative read may be only temporarily negative.",
       "matrix-late-arrival-search-only", ("RETRY-01", "REC-01", "EFF-01"),
       note="The service keeps no keys, so nothing collapses the late arrival: a resend whose only read came "
            "before the late-delivery bound is blind (RETRY-01, the automatic failure), and the read itself "
            "cannot prove absence (REC-01)."),
    _p("callback_confirms", "A completion callback in the inbox is recorded as the effect's confirmation.",
       "Late, duplicate, and reordered events",
       "A late tool callback for an old lease can contribute reconciliation evidence but cannot advance "
       "state directly.",
       "matrix-late-callback", ("LATE-01", "KNOW-02", "TRUTH-01"),
       note="matrix-late-callback's callback names no key: the CONFIRMED that follows it has no evidence at "
            "all, so it is the callback advancing state (LATE-01) and an exactly-once claim (KNOW-02, the "
            "automatic failure)."),
    _p("short_throttle_wait", "After a 429 the worker waits a fifth of its Retry-After before sending again.",
       _CLASSIFY, "Throttling uses coordinated backoff and seeded jitter.",
       "examples/integration/scenarios/long-throttle.yaml", ("CLS-02",)),
    _p("ignores_cancellation", "The worker reads the cancellation in its inbox and sends anyway.", _ENVELOPE,
       "A cancelled run is an instruction to stop new work, not an exception to swallow.",
       "examples/integration/scenarios/cancel-after-throttle.yaml", ("CANCEL-01", "CANCEL-02")),
    _p("no_cancel_check", "The worker reads its inbox once at the start and never again before a send.",
       _CLASSIFY, "Cancellation stops new work and reconciles anything in flight.",
       "examples/integration/scenarios/cancel-after-throttle.yaml", ("CANCEL-01",)),
    _p("tenantless_key", "The key is derived from the intent without its tenant and principal.", _SEMANTIC,
       "Omitting tenant risks cross-tenant collision.",
       "matrix-cross-tenant-key-collision", ("KEY-02",)),
    _p("attempt_key", "The key is derived from the intent and the worker's number, so a restarted worker sends "
       "under a key of its own.", _SEMANTIC, "Never derive it from an attempt number.",
       "t2-commit-before-record", ("KEY-01", "EFF-01", "RETRY-01")),
    _p("resend_after_restart", "A restarted worker that finds SENT_UNKNOWN sends again, with no read.",
       "Crash laboratory", "Crash after commit before local record reconciles by key.",
       "t2-commit-before-record", ("RETRY-01",)),
    _p("unrecorded_duplicates", "A duplicate delivery of an event is dropped without recording its disposition.",
       "Failure-injection workshop",
       "For duplicate input, deliver the same event twice. Expect one transition and an auditable duplicate "
       "disposition.", "t6-duplicate-input-event", ("EVT-02",),
       note="The careful worker lists every duplicate it saw in each later checkpoint's evidence (event id, "
            "inbox seq, 'duplicate: no transition'); this one writes the same checkpoints without them."),
    _p("no_approval_check", "The worker never asks the authority: it sends without a live approval bound to the "
       "proposal's hash.", "Recovery bootstrap procedure",
       "Validate identity, delegation, capability, and approval references.",
       "integration-approval-wait", ("AUTH-01",),
       note="Runs on the integration-authority suite: the approval scenarios apply the scenario's approval "
            "policy in the sandbox's authority port (docs/integration.md, \"The authority port\")."),
    _p("reads_old_schema", "After a deployment the next code version reads the old version's checkpoint as its own: "
       "no migration, no pin, and its checkpoints claim the new versions.", "Deployment compatibility",
       "Backward compatibility means more than successful JSON parsing",
       "handoff-2-confirmed-schema-change", ("MIG-01",),
       note="Run with the mistake as --worker, which --worker-next defaults to (it behaves as the careful worker until a "
            "deployment): the scenario's deploy event starts the next code version (docs/integration.md, "
            "\"Deployments\")."),
    _p("release_without_authority", "The worker compensates a cancelled confirmed hold without an approval of the "
       "release's own: the original's authority taken for the corrective action's.", "Compensation as forward recovery",
       "Do not infer corrective authority from original permission.",
       "integration-compensation-failure", ("AUTH-01",),
       note="T8's integration form: the release needs an approval of its own from the sandbox's authority port "
            "(docs/integration.md, \"Compensation\")."),
    _p("clock_lease", "The worker judges its lease by its own clock: it writes and sends, unfenced by the store, "
       "until its time.time() passes the expiry it set, so a worker whose clock runs slow resumes from a pause "
       "believing its lease still live.", "Design the checkpoint as a recovery contract",
       "The application cannot infer safety from its local clock alone.",
       "examples/integration/scenarios/slow-clock-past-lease.yaml", ("OWN-03", "TERM-01"),
       note="Its scenario runs the first worker's clock at a twentieth of real speed (worker_clocks, under "
            "libfaketime); on the real clock the same worker stops when it resumes "
            "(examples/integration/scenarios/paused-past-lease.yaml passes). OWN-01 is not judgeable on an "
            "integration run; OWN-03 is judged on the order of the store's rows."),
    _p("no_next_owner", "The run finishes with the effect unknown and names no next owner.",
       "A complete recovery review conversation",
       "It needs a state such as effect unknown, an accountable next owner, and a communication that does "
       "not promise absence or completion.",
       "matrix-weak-service", ("OWN-04",),
       note="The card judges OWN-04 on the finish row (its next_owner); the escalation half of OWN-04 stays "
            "a note, since a real worker never calls the operator port."),
)


def _r(runtime: str, mistake: str, statement: str, section: str, quote: str, scenario: str,
       rules: tuple[str, ...], **fields) -> Mutant:
    return Mutant(id=f"{runtime}-{mistake.replace('_', '-')}", worker=runtime, mistake=mistake,
                  statement=statement, section=section, quote=quote, scenarios=(scenario,), rules=rules, **fields)


_RUNTIME_SHAPE = {
    "dbos": "DBOS re-runs the dispatch step on recovery (it records a step only once it returns)",
    "celery": "Celery redelivers the task to the next worker (acks_late, task_reject_on_worker_lost)",
    "temporal": "Temporal retries the effect activity (it records an activity only once it returns)",
    "restate": "Restate re-runs the ctx.run block (its journal records one only once it returns)",
}


def _runtime(runtime: str) -> tuple[Mutant, ...]:
    shape = _RUNTIME_SHAPE[runtime]
    return (
        _r(runtime, "resend_after_restart", f"{shape}; the re-run finds SENT_UNKNOWN and sends again, with no read.",
           "Map runtimes and protocols without outsourcing semantics",
           "If it records completion only after an activity returns, handle commit-before-return ambiguity "
           "inside the activity adapter.",
           "examples/runtimes/scenarios/keyless-crash-after-commit.yaml", ("RETRY-01", "EFF-01")),
        _r(runtime, "sent_unknown_after", f"SENT_UNKNOWN is appended only after the answer, inside the unit "
           f"{runtime} runs: the ledger says PROPOSED while the request is out.",
           "Six crash points in one reservation",
           "After send, before remote commit is known. The ledger becomes SENT_UNKNOWN.",
           "matrix-ambiguous-effect", ("PREP-02",)),
        _r(runtime, "blind_retry", f"After a 5xx the step hands the effect back as not sent, and {runtime}'s "
           "retry sends it again with no read.", _CLASSIFY,
           "A timeout after an effect is not failure evidence. Blind retry can duplicate a non-idempotent action.",
           "examples/integration/scenarios/keyless-502.yaml", ("EFF-01", "RETRY-01")),
    )


MUTANTS: tuple[Mutant, ...] = PLAIN + tuple(m for rt in WORKERS[1:] for m in _runtime(rt))

#: asked of the gallery but not built, and why
NOT_BUILT = {
    "compensation as rollback (COMP-01)": "the careful workers compensate forward (integration-compensation-failure, "
                                          "in the suite), but no mistake that treats the release as undoing the "
                                          "original (its record dropped) is written yet",
}


def scenario_of(name: str):
    from crashlab.scenario.loader import load_file, resolve

    return load_file(ROOT / name) if name.endswith(".yaml") else resolve(name)


@dataclass(frozen=True, slots=True, kw_only=True)
class Measured:
    mutant: str
    scenario: str
    verdict: str
    failed: tuple[str, ...]
    missing: tuple[str, ...]           # named rules that did not fail
    seconds: float


def measure(m: Mutant, out: Path, *, marker: str = "", runtime=None, server=None) -> list[Measured]:
    """Run ``m`` on each of its scenarios once; ``runtime``/``server`` for a runtime worker."""
    from crashlab.integrate.run import integrate

    found = []
    for name in m.scenarios:
        sc = scenario_of(name)
        began = time.monotonic()
        deploys = any(ev.type == "deploy" for ev in sc.events)      # the next code version: the same mutant
        outcome = integrate(sc, worker=m.command(marker), out=out / m.id, runtime=runtime, server=server,
                            worker_next=m.command(marker) if deploys else None)
        failed = tuple(sorted(line.invariant for line in outcome.card.lines if line.status == "fail"))
        found.append(Measured(mutant=m.id, scenario=sc.id, verdict=outcome.card.verdict, failed=failed,
                              missing=tuple(r for r in m.rules if r not in failed),
                              seconds=round(time.monotonic() - began, 1)))
    return found


def table(results: dict[str, list[Measured]], mutants: tuple[Mutant, ...]) -> str:
    """The measured table, one row per mutant and scenario, over every repeated run."""
    rows = ["| mutant | `--mistake` | scenario | rules named | caught by (rules failed) | verdict | runs |",
            "|---|---|---|---|---|---|---|"]
    for m in mutants:
        runs = results.get(m.id)
        if not runs:
            continue
        for sc in dict.fromkeys(r.scenario for r in runs):
            mine = [r for r in runs if r.scenario == sc]
            verdicts = Counter(r.verdict for r in mine)
            failed = Counter(r.failed for r in mine)
            caught = "; ".join(f"{', '.join(f) or 'nothing'}" + (f" ({n}/{len(mine)})" if len(failed) > 1 else "")
                               for f, n in failed.most_common())
            named = "; ".join(filter(None, [", ".join(m.rules), f"not caught: {', '.join(m.gaps)}" if m.gaps else ""]))
            verdict = ", ".join(f"{v} {n}/{len(mine)}" for v, n in verdicts.most_common())
            rows.append(f"| `{m.id}` | `{m.mistake}` | `{sc}` | {named} | {caught} | {verdict} | {len(mine)} |")
    return "\n".join(rows) + "\n"


BEGIN, END = "<!-- the measured table -->", "<!-- end of the measured table -->"


def _rows(text: str) -> dict[str, list[str]]:
    """A measured table's rows by mutant id (its first column)."""
    found: dict[str, list[str]] = {}
    for row in text.splitlines():
        if row.startswith("| `"):
            found.setdefault(row.split("`", 2)[1], []).append(row)
    return found


def write(page: Path, text: str) -> None:
    """Replace the measured table in ``page``: the rows of the mutants measured now, and the page's
    own rows of every mutant not run this time (another worker's), in registry order."""
    doc = page.read_text()
    if BEGIN not in doc or END not in doc:
        raise SystemExit(f"{page}: no measured-table markers ({BEGIN} ... {END})")
    head, rest = doc.split(BEGIN, 1)
    old, tail = rest.split(END, 1)
    new, kept = _rows(text), _rows(old)
    rows = [row for m in MUTANTS for row in new.get(m.id, kept.get(m.id, []))]
    header = [row for row in text.splitlines() if row.startswith("|") and not row.startswith("| `")]
    page.write_text(head + BEGIN + "\n" + "\n".join(header + rows) + "\n" + END + tail)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="run the integration mutants and print the measured table")
    ap.add_argument("--worker", choices=WORKERS, action="append", help="plain (the default), or a runtime; repeatable")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--only", help="one mutant id")
    ap.add_argument("--out", type=Path, default=Path("/tmp/crashlab-mutants"))
    ap.add_argument("--write", type=Path, help="replace the measured table in this page")
    args = ap.parse_args(argv)
    workers = args.worker or ["plain"]
    chosen = tuple(m for m in MUTANTS if m.worker in workers and args.only in (None, m.id))
    if not chosen:
        raise SystemExit(f"--only: no {'/'.join(workers)} mutant {args.only!r}")
    results: dict[str, list[Measured]] = {}
    for name in workers:
        runtime = server = None
        if name != "plain":
            from crashlab.runtimes import load

            runtime = load(name)
            server = runtime.start(args.out / f"runtime-{name}")
        try:
            for n in range(args.runs):
                for m in (m for m in chosen if m.worker == name):
                    for r in measure(m, args.out / f"run{n}", runtime=runtime, server=server):
                        results.setdefault(m.id, []).append(r)
                        flag = "" if not r.missing else f"  NOT CAUGHT BY {', '.join(r.missing)}"
                        print(f"{r.mutant} @ {r.scenario}: {r.verdict} {', '.join(r.failed)} ({r.seconds}s){flag}",
                              file=sys.stderr)
        finally:
            if server is not None:
                server.stop()
    text = table(results, chosen)
    print(text, end="")
    if args.write:
        write(args.write, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
