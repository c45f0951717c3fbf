"""The pristine parent of every program: a fork of the runner made before its first job.

Standard library only, no heldout imports: the runner (runner.py) loads this file's source as a
module of its own inside the sandbox.

Every program used to be a fork of the runner, whose memory held the earlier jobs and replies:
a candidate reading its own memory (`/proc/self/maps`, `ctypes.string_at`) found the last
program's verdict there. The runner now forks the zygote once, before it has read a job, and
never forks again. The zygote never sees a job: it receives, for each program, a small request
(the role, the user, the limits, the program's path; nothing of its source, input or tests)
and the program's file descriptors (SCM_RIGHTS over a socket pair), and forks the program from
itself. So every program starts from the zygote's memory, which is the same for all of them.

A program is forked twice over (the zygote, a middle process that exits at once, the program),
so that its parent is the runner: the runner is the init of its PID namespace (a worker's, a
container's) or, outside one, its child subreaper, and collects it like any child.

The zygote also sweeps: the runner cannot kill(-1) without killing the zygote, so a fork of the
zygote takes each program user's uid and kills every process of that user in the namespace at
once (kill(-1) as that user, which reaches forks in flight too).
"""

import contextlib
import json
import os
import signal
import socket
import time

_MESSAGE_LIMIT = 65536
_MAX_FDS = 16


class ZygoteLost(OSError):
    """The zygote is gone: no pristine parent is left, and the runner must end."""


class Zygote:
    """The runner's end of the zygote."""

    def __init__(self, channel, pid):
        self._channel, self.pid = channel, pid

    def spawn(self, request, fds):
        """Start a program as `request` says, with `fds` as its descriptors 0, 1, ...; its pid."""
        return self._ask(request, fds)["pid"]

    def sweep(self, uids):
        """Kill every process of each of `uids`, and return once they are all signalled."""
        self._ask({"sweep": list(uids)}, [])

    def _ask(self, request, fds):
        try:
            socket.send_fds(self._channel, [json.dumps(request).encode()], list(fds))
            reply = self._channel.recv(_MESSAGE_LIMIT)
        except OSError as error:
            raise ZygoteLost(f"the zygote is gone: {error}") from None
        if not reply:
            raise ZygoteLost("the zygote is gone")
        answer = json.loads(reply)
        if "error" in answer:
            raise ZygoteLost(f"the zygote could not start a program: {answer['error']}")
        return answer


def start(become):
    """Fork the zygote; `become(request, fds)` is what each program's process does (it never
    returns). Call it before the runner reads its first job."""
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    pid = os.fork()
    if pid == 0:
        try:
            ours.close()
            _serve(theirs, become)
        finally:
            os._exit(0)
    theirs.close()
    return Zygote(ours, pid)


def _serve(channel, become):
    # Nothing of the runner's is kept open: its stdin is where the jobs come in.
    null = os.open(os.devnull, os.O_RDWR)
    for target in (0, 1, 2):
        os.dup2(null, target)
    os.closerange(3, channel.fileno())
    os.closerange(channel.fileno() + 1, 1 << 16)
    while True:
        message, fds, _, _ = socket.recv_fds(channel, _MESSAGE_LIMIT, _MAX_FDS)
        if not message:
            return
        try:
            request = json.loads(message)
            if "sweep" in request:
                for uid in request["sweep"]:
                    _kill_every_process_of(uid)
                answer = {"swept": True}
            else:
                answer = {"pid": _fork_program(request, fds, become)}
        except Exception as error:  # noqa: BLE001 - said to the runner, which ends
            answer = {"error": repr(error)}
        finally:
            for fd in fds:
                os.close(fd)
        channel.send(json.dumps(answer).encode())


def _fork_program(request, fds, become):
    read, write = os.pipe()
    middle = os.fork()
    if middle == 0:
        status = 1
        try:
            os.close(read)
            program = os.fork()
            if program == 0:
                os.close(write)
                become(request, fds)
            os.write(write, str(program).encode())
            status = 0
        finally:
            os._exit(status)
    os.close(write)
    with os.fdopen(read, "rb") as pid_pipe:
        said = pid_pipe.read()
    # Once the middle process is collected, the program's parent is the runner.
    os.waitpid(middle, 0)
    if not said:
        raise OSError("the program's process could not be forked")
    return int(said)


def _kill_every_process_of(uid):
    helper = os.fork()
    if helper == 0:
        try:
            os.setgroups([])
            os.setgid(uid)
            os.setuid(uid)
            with contextlib.suppress(ProcessLookupError):
                os.kill(-1, signal.SIGKILL)  # never the caller itself
        finally:
            os._exit(0)
    os.waitpid(helper, 0)


def reap_orphans(users, within_s=2.0):
    """Collect the orphans re-parented to us (the init of our namespace or container, or its
    subreaper), until no process of the program `users` is left."""
    give_up = time.monotonic() + within_s
    while True:
        with contextlib.suppress(ChildProcessError):
            while os.waitpid(-1, os.WNOHANG)[0] > 0:
                pass
        if not users or not processes_of(users) or time.monotonic() > give_up:
            return
        time.sleep(0.001)


def processes_of(users):
    """Whether any process of these users (killed ones not yet collected included) is left."""
    wanted = {str(uid) for uid in users}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status", encoding="ascii", errors="replace") as status:
                for line in status:
                    if line.startswith("Uid:"):
                        if line.split()[1] in wanted:
                            return True
                        break
        except OSError:
            continue
    return False
