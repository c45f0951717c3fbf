"""The memory one read costs, measured in a child process of its own: Linux's high-water mark
of resident memory (VmHWM) is reset just before the read (/proc/self/clear_refs, "5"), so
neither the imports nor the parent count. (getrusage's ru_maxrss would not do: a child starts
with its parent's mark, so under pytest a read of 100 MiB can measure as 0.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
READERS = {
    "samples": "from heldout.episodes.samples import read_samples as READ",
    "rollouts": "from heldout.report.inputs import read_rollouts as READ",
    "answer": "import json\nREAD = lambda path: json.loads(bytearray(path.read_bytes()))",
}
CHILD = """
import sys
from pathlib import Path


def kib(field):
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith(field + ":"))


with open("/proc/self/clear_refs", "w") as refs:
    refs.write("5")
before = kib("VmRSS")
try:
    outcome = "read: " + format(len(READ(Path(sys.argv[1]))), ",")
except Exception as error:
    outcome = "refused: " + str(error).splitlines()[0]
print((kib("VmHWM") - before) // 1024, outcome)
"""


def peak_growth_mib(reader: str, path: Path) -> tuple[int, str]:
    """(MiB the read of `path` by READERS[reader] added at its peak, what it read or why it
    refused: "read: N" or "refused: the first line of the error")."""
    done = subprocess.run([sys.executable, "-c", READERS[reader] + CHILD, str(path)], cwd=REPO,
                          capture_output=True, text=True, check=True, timeout=900)
    mib, outcome = done.stdout.strip().split(" ", 1)
    return int(mib), outcome
