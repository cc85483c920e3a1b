"""The docs a stranger reads are derived from crashlab's own tables and kept current."""
import subprocess
import sys
from pathlib import Path

from crashlab.vocab.model import (CHECKPOINT_FIELD_MEANINGS, CHECKPOINT_FIELDS, EFFECT_ENTRY_FIELD_MEANINGS,
                           EFFECT_ENTRY_FIELDS)

ROOT = Path(__file__).resolve().parent.parent


def test_every_schema_field_has_a_meaning():
    assert set(CHECKPOINT_FIELD_MEANINGS) == {f.path for f in CHECKPOINT_FIELDS}
    assert set(EFFECT_ENTRY_FIELD_MEANINGS) == {f.path for f in EFFECT_ENTRY_FIELDS}


def test_the_generated_field_tables_are_current():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "docgen.py"), "--check"], capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stderr


def test_the_adapter_docs_never_send_the_reader_to_a_source_file():
    for name in ("adapters.md", "protocol.md"):
        text = (ROOT / "docs" / name).read_text(encoding="utf-8")
        for marker in ("harness/", "crashlab.vocab.model", "reference_impl/", ".py)"):
            assert marker not in text, f"docs/{name} points at source: {marker}"
