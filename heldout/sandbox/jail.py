"""The subprocess backend's worker: make this mount namespace a jail, then serve jobs.

The host starts it as root inside fresh namespaces:
    unshare --net --mount --pid --ipc --uts --fork --kill-child --mount-proc \
        python -I -S jail.py SETTINGS
so it has no network (a loopback that is down), sees only its own processes, and may change
mounts that nobody outside sees. Before serving it:
- mounts a small private tmpfs on the work root (the programs' only writable place);
- covers each hidden directory (the project, home directories, /run) with an empty tmpfs,
  putting back only the interpreter's prefix where it lived inside one;
- makes every other mount read-only and nosuid.
Programs then run as a user of their own (runner.py), which can undo none of this.
Standard library only, like runner.py, and it too loads nothing programs must not have.
"""

import importlib.util
import json
import os
import shutil
import sys
import tempfile

MOUNT = shutil.which("mount", path="/usr/sbin:/usr/bin:/sbin:/bin") or "/bin/mount"
TMPFS_OPTIONS = "nosuid,nodev,mode=0755"


def _mount(*arguments):
    """util-linux mount(8), not mount(2) through ctypes: programs are forked from this process,
    and every module loaded here is reachable from them."""
    pid = os.posix_spawn(MOUNT, ["mount", *arguments], {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})
    _, wait_status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(wait_status) != 0:
        raise OSError(f"mount {' '.join(arguments)} failed")


def _within(path, folder):
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _outermost(paths, work_root):
    """Existing real paths, none inside another, never the root nor the work root's parent."""
    real = sorted({os.path.realpath(p) for p in paths if os.path.isdir(p)})
    chosen = []
    for path in real:
        if path == "/" or _within(work_root, path) or any(_within(path, c) for c in chosen):
            continue
        chosen.append(path)
    return chosen


def _hide(folder, keep, staging):
    """Cover `folder` with an empty read-only tmpfs, with the kept paths inside it put back."""
    kept = [path for path in keep if _within(path, folder)]
    staged = []
    for path in kept:
        stage = tempfile.mkdtemp(dir=staging)
        _mount("--rbind", path, stage)
        staged.append((stage, path))
    _mount("-t", "tmpfs", "-o", f"size=1m,{TMPFS_OPTIONS}", "tmpfs", folder)
    for stage, path in staged:
        os.makedirs(path, exist_ok=True)
        _mount("--move", stage, path)
        os.rmdir(stage)


def _mount_points():
    with open("/proc/self/mountinfo", encoding="utf-8") as mountinfo:
        for line in mountinfo:
            fields = line.split()
            # Spaces and the like are octal escapes in mountinfo.
            point = fields[4].encode().decode("unicode_escape")
            yield point, set(fields[5].split(","))


def _read_only_except(writable):
    for point, options in _mount_points():
        if point == writable:
            continue
        kept = [flag for flag in ("nodev", "noexec") if flag in options]
        try:
            _mount("-o", ",".join(["remount", "bind", "ro", "nosuid", *kept]), point)
        except OSError:
            # A mount point now under a hidden folder is out of reach: nothing to protect.
            if os.path.ismount(point):
                raise


def enter(work_root, work_size_mb, hidden, keep):
    _mount("-t", "tmpfs", "-o", f"size={work_size_mb}m,{TMPFS_OPTIONS}", "tmpfs", work_root)
    staging = os.path.join(work_root, ".staging")
    os.mkdir(staging, 0o700)
    keep = [os.path.realpath(path) for path in keep]
    for folder in _outermost(hidden, work_root):
        _hide(folder, keep, staging)
    os.rmdir(staging)
    _read_only_except(work_root)


def _load_runner():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runner.py")
    spec = importlib.util.spec_from_file_location("heldout_sandbox_runner", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv):
    settings = json.loads(argv[1])
    runner = _load_runner()  # before the project, where it lives, is hidden
    jail = settings["jail"]
    enter(settings["work_root"], jail["work_size_mb"], jail["hidden"], jail["keep"])
    runner.Runner(settings).serve()


if __name__ == "__main__":
    main(sys.argv)
