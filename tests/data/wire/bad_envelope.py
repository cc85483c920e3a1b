import json, sys
sys.stdin.readline()
print(json.dumps({"id": 1, "op": "info"}), flush=True)
sys.stdin.readline()
