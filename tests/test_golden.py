"""Regression evidence: the reference adapter reproduces its archived golden traces."""
from crashlab.run.golden import GOLDEN_DIR, compare


def test_golden_traces_are_reproduced_byte_for_byte():
    assert (GOLDEN_DIR / "MANIFEST.json").exists(), "run python tools/golden.py --update"
    problems = compare()
    assert not problems, "\n".join(problems) + "\n(if the change is intended: python tools/golden.py --update)"


def test_compare_notices_a_changed_archive(tmp_path):
    import shutil

    work = tmp_path / "traces"
    shutil.copytree(GOLDEN_DIR, work)
    victim = sorted(work.glob("*.jsonl"))[0]
    lines = victim.read_text().splitlines()
    lines[3] = lines[3].replace('"t":', '"t":9', 1)
    victim.write_text("\n".join(lines) + "\n")
    problems = compare(work)
    assert problems == [f"{victim.stem}: trace differs from line 4 (archived {len(lines)} lines, now {len(lines)})"]
