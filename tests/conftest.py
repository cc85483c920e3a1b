import os
import socket
import sys
from pathlib import Path

import pytest

# tests/support.py and the adapters under tests/ are importable as top-level modules
sys.path.insert(0, str(Path(__file__).parent))

# The adapters under tests/ are test doubles that tests set up in this process (a class attribute, a
# module-level script) for worker processes forked from it to use; under the default isolation a
# Python adapter is imported afresh in namespaces and would not see that. So the suite runs adapters
# in worker processes unless a test chooses: the isolation tests (tests/test_isolation*.py, the
# workshop's) set the mode they test, the default (`auto`) included.
os.environ.setdefault("CRASHLAB_ISOLATION", "process")


@pytest.fixture
def serve():
    """Start sandboxes (``serve(scenario, scale=100.0)``) and stop them after the test, checking
    that nothing listens on their ports any more."""
    from crashlab.sandbox import Sandbox

    started = []

    def start(sc, scale=100.0):
        sb = Sandbox(sc, time_scale=scale)
        sb.start()
        started.append(sb)
        return sb
    yield start
    for sb in started:
        port = sb.httpd.server_address[1]
        sb.stop()
        with pytest.raises(OSError):   # nothing listens any more
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
