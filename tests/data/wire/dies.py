import json, sys
sys.stdin.readline()
print(json.dumps({"id": 1, "port": "run", "op": "info", "args": {}}), flush=True)
sys.stdin.readline()
print("fatal: cannot continue", file=sys.stderr, flush=True)
sys.exit(7)
