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

The zygote forks each program once and is its parent: the runner asks it for the program's
wait status (`Zygote.wait`) once the program's pidfd says it ended, or after killing it. A
process the program leaves behind is re-parented to the runner (the init of its PID namespace,
a worker's or a container's, or else its child subreaper), which collects it in the sweep. A
middle process that exited at once, to make the runner every program's parent, cost one more
fork of the zygote's 20 MB per program: about a tenth of a judged program's CPU time.

The sweep needs no process of its own: the runner cannot kill(-1) as root without killing the
zygote, so after each program a thread of the runner takes, for itself alone (the raw system
call: libc's setresuid would change every thread), the judge's user as its real and saved ids
and the candidate's as its effective id, and makes one kill(-1). kill(2) lets it signal every
process whose real id is either user's, and lets none of the candidate's processes (all three
of their ids the candidate's) signal it or trace it; the runner's other thread stays root. It
reaches forks in flight too: a process with SIGKILL pending can fork no more. A fork of the
zygote as the candidate's user, as before, cost a fork per user and could be killed by a
survivor calling kill(-1) in a loop before it killed that survivor. After the kill no process
of the users can start, so one scan of /proc that finds none of theirs proves none is left.
"""

import contextlib
import ctypes
import json
import os
import platform
import signal
import socket
import threading
import time

_MESSAGE_LIMIT = 65536
# setresuid(2)'s number: the raw call changes the calling thread's ids alone.
_SETRESUID = {"x86_64": 117, "aarch64": 147}
_MAX_FDS = 16


class ZygoteLost(OSError):
    """The zygote is gone: no pristine parent is left, and the runner must end."""


class Zygote:
    """The runner's end of the zygote."""

    def __init__(self, channel, pid):
        self._channel, self.pid = channel, pid

    def spawn(self, request, fds):
        """Start a program as `request` says, with `fds` as its descriptors 0, 1, ...; its pid."""
        return self._ask("start a program", {"spawn": request}, fds)["pid"]

    def wait(self, pid, block=True):
        """The wait status of the program `pid`, collected; None if it is still running and
        `block` is False. Block only on a program that ended or was killed."""
        return self._ask(f"collect program {pid}", {"wait": pid, "block": block}, ())["status"]

    def _ask(self, action, request, fds):
        try:
            socket.send_fds(self._channel, [json.dumps(request).encode()], list(fds))
            reply = self._channel.recv(_MESSAGE_LIMIT)
        except OSError as error:
            raise ZygoteLost(f"the zygote is gone: {error}") from None
        if not reply:
            raise ZygoteLost("the zygote is gone")
        answer = json.loads(reply)
        if "error" in answer:
            raise ZygoteLost(f"the zygote could not {action}: {answer['error']}")
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
            answer = _answer(json.loads(message), fds, become)
        except Exception as error:  # noqa: BLE001 - said to the runner, which ends
            answer = {"error": repr(error)}
        finally:
            for fd in fds:
                os.close(fd)
        channel.send(json.dumps(answer).encode())


def _answer(request, fds, become):
    if "wait" in request:
        pid, status = os.waitpid(int(request["wait"]), 0 if request["block"] else os.WNOHANG)
        return {"status": status if pid else None}
    program = os.fork()
    if program == 0:
        become(request["spawn"], fds)
    return {"pid": program}


def sweep(candidate_uid, judge_uid, within_s=2.0):
    """Kill every process of the program users, collect the orphans re-parented to us (the
    init of our namespace or container, or its subreaper), and return once none of theirs is
    left; raise ZygoteLost (the runner must end) if a process outlives it."""
    refused = []

    def kill_as_both():
        libc = ctypes.CDLL(None, use_errno=True)
        # Every id non-zero: no capability is left to this thread, CAP_KILL included.
        if libc.syscall(_SETRESUID[platform.machine()], judge_uid, candidate_uid,
                        judge_uid) != 0:
            refused.append(os.strerror(ctypes.get_errno()))
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(-1, signal.SIGKILL)  # never the runner itself

    killer = threading.Thread(target=kill_as_both)
    killer.start()
    killer.join()
    if refused:
        raise ZygoteLost(f"the sweep could not take the program users' ids: {refused[0]}")
    give_up = time.monotonic() + within_s
    while True:
        reap()
        if not processes_of((candidate_uid, judge_uid)):
            return
        if time.monotonic() > give_up:
            raise ZygoteLost("a process of the program users outlived the sweep")
        time.sleep(0.001)


def reap():
    """Collect every child of ours that has ended."""
    with contextlib.suppress(ChildProcessError):
        while os.waitpid(-1, os.WNOHANG)[0] > 0:
            pass


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
