#!/usr/bin/env python3
"""Runs a command (stdin and stdout passed through) and appends
"LABEL<TAB>peak RSS in MiB" of it (its largest process, as getrusage reports
for waited-for children) to FILE.

    maxrss.py FILE LABEL CMD [ARG...]
"""
import resource
import subprocess
import sys

path, label, cmd = sys.argv[1], sys.argv[2], sys.argv[3:]
rc = subprocess.call(cmd)
kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
with open(path, "a") as f:
    f.write(f"{label}\t{kib / 1024:.1f}\n")
sys.exit(rc)
