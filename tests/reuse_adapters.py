"""An adapter that tries to carry state from one worker's process to the next (tests/test_reused_processes.py).

Each worker records what it can see of earlier workers (a module global, a file in its TMPDIR)
and its process ids in the file named by CRASHLAB_TEST_REUSE_OUT, then leaves both behind and runs
as the reference adapter does."""
from __future__ import annotations

import json
import os
import tempfile

from crashlab.reference_impl import ReferenceAdapter

OUT_VAR = "CRASHLAB_TEST_REUSE_OUT"
LEFT: list[int] = []


class CarriesState(ReferenceAdapter):
    async def run(self, ports):
        left_file = os.path.join(tempfile.gettempdir(), "left-behind")
        with open(os.environ[OUT_VAR], "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"pid": os.getpid(), "server": os.getppid(), "memory": len(LEFT),
                                 "file": os.path.exists(left_file)}) + "\n")
        LEFT.append(1)
        with open(left_file, "w", encoding="utf-8") as fh:
            fh.write("a worker was here")
        return await super().run(ports)
