import sys, time
sys.stdin.readline()
time.sleep(60)
