"""The table of docs/agents/pydantic-ai.md: holds at the kill points, naive (tools inline, tools as
DBOS steps) against careful, under ``--runtime pydantic-ai-dbos``.

    python examples/agents/pydantic_ai/measure.py [--repeat=N] [--out=DIR]
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kill_points import measure  # noqa: E402  (examples/agents/kill_points.py)

if __name__ == "__main__":
    sys.exit(measure("pydantic-ai-dbos", Path(__file__).resolve().parent, sys.argv[1:]))
