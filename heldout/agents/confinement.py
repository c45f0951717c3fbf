"""What a `command` agent runs in: an environment without the test key, and, where Linux lets
an unprivileged process make namespaces, a view of the machine without heldout's secrets.

The agent runs as the user who runs heldout, who owns the key files. So the agent is started
through util-linux's `unshare` in a user and a mount namespace of its own, where:
- each secret path (heldout.environment.secret_paths: the user's heldout folder, a key file
  HELDOUT_TEST_KEY names) is covered, a folder by an empty read-only tmpfs, a file by
  /dev/null;
- those covers are made in an outer namespace and the agent runs in an inner one, so the kernel
  locks them (a mount a less privileged namespace inherits cannot be undone there): the agent,
  root of its namespace or not, cannot unmount them;
- no process outside its user namespace (a stage's, which holds the key in its memory; dvc's
  or a shell's, which may hold HELDOUT_TEST_KEY in its environment) is the agent's to read
  through /proc/PID (environment, memory, root, open files): the kernel lets a process reach
  another's only from the same user namespace or with CAP_SYS_PTRACE in the other's;
- the agent keeps its uid and gid, so its files are the user's as before.
Where namespaces are refused (no unshare, user namespaces off), the agent runs as before with
the key out of its environment only, and heldout says so once.
"""

from __future__ import annotations

import functools
import logging
import os
import shutil
import subprocess

from heldout.environment import secret_paths, untrusted_environment

log = logging.getLogger(__name__)

# Run by the outer namespace's root, as `sh -c _COVER heldout-cover UID GID PATH... -- ARGV...`:
# cover each path, then run the agent in an inner namespace as the user it was.
_COVER = """set -e; uid=$1; gid=$2; shift 2
while [ "$1" != -- ]; do
    if [ -d "$1" ]; then mount -t tmpfs -o ro,size=4k,mode=0500 heldout-hidden "$1"
    else mount --bind /dev/null "$1"; fi
    shift
done
shift
exec unshare --user --map-user="$uid" --map-group="$gid" -- "$@"
"""
# No PID namespace: that needs a process between heldout and the agent (unshare --fork), which
# would hold the agent's pipes open after the agent closed them; the user namespace already
# keeps every other process's /proc entries out of the agent's reach.
_OUTER = ("--user", "--map-root-user", "--mount")


@functools.cache
def namespaces_available() -> bool:
    """Whether `unshare` can make the namespaces here (checked once a process)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return False
    try:
        done = subprocess.run([unshare, *_OUTER, "--", "true"], capture_output=True, timeout=10,
                              env=untrusted_environment())
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def confined(argv: list[str], cwd: str) -> tuple[list[str], dict[str, str]]:
    """The argv and environment to start an agent's `argv` (run in `cwd`) with. Raises
    FileNotFoundError, as Popen would, when there is no such program: said before any
    namespace is made, so the agent's error names the agent."""
    program = argv[0] if not argv or os.sep in argv[0] else shutil.which(argv[0])
    if not argv or program is None or not os.access(os.path.join(cwd, program), os.X_OK):
        raise FileNotFoundError(f"no such program: {argv[0] if argv else '(empty command)'}")
    environment = untrusted_environment()
    if not namespaces_available():
        _say_unconfined()
        return argv, environment
    paths = [str(path) for path in secret_paths() if path.exists()]
    return ["unshare", *_OUTER, "--", "sh", "-c", _COVER, "heldout-cover", str(os.getuid()),
            str(os.getgid()), *paths, "--", *argv], environment


@functools.cache
def _say_unconfined() -> None:
    log.warning("heldout: user namespaces are not available here (util-linux unshare, "
                "kernel.unprivileged_userns_clone): command agents run without the test key in "
                "their environment, but can read %s", ", ".join(map(str, secret_paths())))

