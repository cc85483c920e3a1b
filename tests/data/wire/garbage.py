import sys
sys.stdin.readline()
print("hello, I am not JSON", flush=True)
sys.stdin.readline()
