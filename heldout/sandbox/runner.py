"""Runs untrusted programs one at a time under limits, and says how each one ended.

Standard library only, no heldout imports: the subprocess backend runs this file inside the
jail of jail.py, the docker backend passes its source to `python3 -c` in the container. Its
settings (a JSON argument) carry the sources of its companions (codec.py, roles.py, world.py,
zygote.py, outcomes.py). It writes READY, then answers each job, a JSON line on stdin
({"source", "stdin", "timeout_s", "memory_mb"}, and "judge_bytes" for a judged program), with a
JSON line on stdout ({"status", "exit_code", "stdout_tail", "stderr_tail", "exec_s"}); the next
job comes after the reply.

A judged program (roles.py) is a candidate and a judge, started as two users of their own. The
judge's part (prompt, tests, entry point) never passes through the runner: once both are
started the runner writes SEND_JUDGE, and the judge reads the "judge_bytes" the host then
writes, moved from the runner's input with splice.

No program is a fork of the runner, whose memory holds earlier jobs and replies: before its
first job the runner forks the zygote (zygote.py), which never sees a job, and every program is
forked from the zygote, so each starts from the same pristine state (the modules programs
commonly import, already imported) as a fresh `python -I -S main.py` would, without paying
~12 ms of interpreter start-up. In that fork (`_become`): a session of its own, a world of its
own (world.py: an IPC namespace of its own where the runner is root, but for the trusted judge,
and a seccomp filter that refuses System V IPC, POSIX message queues and the keyrings), rlimits
on CPU, address space, file size, open files (and processes where its user is its own), an
environment of PATH,
locale, HOME and TMPDIR, stdin from memory, stdout and stderr into pipes of which the runner
keeps the tails. After it ends, everything it started is killed: every process of the program
users at once where they are users of their own (zygote.sweep), else its process group.
The forks share the zygote's hash seed: a program's set and dict-of-str orders are the same
from one run to the next.
"""

import builtins
import contextlib
import fcntl
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

# Imported once here rather than in every program (HumanEval's imports and their kin).
for _name in ("typing", "collections", "re", "math", "random", "copy", "string", "hashlib",
              "itertools", "functools", "heapq", "bisect", "threading"):
    with contextlib.suppress(ImportError):
        __import__(_name)

_MIB = 1024 * 1024
_MAX_FD = 1 << 16
READY = '{"ready": true}'
SEND_JUDGE = '{"send": "judge"}'
PROGRAM_FILE = "main.py"
# A judged candidate's channel: calls in on CALLS, answers out on ANSWERS (roles.py).
CALLS, ANSWERS, VERDICTS = 3, 4, 5
JUDGE_GRACE_S = 0.5


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
        _load_companions(settings["companions"])
        self.work_root = settings["work_root"]
        # A user of the programs' own: its rlimit on processes is exact.
        self.uid = settings.get("uid")
        # Inside a container a SIGKILL that we did not send is the memory cgroup's.
        self.oom_when_killed = settings.get("oom_when_killed", False)
        # The judge's user: another than the candidate's, so the candidate can neither signal
        # nor trace it nor read its memory.
        self.judge_uid = settings.get("judge_uid")
        self.env = settings["env"]
        self.nproc = settings.get("nproc")
        self.tail_bytes = settings.get("tail_bytes", 4096)
        self.max_output = settings.get("max_output_mb", 8) * _MIB
        self.max_file = settings.get("max_file_mb", 32) * _MIB
        self.open_files = settings.get("open_files", 64)
        # Root with CAP_SYS_ADMIN (a subprocess worker) can give each program IPC of its own.
        self.new_ipc = settings.get("new_ipc", False)
        self.zygote = None

    def serve(self, jobs=None, replies=None):
        jobs = jobs or sys.stdin.buffer
        self.replies = replies or sys.stdout
        # Before the first job: the zygote's memory is the same for every program it forks.
        world.become_subreaper()
        self.zygote = zygote.start(self._become)
        self._say(READY)  # the host waits for this before it sends a job
        while True:
            job = _next_job(jobs)
            if job is None:
                return
            self._say(json.dumps(self.run(job)))

    def _say(self, line):
        self.replies.write(line + "\n")
        self.replies.flush()

    def run(self, job):
        workdir = tempfile.mkdtemp(prefix="program-", dir=self.work_root)
        try:
            if self.uid is not None:
                os.chown(workdir, self.uid, self.uid)
            path = os.path.join(workdir, PROGRAM_FILE)
            with open(path, "w", encoding="utf-8") as file:
                file.write(job["source"])
            run = self._run_judged if "judge_bytes" in job else self._run_in
            return run(job, path, float(job["timeout_s"]), int(job["memory_mb"]))
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def _request(self, role, uid, path, timeout_s, memory_mb, **more):
        """What the zygote is told of a program: never its source, input or tests."""
        return {"role": role, "uid": uid, "path": path, "timeout_s": timeout_s,
                "memory_mb": memory_mb, **more}

    def _run_in(self, job, path, timeout_s, memory_mb):
        # Into the kernel at once, for the program's fd 0 alone.
        stdin = _memory_file(job.pop("stdin", "").encode("utf-8"))
        stdout_r, stdout_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        oom_kills = outcomes.oom_kills()
        started = time.monotonic()
        try:
            pid = self.zygote.spawn(self._request("main", self.uid, path, timeout_s, memory_mb),
                                    (stdin, stdout_w, stderr_w))
        finally:
            for fd in (stdin, stdout_w, stderr_w):
                os.close(fd)
        stdout, stderr = _Tail(self.tail_bytes), _Tail(self.tail_bytes)
        pipes = {stdout_r: stdout, stderr_r: stderr}
        ended = self._watch(pid, pipes, started + timeout_s)
        if ended != "exited":
            _kill_group(pid)
        wait_status = self.zygote.wait(pid)
        exit_code = os.waitstatus_to_exitcode(wait_status)
        exec_s = time.monotonic() - started
        self._sweep(pid)
        _drain(pipes)
        status, note = outcomes.program_status(ended, exit_code, stderr.text(),
                                            self._oom_killed(oom_kills, exit_code), timeout_s,
                                            self.max_output // _MIB)
        return {
            "status": status,
            "exit_code": exit_code,
            "stdout_tail": stdout.text(),
            "stderr_tail": stderr.text() + note,
            "exec_s": round(exec_s, 6),
        }

    def _become(self, request, fds):
        """In a fork of the zygote: take the request's user, limits and `fds` (0, 1, 2, ... in
        order), a world of its own (world.py), run the role, and never return."""
        status = 126
        try:
            os.setsid()
            # Above every target first, so that no target is overwritten before it is copied.
            high = [fcntl.fcntl(fd, fcntl.F_DUPFD, len(fds)) for fd in fds]
            for target, fd in enumerate(high):
                os.dup2(fd, target)
            os.closerange(len(fds), _MAX_FD)
            path = request["path"]
            os.chdir(os.path.dirname(path))
            # The candidate's own (~1 ms): the judge runs only the task's trusted text, under
            # the same filter, in the worker's namespace, where no process can make an object.
            if self.new_ipc and request["role"] != "judge":
                world.new_ipc_namespace()
            uid = request["uid"]
            if uid is not None:
                os.setgroups([])
                os.setgid(uid)
                os.setuid(uid)
            world.refuse_shared_state()
            self._limits(float(request["timeout_s"]), int(request["memory_mb"]))
            for name in RUNNER_MODULES:  # what only the runner uses leaves the fork's view
                sys.modules.pop(name, None)
            env = {**self.env, "HOME": os.path.dirname(path), "TMPDIR": os.path.dirname(path)}
            status = self._play(request, path, env)
        except BaseException as error:
            os.write(2, f"[heldout] the program could not start: {error!r}\n".encode())
        finally:
            os._exit(status)

    @staticmethod
    def _play(request, path, env):
        role = request["role"]
        if role == "judge":
            return roles.run_judge(int(request["judge_bytes"]), CALLS, ANSWERS, VERDICTS,
                                   float(request["deadline"]), codec)
        with open(path, encoding="utf-8") as file:
            source = file.read()
        if role == "candidate":
            return roles.run_candidate(source, path, env, CALLS, ANSWERS, codec)
        return roles.run_as_main(source, path, env)

    def _run_judged(self, job, path, timeout_s, memory_mb):
        """A candidate and a judge (roles.py); the judge's verdict is the program's result."""
        calls_r, calls_w = os.pipe()
        answers_r, answers_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        part_r, part_w = os.pipe()
        verdicts_r, verdicts_w = os.pipe()
        null = os.open(os.devnull, os.O_RDWR)
        oom_kills = outcomes.oom_kills()
        started = time.monotonic()
        deadline = started + timeout_s
        try:
            candidate = self.zygote.spawn(
                self._request("candidate", self.uid, path, timeout_s, memory_mb),
                (null, stdout_w, stderr_w, calls_r, answers_w))
            judge = self.zygote.spawn(
                self._request("judge", self.judge_uid, path, timeout_s, memory_mb,
                              judge_bytes=int(job["judge_bytes"]), deadline=deadline),
                (part_r, null, null, calls_w, answers_r, verdicts_w))
        finally:
            for fd in (calls_r, calls_w, answers_r, answers_w, stdout_w, stderr_w, part_r,
                       verdicts_w, null):
                os.close(fd)
        self._say(SEND_JUDGE)
        outcomes.pass_on(int(job["judge_bytes"]), part_w)
        stdout, stderr = _Tail(self.tail_bytes), _Tail(self.tail_bytes)
        pipes = {stdout_r: stdout, stderr_r: stderr}
        # The judge's own deadline is the program's: a moment more lets it say what timed out.
        ended = self._watch(judge, pipes, deadline + JUDGE_GRACE_S)
        # How the candidate ended counts only where it ended before our SIGKILL after the verdict.
        wait_status = self.zygote.wait(candidate, block=False)
        _kill_group(candidate)
        if ended != "exited":
            _kill_group(judge)
        if wait_status is None:
            self.zygote.wait(candidate)
        candidate_code = None if wait_status is None else os.waitstatus_to_exitcode(wait_status)
        self.zygote.wait(judge)
        exec_s = time.monotonic() - started
        self._sweep(candidate, judge)
        _drain(pipes)
        verdict = outcomes.read_verdict(verdicts_r)
        out_of_memory = self._oom_killed(oom_kills, candidate_code) or \
            stderr.text().rstrip().rpartition("\n")[2].startswith("MemoryError")
        status, reason = outcomes.judged_status(ended, verdict, out_of_memory, timeout_s)
        return {
            "status": status,
            "exit_code": 0 if status == "ok" else None,
            "stdout_tail": stdout.text(),
            "stderr_tail": stderr.text() + f"\n[heldout judge] {reason}",
            "exec_s": round(exec_s, 6),
        }

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
        for which, value in limits:
            resource.setrlimit(which, value)

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

    def _oom_killed(self, kills_before, exit_code):
        """Whether the memory cgroup killed the program: its own count says so where it can be
        read; else, inside a container, a SIGKILL we did not send is taken for it."""
        if kills_before is not None:
            return outcomes.oom_kills() > kills_before
        return exit_code == -signal.SIGKILL and self.oom_when_killed

    def _sweep(self, *pids):
        for pid in pids:
            _kill_group(pid)
        if self.uid is None:
            zygote.reap()
        else:
            # Programs run as users of their own: every process of theirs is a program's, and
            # one kill(-1) as both ends them all, forks in flight too.
            zygote.sweep(self.uid, self.judge_uid)


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


def _load_companions(sources):
    """codec.py and roles.py, from the sources the host sent (a container has no heldout)."""
    global codec, roles, world, zygote, outcomes
    for name, source in sources.items():
        module = types.ModuleType(name)
        module.__file__ = f"<{name}>"
        # Builtins of their own: a candidate that rebinds builtins.len in its process must
        # not break the code that carries its answers.
        module.__builtins__ = dict(vars(builtins))
        sys.modules[name] = module
        exec(compile(source, module.__file__, "exec"), module.__dict__)
    codec, roles, world, zygote, outcomes = (sys.modules[name] for name in COMPANIONS)


COMPANIONS = ("heldout_sandbox_codec", "heldout_sandbox_roles", "heldout_sandbox_world",
              "heldout_sandbox_zygote", "heldout_sandbox_outcomes")
RUNNER_MODULES = (__name__, "heldout_sandbox_zygote", "heldout_sandbox_outcomes")
codec = roles = world = zygote = outcomes = None


def main(argv):
    Runner(json.loads(argv[1])).serve()


if __name__ == "__main__":
    main(sys.argv)
