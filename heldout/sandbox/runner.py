"""Runs untrusted programs one at a time under limits, and says how each one ended.

Standard library only, no heldout imports: the subprocess backend runs this file as a
long-lived worker (inside the jail of jail.py), the docker backend passes its source to
`python3 -c` inside the container. Settings come as a JSON argument. The runner first writes
READY, then answers each job, one JSON line on stdin ({"source", "stdin", "timeout_s",
"memory_mb"}), with one JSON line on stdout ({"status", "exit_code", "stdout_tail",
"stderr_tail", "exec_s"}). The host sends the next job only after the reply, so the runner
never holds another program's input.

The runner is a pre-forked interpreter: started as `python -I -S`, it imports what programs
commonly import and never runs untrusted code itself; each program runs in a fork of it, so it
starts from the same pristine state as a fresh `python -I -S main.py` would, without paying
~12 ms of interpreter start-up. In that fork: a session of its own, a fresh work directory,
rlimits on CPU, address space, file size, open files (and processes where its user is its
own), an environment of PATH, locale, HOME and TMPDIR, stdin from memory, stdout and stderr
into pipes of which the runner keeps the tails. After it ends, everything it started is
killed: by its user (a user of its own), or by everything but this runner (inside a
container), else by its process group.

Every module and class the runner loads is reachable from the programs it forks, so it loads
nothing that they must not have (no ctypes, no subprocess). The forks of one runner share its
hash seed: a program's set and dict-of-str orders are the same from one run to the next.
"""

import atexit
import builtins
import contextlib
import io
import json
import math
import os
import resource
import selectors
import shutil
import signal
import sys
import tempfile
import time
import types

# Imported once here rather than in every program (HumanEval's imports, and their kin).
for _name in ("typing", "collections", "re", "math", "random", "copy", "string", "hashlib",
              "itertools", "functools", "heapq", "bisect", "threading"):
    with contextlib.suppress(ImportError):
        __import__(_name)

_MIB = 1024 * 1024
_MAX_FD = 1 << 16
READY = '{"ready": true}'
PROGRAM_FILE = "main.py"


class _Tail:
    """The last `size` bytes of a stream, and how many bytes it had."""

    def __init__(self, size):
        self.size = size
        self.data = b""
        self.total = 0

    def add(self, chunk):
        self.total += len(chunk)
        self.data = (self.data + chunk)[-self.size :]

    def text(self):
        return self.data.decode("utf-8", "replace")


class Runner:
    def __init__(self, settings):
        self.work_root = settings["work_root"]
        # A user of the programs' own: its rlimit on processes is exact, and killing every
        # process of that user after a program kills whatever it left behind.
        self.uid = settings.get("uid")
        # Inside a container every process but this runner belongs to the program.
        self.kill_all_after = settings.get("kill_all_after", False)
        # Inside a container a SIGKILL that we did not send is the memory cgroup's.
        self.oom_when_killed = settings.get("oom_when_killed", False)
        self.env = settings["env"]
        self.nproc = settings.get("nproc")
        self.tail_bytes = settings.get("tail_bytes", 4096)
        self.max_output = settings.get("max_output_mb", 8) * _MIB
        self.max_file = settings.get("max_file_mb", 32) * _MIB
        self.open_files = settings.get("open_files", 64)

    def serve(self, jobs=None, replies=None):
        jobs = jobs or sys.stdin.buffer
        replies = replies or sys.stdout
        replies.write(READY + "\n")  # the host waits for this before it sends a job
        replies.flush()
        while True:
            job = _next_job(jobs)
            if job is None:
                return
            replies.write(json.dumps(self.run(job)) + "\n")
            replies.flush()

    def run(self, job):
        workdir = tempfile.mkdtemp(prefix="program-", dir=self.work_root)
        try:
            if self.uid is not None:
                os.chown(workdir, self.uid, self.uid)
            return self._run_in(workdir, job)
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def _run_in(self, workdir, job):
        timeout_s = float(job["timeout_s"])
        limits = self._limits(timeout_s, int(job["memory_mb"]))
        path = os.path.join(workdir, PROGRAM_FILE)
        with open(path, "w", encoding="utf-8") as file:
            file.write(job["source"])
        # Into the kernel at once: a fork must find the program's input in no Python object.
        stdin = _memory_file(job.pop("stdin", "").encode("utf-8"))
        stdout_r, stdout_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        started = time.monotonic()
        try:
            pid = os.fork()
            if pid == 0:
                self._become_program(path, job["source"], limits, (stdin, stdout_w, stderr_w))
        finally:
            # The program's stdin is its fd 0 alone: a program that shares our user (in a
            # container) could otherwise read it again through /proc/<runner>/fd.
            for fd in (stdin, stdout_w, stderr_w):
                os.close(fd)
        stdout, stderr = _Tail(self.tail_bytes), _Tail(self.tail_bytes)
        pipes = {stdout_r: stdout, stderr_r: stderr}
        ended = self._watch(pid, pipes, started + timeout_s)
        if ended != "exited":
            _kill_group(pid)
        _, wait_status, _ = os.wait4(pid, 0)
        exit_code = os.waitstatus_to_exitcode(wait_status)
        exec_s = time.monotonic() - started
        self._sweep(pid)
        _drain(pipes)
        status, note = self._status(ended, exit_code, stderr, timeout_s)
        return {
            "status": status,
            "exit_code": exit_code,
            "stdout_tail": stdout.text(),
            "stderr_tail": stderr.text() + note,
            "exec_s": round(exec_s, 6),
        }

    def _become_program(self, path, source, limits, fds):
        """In the fork: take the program's identity and limits, run it, and never return."""
        status = 126
        try:
            os.setsid()
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
            os.closerange(3, _MAX_FD)
            os.chdir(os.path.dirname(path))
            if self.uid is not None:
                os.setgroups([])
                os.setgid(self.uid)
                os.setuid(self.uid)
            limits()
            env = {**self.env, "HOME": os.path.dirname(path), "TMPDIR": os.path.dirname(path)}
            status = _run_as_main(source, path, env)
        except BaseException as error:
            os.write(2, f"[heldout] the program could not start: {error!r}\n".encode())
        finally:
            os._exit(status)

    def _limits(self, timeout_s, memory_mb):
        cpu_s = math.ceil(timeout_s) + 1
        limits = [
            (resource.RLIMIT_CPU, (cpu_s, cpu_s + 1)),
            (resource.RLIMIT_AS, (memory_mb * _MIB,) * 2),
            (resource.RLIMIT_FSIZE, (self.max_file,) * 2),
            (resource.RLIMIT_NOFILE, (self.open_files,) * 2),
            (resource.RLIMIT_CORE, (0, 0)),
        ]
        if self.nproc is not None:
            limits.append((resource.RLIMIT_NPROC, (self.nproc,) * 2))

        def apply():
            for which, value in limits:
                resource.setrlimit(which, value)

        return apply

    def _watch(self, pid, pipes, deadline):
        """Collect output until the program exits ("exited"), its deadline ("timeout") or
        too much output ("output")."""
        exit_fd = os.pidfd_open(pid)
        try:
            with selectors.DefaultSelector() as selector:
                for fd, tail in pipes.items():
                    selector.register(fd, selectors.EVENT_READ, tail)
                selector.register(exit_fd, selectors.EVENT_READ, None)
                while True:
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        return "timeout"
                    for key, _ in selector.select(remaining):
                        if key.data is None:
                            return "exited"
                        chunk = os.read(key.fd, 65536)
                        if not chunk:
                            selector.unregister(key.fd)
                            continue
                        key.data.add(chunk)
                        if sum(tail.total for tail in pipes.values()) > self.max_output:
                            return "output"
        finally:
            os.close(exit_fd)

    def _sweep(self, pid):
        _kill_group(pid)
        if self.uid is not None:
            killer = os.fork()
            if killer == 0:
                try:
                    os.setuid(self.uid)
                    # The kernel allows no fork while it signals: one pass kills them all.
                    os.kill(-1, signal.SIGKILL)
                finally:
                    os._exit(0)
            os.waitpid(killer, 0)
        elif self.kill_all_after:
            with contextlib.suppress(ProcessLookupError):
                os.kill(-1, signal.SIGKILL)
        _reap_orphans()

    def _status(self, ended, exit_code, stderr, timeout_s):
        if ended == "timeout":
            return "timeout", f"\n[heldout] no exit within {timeout_s:g} s: killed"
        if ended == "output":
            limit = self.max_output // _MIB
            return "failed", f"\n[heldout] more than {limit} MiB of output: killed"
        if exit_code == 0:
            return "ok", ""
        if exit_code == -signal.SIGXCPU:
            return "timeout", "\n[heldout] CPU time limit reached"
        if exit_code == -signal.SIGKILL and self.oom_when_killed:
            return "oom", "\n[heldout] killed by the memory limit"
        last_line = stderr.text().rstrip().rpartition("\n")[2]
        if last_line.startswith("MemoryError"):
            return "oom", ""
        return "failed", ""


def _run_as_main(source, path, env):
    """Run `source` as `python -I -S path` would, in this (forked) interpreter: a new __main__,
    fresh standard streams, the program's environment; the exit status it would have had."""
    os.environ.clear()
    os.environ.update(env)
    sys.argv = [path]
    # The runner's stream objects stay referenced (never finalized): their fds are now ours.
    _runner_streams.extend((sys.stdin, sys.stdout, sys.stderr))
    sys.stdin = sys.__stdin__ = _text_stream(0, "r")
    sys.stdout = sys.__stdout__ = _text_stream(1, "w")
    sys.stderr = sys.__stderr__ = _text_stream(2, "w", errors="backslashreplace",
                                               line_buffering=True)
    sys.modules.pop(__name__, None)  # the runner's own module (it may be "__main__" itself)
    main = types.ModuleType("__main__")
    main.__file__ = path
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    try:
        exec(compile(source, path, "exec"), main.__dict__)
        status = 0
    except SystemExit as exit_request:
        status = _exit_status(exit_request.code)
    except BaseException as error:
        # The first traceback entry is this function's: the program's own start after it.
        traceback = error.__traceback__.tb_next if error.__traceback__ else None
        sys.excepthook(type(error), error, traceback)
        status = 1
    return _finish(status)


_runner_streams = []


def _text_stream(fd, mode, errors="strict", line_buffering=False):
    raw = io.FileIO(fd, mode, closefd=False)
    buffered = io.BufferedReader(raw) if mode == "r" else io.BufferedWriter(raw)
    return io.TextIOWrapper(buffered, encoding="utf-8", errors=errors,
                            line_buffering=line_buffering)


def _exit_status(code):
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    print(code, file=sys.stderr)
    return 1


def _finish(status):
    """What the interpreter does at exit: wait for threads, run atexit, flush the streams."""
    threading = sys.modules.get("threading")
    if threading is not None:
        threading._shutdown()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            status = status or 120  # as CPython does when stdout cannot be flushed at exit
    return status


def _next_job(jobs):
    """The next job, parsed here so that its raw line dies with this frame; None at the end."""
    line = jobs.readline()
    while line and not line.strip():
        line = jobs.readline()
    return json.loads(line) if line else None


def _memory_file(data):
    """A file descriptor whose content is `data`, on no file system: once the program has read
    it and closed it, it is gone."""
    fd = os.memfd_create("stdin")
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _kill_group(pid):
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _reap_orphans(within_s=2.0):
    """Collect the orphans re-parented to us (we are PID 1 of our namespace or container)."""
    give_up = time.monotonic() + within_s
    while time.monotonic() < give_up:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.001)


def _drain(pipes, within_s=0.5):
    """Read what was written before the end; a writer that escaped the sweep (where there is
    no sweep) must not keep us waiting."""
    give_up = time.monotonic() + within_s
    with selectors.DefaultSelector() as selector:
        for fd, tail in pipes.items():
            selector.register(fd, selectors.EVENT_READ, tail)
        while selector.get_map() and time.monotonic() < give_up:
            for key, _ in selector.select(give_up - time.monotonic()):
                chunk = os.read(key.fd, 65536)
                if chunk and key.data.total < 2 * _MIB:
                    key.data.add(chunk)
                else:
                    selector.unregister(key.fd)
    for fd in pipes:
        os.close(fd)


def main(argv):
    Runner(json.loads(argv[1])).serve()


if __name__ == "__main__":
    main(sys.argv)
