import sys
from pathlib import Path

# tests/support.py and the adapters under tests/ are importable as top-level modules
sys.path.insert(0, str(Path(__file__).parent))
