#!/usr/bin/env python3
"""The scripted bench task: STEPS steps of one bash call each, then the answer (a model script
for keel-mock-server). Used by bench/run.sh and bench/link-order.sh, so both
measure the same work. Usage: bench/task.py STEPS > script.yaml"""
import sys

n = int(sys.argv[1])
print("responses:")
for i in range(1, n + 1):
    print(f"  - text: \"Step {i}.\"")
    print(f"    tool_calls:")
    print(f"      - {{name: bash, arguments: {{command: \"echo step {i} >> log.txt && wc -l < log.txt\"}}}}")
print("  - text: \"All steps done.\"")
