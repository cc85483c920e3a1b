"""Golden traces of the reference adapter (repository tooling, not shipped).

    python tools/golden.py               # compare traces/ with a fresh run: exit 1 naming every difference
    python tools/golden.py --update      # rewrite traces/ and traces/MANIFEST.json from the current reference
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from crashlab.run.drivers import DEFAULT_ADAPTER  # noqa: E402
from crashlab.run.golden import GOLDEN_DIR, compare, generate  # noqa: E402


def update(folder: Path = GOLDEN_DIR) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    manifest = {}
    for sid, (text, entry) in generate().items():
        (folder / entry["trace"]).write_text(text, encoding="utf-8")
        manifest[sid] = entry
    for stale in folder.glob("*.jsonl"):
        if stale.stem not in manifest:
            stale.unlink()
    path = folder / "MANIFEST.json"
    path.write_text(json.dumps({"adapter": DEFAULT_ADAPTER, "scenarios": manifest}, indent=2, sort_keys=True)
                    + "\n", encoding="utf-8")
    return path



def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python tools/golden.py", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--update", action="store_true", help="rewrite the archive from the current reference adapter")
    args = ap.parse_args(argv)
    if args.update:
        print(f"wrote {update()}")
        return 0
    problems = compare()
    for line in problems:
        print(line)
    print("golden traces: " + ("identical" if not problems else f"{len(problems)} difference(s)"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
