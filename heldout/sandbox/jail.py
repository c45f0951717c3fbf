"""The subprocess backend's worker: give this mount namespace a root of its own, then serve jobs.

The host starts it as root inside fresh namespaces:
    unshare --net --mount --pid --ipc --uts --fork --kill-child --mount-proc \
        python -I -S jail.py SETTINGS
so it has no network (a loopback that is down), sees only its own processes, and may change
mounts that nobody outside sees. Before serving it builds a new root, an ALLOW-list: a small
read-only tmpfs holding only
- /usr, and /bin, /sbin, /lib, /lib64, /lib32 where they are directories (where they are
  symlinks, as on merged-/usr systems, the same symlinks);
- the interpreter's prefix (the real sys.base_prefix, e.g. a pyenv version under /root), its
  executable, and the shared libraries `ldd` says it needs, where they lie outside the above;
- /dev/null, zero, full, random and urandom (each bound onto an empty file), and /dev/fd,
  stdin, stdout and stderr (symlinks into /proc/self/fd);
- a fresh /proc of this PID namespace, in which a user sees only its own processes;
- an empty /tmp, and the work root: a small private writable tmpfs, the programs' only
  writable place (where the work root is /tmp, that tmpfs is /tmp).
Every bind mount is read-only, nosuid and nodev (the device nodes are not nodev: they are
devices). No /etc: `python -I -S` needs nothing from it; without /etc/localtime programs' local
time is UTC (the same on every machine), and the dynamic loader finds the system's libraries in
its default folders. Folders the settings call hidden are, where they lie inside this allow-list
(anywhere else nothing is visible anyway), covered with empty read-only tmpfs, the interpreter's
files put back. Then pivot_root(8) makes the new root this namespace's root and the old one is
detached: no path, `..` from a chroot or mount table entry leads back to it.
Programs then run as a user of their own (runner.py), which can undo none of this: every mount
of the namespace is locked for them, and a user namespace they might create would find the same
root and mounts it cannot unmount.
Standard library only, like runner.py, and it too loads nothing programs must not have: tools
(mount, umount, pivot_root, ldd) are util-linux and libc programs run through os.posix_spawn.
"""

import importlib.util
import json
import os
import shutil
import sys

TOOLS = "/usr/sbin:/usr/bin:/sbin:/bin"
MOUNT = shutil.which("mount", path=TOOLS) or "/bin/mount"
UMOUNT = shutil.which("umount", path=TOOLS) or "/bin/umount"
PIVOT_ROOT = shutil.which("pivot_root", path=TOOLS) or "/sbin/pivot_root"
LDD = shutil.which("ldd", path=TOOLS)

# Where the new root is put together: any folder does, as the tmpfs mounted on it is seen only
# in this namespace, and this one exists everywhere.
BUILD = "/tmp"
SYSTEM = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32")
DEVICES = ("null", "zero", "full", "random", "urandom")
DEVICE_LINKS = {
    "fd": "/proc/self/fd",
    "stdin": "/proc/self/fd/0",
    "stdout": "/proc/self/fd/1",
    "stderr": "/proc/self/fd/2",
}
READ_ONLY = "ro,nosuid,nodev"
EMPTY = "/.empty"  # what covers a hidden file (bound, then unlinked)
TMPFS = "nosuid,nodev,mode=0755"


def _spawn(tool, *arguments, stdout=None):
    """Run a tool to its end; its exit code. Not mount(2) through ctypes: programs are forked
    from this process, and every module loaded here is reachable from them."""
    actions = [] if stdout is None else [(os.POSIX_SPAWN_DUP2, stdout, 1)]
    pid = os.posix_spawn(
        tool, [os.path.basename(tool), *arguments], {"PATH": TOOLS}, file_actions=actions
    )
    if stdout is not None:
        os.close(stdout)
    _, wait_status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(wait_status)


def _run(tool, *arguments):
    if _spawn(tool, *arguments) != 0:
        raise OSError(f"{os.path.basename(tool)} {' '.join(arguments)} failed")


def _mount(*arguments):
    _run(MOUNT, *arguments)


def _within(path, folder):
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def _outermost(paths):
    """The paths (real, existing) none of the others contains."""
    chosen = []
    for path in sorted(set(paths)):
        if os.path.exists(path) and not any(_within(path, c) for c in chosen):
            chosen.append(path)
    return chosen


def _shared_libraries(executable):
    """The files `ldd` says `executable` loads (none if it cannot tell)."""
    if LDD is None:
        return []
    read, write = os.pipe()
    with os.fdopen(read, encoding="utf-8", errors="replace") as output:
        try:
            code = _spawn(LDD, executable, stdout=write)
        except OSError:
            os.close(write)
            return []
        lines = output.read().splitlines()
    if code != 0:
        return []
    found = []
    for line in lines:
        # "libx.so.1 => /path/libx.so.1 (0x...)", "/lib64/ld-linux-x86-64.so.2 (0x...)"
        words = line.partition("=>")[2].split() or line.split()
        if words and words[0].startswith("/"):
            found.append(words[0])
    return found


class _NewRoot:
    """The allow-list, put together under `top` before it becomes the root."""

    def __init__(self, top):
        self.top = top
        self.shown = []  # the real host paths bound in, none inside another

    def inside(self, path):
        return self.top + path

    def visible(self, path):
        return any(_within(path, shown) for shown in self.shown)

    def bind(self, source, options=READ_ONLY):
        """Bind a host folder or file at the same path inside."""
        target = self.inside(source)
        if os.path.isdir(source):
            os.makedirs(target, exist_ok=True)
        else:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "a"):
                pass
        _mount("--bind", "-o", options, source, target)

    def show(self, path):
        """Make `path` (any kind) visible at the same place, once: its real file or folder
        bound in, and a symlink where it is reached through one."""
        real = os.path.realpath(path)
        if not os.path.exists(real):
            return
        if not self.visible(real):
            self.bind(real)
            self.shown.append(real)
        if path != real and not os.path.lexists(self.inside(path)):
            os.makedirs(os.path.dirname(self.inside(path)), exist_ok=True)
            os.symlink(real, self.inside(path))

    def hide(self, path, needs, links):
        """Cover a visible folder or file with an empty one; the `needs` (real paths) and
        `links` (symlinks to them) inside it put back."""
        target = self.inside(path)
        if not os.path.isdir(target):
            with open(self.inside(EMPTY), "a"):
                pass
            _mount("--bind", "-o", READ_ONLY, self.inside(EMPTY), target)
            return
        _mount("-t", "tmpfs", "-o", f"size=1m,{TMPFS}", "tmpfs", target)
        for need in _outermost(need for need in needs if _within(need, path)):
            self.bind(need)
        for link in links:
            if _within(link, path) and os.path.islink(link):
                os.makedirs(os.path.dirname(self.inside(link)), exist_ok=True)
                os.symlink(os.readlink(link), self.inside(link))
        _mount("-o", f"remount,bind,{READ_ONLY}", target)


def _interpreter():
    """The real paths this interpreter needs (prefix, executable, shared libraries), and the
    paths it is known by (sys.executable may be a symlink)."""
    executable = os.path.realpath(sys.executable)
    needs = [os.path.realpath(sys.base_prefix), os.path.realpath(sys.base_exec_prefix)]
    names = [sys.executable, executable]
    if not any(_within(executable, folder) for folder in SYSTEM):
        # Its libraries lie outside /usr and /lib only if it does: ask ldd then alone.
        names += _shared_libraries(executable)
    return needs, names


def _build(top, work_root, work_size_mb, hidden):
    _mount("-t", "tmpfs", "-o", f"size=1m,{TMPFS}", "tmpfs", top)
    root = _NewRoot(top)
    for path in SYSTEM:
        if os.path.islink(path):
            os.symlink(os.readlink(path), root.inside(path))
        elif os.path.isdir(path):
            root.show(path)
    os.makedirs(root.inside("/tmp"), 0o755, exist_ok=True)
    os.makedirs(root.inside(work_root), 0o755, exist_ok=True)
    _mount("-t", "tmpfs", "-o", f"size={work_size_mb}m,{TMPFS}", "tmpfs", root.inside(work_root))
    # After the work root, which would otherwise cover an interpreter living under /tmp.
    needs, names = _interpreter()
    for path in (*needs, *names):
        root.show(path)
    kept = [os.path.realpath(path) for path in (*needs, *names)]

    os.mkdir(root.inside("/dev"), 0o755)
    for name in DEVICES:
        if os.path.exists(f"/dev/{name}"):
            # Read-only and nosuid, not nodev: nodev would make the device unusable. Writing
            # to a device through a read-only mount still works.
            root.bind(f"/dev/{name}", "ro,nosuid,noexec")
    for name, target in DEVICE_LINKS.items():
        os.symlink(target, root.inside(f"/dev/{name}"))
    os.mkdir(root.inside("/proc"), 0o555)
    # Users see only their own processes: a program, not the runner's nor another user's.
    _mount("-t", "proc", "-o", "nosuid,nodev,noexec,hidepid=2", "proc", root.inside("/proc"))

    for path in _outermost(os.path.realpath(path) for path in hidden):
        if path != "/" and root.visible(path) and os.path.lexists(root.inside(path)):
            root.hide(path, kept, names)
    if os.path.exists(root.inside(EMPTY)):
        os.unlink(root.inside(EMPTY))  # the files it covers hold it
    _mount("-o", f"remount,bind,{READ_ONLY}", top)


def enter(work_root, work_size_mb, hidden=()):
    """Make the allow-list this mount namespace's root, for this process and whatever it
    forks."""
    _build(BUILD, work_root, work_size_mb, hidden)
    # pivot_root(".", "."): the old root ends up on top of the new one, whence it is detached.
    os.chdir(BUILD)
    _run(PIVOT_ROOT, ".", ".")
    _run(UMOUNT, "-l", ".")
    os.chdir("/")
    with open("/proc/self/mountinfo", encoding="utf-8") as mountinfo:
        if any(line.split()[4] == "/" and " - tmpfs " not in line for line in mountinfo):
            raise OSError("the old root is still mounted")


def _load_runner():
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "runner.py")
    spec = importlib.util.spec_from_file_location("heldout_sandbox_runner", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main(argv):
    settings = json.loads(argv[1])
    runner = _load_runner()  # before the new root, where the project is not
    jail = settings["jail"]
    enter(settings["work_root"], jail["work_size_mb"], jail.get("hidden", ()))
    runner.Runner(settings).serve()


if __name__ == "__main__":
    main(sys.argv)
