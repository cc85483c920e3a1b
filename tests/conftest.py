import socket
import sys
from pathlib import Path

import pytest

# tests/support.py and the adapters under tests/ are importable as top-level modules
sys.path.insert(0, str(Path(__file__).parent))


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
