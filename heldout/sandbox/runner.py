"""Runs untrusted programs one at a time under limits, and says how each one ended.

Standard library only, no heldout imports: the subprocess backend runs this file inside the
jail of jail.py, the docker backend passes its source to `python3 -c` in the container. Its
settings (a JSON argument) carry the sources of its companions (codec.py, roles.py, world.py,
zygote.py, outcomes.py, watch.py). It writes READY, then answers each job, a JSON line on stdin
({"source", "stdin", "timeout_s", "wall_s", "memory_mb"}, and "judge_bytes" for a judged
program), with a JSON line on stdout ({"status", "exit_code", "stdout_tail", "stderr_tail",
"exec_s", "cpu_s"}); the next job comes after the reply.

`timeout_s` is CPU time (watch.py): the plain program's or the candidate's, over all its
processes and threads, and the judge's own, apart; `wall_s` is the wall-clock backstop, several
times longer, which ends a program that sleeps or blocks. Either ends the program as `timeout`,
each with its reason. `exec_s` is the program's wall-clock time, `cpu_s` its CPU time. When the
candidate has used its CPU the runner says so to the judge (on the judge's fd SPENT) before it
ends the candidate, and the judge's pending call, and every later one, fails as a timeout.

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
# A judged candidate's channel: calls in on CALLS, answers out on ANSWERS (roles.py); the
# judge's verdict goes out on VERDICTS, and the runner's word that the candidate's CPU is
# spent comes in on SPENT.
CALLS, ANSWERS, VERDICTS, SPENT = 3, 4, 5, 6
JUDGE_GRACE_S = 0.5


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
            clock = outcomes.Clock(float(job["timeout_s"]), float(job["wall_s"]))
            return run(job, path, clock, int(job["memory_mb"]))
        finally:
            shutil.rmtree(workdir, ignore_errors=True)

    def _request(self, role, uid, path, timeout_s, memory_mb, **more):
        """What the zygote is told of a program: never its source, input or tests."""
        return {"role": role, "uid": uid, "path": path, "timeout_s": timeout_s,
                "memory_mb": memory_mb, **more}

    def _meter(self, clock, uid, pid):
        """The CPU meter of the program started as `pid`: every process of its user where the
        user is the program's own, else of its session (its own: `_become`)."""
        return watch.Meter(clock.timeout_s, uid=uid, session=None if uid is not None else pid)

    def _run_in(self, job, path, clock, memory_mb):
        # Into the kernel at once, for the program's fd 0 alone.
        stdin = _memory_file(job.pop("stdin", "").encode("utf-8"))
        stdout_r, stdout_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        oom_kills = outcomes.oom_kills()
        started = time.monotonic()
        try:
            pid = self.zygote.spawn(
                self._request("main", self.uid, path, clock.timeout_s, memory_mb),
                (stdin, stdout_w, stderr_w))
        finally:
            for fd in (stdin, stdout_w, stderr_w):
                os.close(fd)
        stdout, stderr = watch.Tail(self.tail_bytes), watch.Tail(self.tail_bytes)
        pipes = {stdout_r: stdout, stderr_r: stderr}
        program = self._meter(clock, self.uid, pid)
        ended, _ = watch.watch(pid, pipes, [program], started + clock.wall_s, self.max_output)
        # Read before the program is collected: until then an ended process still counts.
        clock = clock._replace(cpu_s=program.read())
        if ended != "exited":
            _kill_group(pid)
        wait_status = self.zygote.wait(pid)
        exit_code = os.waitstatus_to_exitcode(wait_status)
        exec_s = time.monotonic() - started
        self._sweep(pid)
        watch.drain(pipes)
        status, note = outcomes.program_status(ended, exit_code, stderr.text(),
                                               self._oom_killed(oom_kills, exit_code), clock,
                                               self.max_output // _MIB)
        return _reply(status, exit_code, stdout.text(), stderr.text() + note, exec_s,
                      clock.cpu_s)

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
            limits = roles.Limits(float(request["deadline"]), float(request["wall_s"]), SPENT)
            return roles.run_judge(int(request["judge_bytes"]), CALLS, ANSWERS, VERDICTS,
                                   limits, codec)
        with open(path, encoding="utf-8") as file:
            source = file.read()
        if role == "candidate":
            return roles.run_candidate(source, path, env, CALLS, ANSWERS, codec)
        return roles.run_as_main(source, path, env)

    def _run_judged(self, job, path, clock, memory_mb):
        """A candidate and a judge (roles.py); the judge's verdict is the program's result."""
        calls_r, calls_w = os.pipe()
        answers_r, answers_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        part_r, part_w = os.pipe()
        verdicts_r, verdicts_w = os.pipe()
        spent_r, spent_w = os.pipe()
        null = os.open(os.devnull, os.O_RDWR)
        oom_kills = outcomes.oom_kills()
        started = time.monotonic()
        try:
            candidate = self.zygote.spawn(
                self._request("candidate", self.uid, path, clock.timeout_s, memory_mb),
                (null, stdout_w, stderr_w, calls_r, answers_w))
            judge = self.zygote.spawn(
                self._request("judge", self.judge_uid, path, clock.timeout_s, memory_mb,
                              judge_bytes=int(job["judge_bytes"]),
                              deadline=started + clock.wall_s, wall_s=clock.wall_s),
                (part_r, null, null, calls_w, answers_r, verdicts_w, spent_r))
        finally:
            for fd in (calls_r, calls_w, answers_r, answers_w, stdout_w, stderr_w, part_r,
                       verdicts_w, spent_r, null):
                os.close(fd)
        self._say(SEND_JUDGE)
        outcomes.pass_on(int(job["judge_bytes"]), part_w)
        stdout, stderr = watch.Tail(self.tail_bytes), watch.Tail(self.tail_bytes)
        pipes = {stdout_r: stdout, stderr_r: stderr}
        candidate_cpu = self._meter(clock, self.uid, candidate)
        judge_cpu = self._meter(clock, self.judge_uid, judge)
        # The judge's own deadline is the backstop: a moment more lets it say what timed out.
        until = started + clock.wall_s + JUDGE_GRACE_S
        ended, spent = watch.watch(judge, pipes, [candidate_cpu, judge_cpu], until,
                                   self.max_output)
        candidate_spent = spent is candidate_cpu
        if candidate_spent:
            # Said before the candidate ends: the judge's call reads it before the closed pipe
            # (a judge that has just ended has no more calls to make).
            with contextlib.suppress(BrokenPipeError):
                os.write(spent_w, outcomes.cpu_spent("the candidate", clock).encode())
            _kill_group(candidate)
            ended, spent = watch.watch(judge, pipes, [judge_cpu], until, self.max_output)
        os.close(spent_w)
        clock = clock._replace(cpu_s=candidate_cpu.read())
        # How the candidate ended counts only where it ended before a SIGKILL of ours.
        wait_status = None if candidate_spent else self.zygote.wait(candidate, block=False)
        _kill_group(candidate)
        if ended != "exited":
            _kill_group(judge)
        if wait_status is None:
            self.zygote.wait(candidate)
        candidate_code = None if wait_status is None else os.waitstatus_to_exitcode(wait_status)
        self.zygote.wait(judge)
        exec_s = time.monotonic() - started
        self._sweep(candidate, judge)
        watch.drain(pipes)
        verdict = outcomes.read_verdict(verdicts_r)
        out_of_memory = self._oom_killed(oom_kills, candidate_code) or \
            stderr.text().rstrip().rpartition("\n")[2].startswith("MemoryError")
        status, reason = outcomes.judged_status(ended, verdict, out_of_memory, clock)
        return _reply(status, 0 if status == "ok" else None, stdout.text(),
                      stderr.text() + f"\n[heldout judge] {reason}", exec_s, clock.cpu_s)

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


def _reply(status, exit_code, stdout, stderr, exec_s, cpu_s):
    return {"status": status, "exit_code": exit_code, "stdout_tail": stdout,
            "stderr_tail": stderr, "exec_s": round(exec_s, 6), "cpu_s": round(cpu_s, 6)}


def _kill_group(pid):
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def _load_companions(sources):
    """codec.py and roles.py, from the sources the host sent (a container has no heldout)."""
    global codec, roles, world, zygote, outcomes, watch
    for name, source in sources.items():
        module = types.ModuleType(name)
        module.__file__ = f"<{name}>"
        # Builtins of their own: a candidate that rebinds builtins.len in its process must
        # not break the code that carries its answers.
        module.__builtins__ = dict(vars(builtins))
        sys.modules[name] = module
        exec(compile(source, module.__file__, "exec"), module.__dict__)
    codec, roles, world, zygote, outcomes, watch = (sys.modules[name] for name in COMPANIONS)


COMPANIONS = ("heldout_sandbox_codec", "heldout_sandbox_roles", "heldout_sandbox_world",
              "heldout_sandbox_zygote", "heldout_sandbox_outcomes", "heldout_sandbox_watch")
RUNNER_MODULES = (__name__, "heldout_sandbox_zygote", "heldout_sandbox_outcomes",
                  "heldout_sandbox_watch")
codec = roles = world = zygote = outcomes = watch = None


def main(argv):
    Runner(json.loads(argv[1])).serve()


if __name__ == "__main__":
    main(sys.argv)
