"""A command agent looking for the test key everywhere it can reach: its environment, the key
files by path, what its home holds, every /proc entry (environments, roots, open files, memory
maps) and its own open files. It prints, as its completion, a JSON list of where it found any
of the secrets given (reversed) on its command line; it also tries to undo what covers the key files."""

import json
import os
import stat
import subprocess
import sys

# Given reversed, so that its own command line does not hold what it looks for.
secrets = [s[::-1].encode() for s in sys.argv[1].split(",")]
paths = sys.argv[2].split(",")
found = []


def look(where, data):
    if any(secret in data for secret in secrets):
        found.append(where)


def read(path, limit=1 << 20):
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):  # a pipe or a terminal would block
            return b""
        with open(path, "rb") as file:
            return file.read(limit)
    except OSError:
        return b""


sys.stdin.read()
look("environ", "\n".join(f"{k}={v}" for k, v in os.environ.items()).encode())
for path in paths:
    subprocess.run(["umount", "-l", path], capture_output=True)
    look(f"path {path}", read(path))
    look(f"path {path}/test-key", read(os.path.join(path, "test-key")))
home = os.path.expanduser("~")
for top, _, files in os.walk(home):
    for name in files:
        look(f"home {top}/{name}", read(os.path.join(top, name)))
for pid in (p for p in os.listdir("/proc") if p.isdigit()):
    look(f"/proc/{pid}/environ", read(f"/proc/{pid}/environ"))
    look(f"/proc/{pid}/cmdline", read(f"/proc/{pid}/cmdline"))
    for path in paths:
        look(f"/proc/{pid}/root{path}", read(f"/proc/{pid}/root{path}"))
        look(f"/proc/{pid}/root{path}/test-key", read(f"/proc/{pid}/root{path}/test-key"))
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        fds = []
    for fd in fds:
        look(f"/proc/{pid}/fd/{fd}", read(f"/proc/{pid}/fd/{fd}"))
print(json.dumps(found))
