"""The step protocol of the `command` and `python` agents (`protocol: steps`): one episode is a
conversation of JSON messages, one action per turn (examples/README.md is the user's manual).

Order, for both forms: the task message (`task_message`: the task view, the tools, the
budgets); then per turn the observation (`observation_message`; the first, turn 1, is the
prompt under the harness template) and the agent's answer, one action (`action_from_message`);
the episode ends on a submit or on a budget, and a command agent is then sent `{"type": "end"}`.

`ProcessSession` speaks it with an external process over JSON Lines (stdin: heldout's messages,
stdout: the actions, stderr: the agent's own log). Every read and write waits on the pipes with
a deadline, never blocking: an agent that hangs, floods or dies ends its episode as an error (or
a timeout), an agent that closes its stdout ends its turn at once as an error, and every
process it started, its process group and whatever left it (setsid: heldout.agents.process_tree),
is killed when the episode ends, however it ended. `GeneratorSession` is the same conversation
with a Python generator in this process.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import shlex
import signal
import subprocess
import time
from collections.abc import Generator
from typing import Any

from heldout.agents.confinement import confined
from heldout.agents.process_tree import ProcessTree
from heldout.agents.protocol import Action, Observation, action_from_message, observation_message
from heldout.errors import AgentError

MAX_LINE_BYTES = 16 * 2**20  # one action line; a longer one ends the episode as an error
END_MESSAGE = {"type": "end"}
END_GRACE_S = 1.0  # how long an agent may take to exit after the end message
STDERR_TAIL_BYTES = 4000  # what is kept of an agent's stderr, for its error messages
_READ = 2**16
_NOT_A_LINE = ("stdout is for protocol messages only: every line is read as an action "
               "(write logs to stderr)")


def encode(message: dict[str, Any]) -> bytes:
    """One protocol message as one JSON line (ASCII: no encoding to agree on)."""
    return json.dumps(message, separators=(",", ":")).encode("ascii") + b"\n"


def action_from_plain(message: Any) -> Action:
    """An action from decoded JSON: `action_from_message`, with an optional `"type": "action"`
    (every message heldout sends has a type; an agent may say its own)."""
    if isinstance(message, dict) and "type" in message:
        if message["type"] != "action":
            return Action(None, problem=f"an agent sends actions only; got a message of type "
                                        f"{str(message['type'])[:100]!r}")
        message = {key: value for key, value in message.items() if key != "type"}
    return action_from_message(message)


def action_from_line(line: bytes) -> Action:
    """The action one stdout line holds; a line that is not JSON is an Action whose `problem`
    says so (the episode goes on, the agent is told)."""
    try:
        message = json.loads(line)
    except (ValueError, RecursionError) as error:  # UnicodeDecodeError is a ValueError
        shown = line[:200].decode("utf-8", "replace")
        return Action(None, problem=f"not a JSON action ({error}); {_NOT_A_LINE}. "
                                    f"The line began: {shown!r}")
    return action_from_plain(message)


def action_from_value(value: Any) -> Action:
    """An action a Python agent yielded: JSON data (it is recorded as JSON), else a problem."""
    try:
        message = json.loads(json.dumps(value, allow_nan=False))
    except (TypeError, ValueError, RecursionError) as error:
        return Action(None, problem=f"an action must be JSON data (a dict of str, numbers, "
                                    f"lists, dicts): {error}"[:500])
    return action_from_plain(message)


class ProcessSession:
    """One episode of an external step agent: its process, started in a session (and process
    group) of its own in `cwd`, with every process it starts held in its ProcessTree, and the
    pipes to it. Each `act` waits at most min(deadline_s, `turn_timeout_s`) for one action
    line."""

    def __init__(self, argv: list[str], cwd: str, first: dict[str, Any], turn_timeout_s: float):
        self.name = shlex.join(argv)[:120]
        self.turn_timeout_s = turn_timeout_s
        self.tree = ProcessTree()
        try:
            confined_argv, environment = confined(argv, cwd)
            self.process = subprocess.Popen(
                self.tree.command(confined_argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, cwd=cwd, env=environment, bufsize=0,
                start_new_session=True, preexec_fn=self.tree.preexec())
        except (OSError, subprocess.SubprocessError) as error:
            self.tree.kill()
            raise AgentError(f"{self.name}: cannot run: {error}") from None
        self.pid = self.process.pid
        self.tree.adopt(self.pid)
        self._stdin, self._stdout, self._stderr = (
            stream.fileno() for stream in (self.process.stdin, self.process.stdout,
                                           self.process.stderr))
        for descriptor in (self._stdin, self._stdout, self._stderr):
            os.set_blocking(descriptor, False)  # read when select says so, never waited on
        # Readable once the agent's own process has exited: no action can come after that, even
        # while a process it left (outside the tree's reach) still holds its stdout.
        self._exited = os.pidfd_open(self.pid)
        self._selector = selectors.DefaultSelector()
        self._selector.register(self._stdout, selectors.EVENT_READ)
        self._selector.register(self._stderr, selectors.EVENT_READ)
        self._selector.register(self._exited, selectors.EVENT_READ)
        self._exited_seen = False
        self._writing = False
        self._outbox = bytearray(encode(first))  # sent as the first act waits
        self._inbox = bytearray()
        self._scanned = 0
        self._stderr_tail = bytearray()
        self._stderr_open = True
        self._turn = 0
        self._failed = False
        self._closed = False

    # --- the session ------------------------------------------------------------------------

    def act(self, observation: Observation, deadline_s: float) -> Action:
        self._turn = observation.turn
        self._outbox += encode(observation_message(observation))
        limit = max(0.0, min(deadline_s, self.turn_timeout_s))
        try:
            line = self._exchange(time.monotonic() + limit, limit)
        except AgentError:
            self._failed = True
            raise
        return action_from_line(line)

    def close(self) -> None:
        """Send the end message, close stdin, give the agent END_GRACE_S to exit (none if it
        failed), then kill its process group and its whole tree whatever it did, and reap it:
        no zombie, no process of it left, setsid() or not."""
        if self._closed:
            return
        self._closed = True
        self.tree.record()
        try:
            if not self._failed:  # one write that never waits: what the pipe takes
                with contextlib.suppress(OSError):
                    os.write(self._stdin, bytes(self._outbox) + encode(END_MESSAGE))
            with contextlib.suppress(OSError):
                self.process.stdin.close()
            if not self._failed:
                self._exit_status(END_GRACE_S)
        finally:
            self.tree.kill()  # the keeper, where there is one, last: nothing goes to init
            # The leader is not reaped yet (waitid with WNOWAIT), so its pid still names the
            # group: killpg cannot reach a stranger's group that reused the number.
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
            self.process.wait()
            self._selector.close()
            os.close(self._exited)
            for stream in (self.process.stdout, self.process.stderr):
                with contextlib.suppress(OSError):
                    stream.close()

    # --- the pipes --------------------------------------------------------------------------

    def _exchange(self, end: float, limit: float) -> bytes:
        """Write what is pending and read until one whole stdout line is in; by `end`."""
        while (line := self._take_line()) is None:
            if self._exited_seen:
                raise self._died("exited")
            if self._outbox:
                self._write()
            remaining = end - time.monotonic()
            if remaining <= 0:
                raise AgentError(f"{self.name}: no action within {limit:.3g} s "
                                 f"(turn {self._turn}){self._stderr_note()}")
            self._want_writes(bool(self._outbox))
            poll = self.tree.poll_s
            for key, _events in self._selector.select(
                    remaining if poll is None else min(remaining, poll)):
                if key.fd == self._stdout:
                    self._read_stdout()
                elif key.fd == self._stderr:
                    self._read_stderr()
                elif key.fd == self._exited:
                    return self._last_line()
            self.tree.watch()
        return line

    def _last_line(self) -> bytes:
        """The agent's process has exited: the action it wrote before, if a whole line of it is
        in the pipe; else the turn ends as an error now."""
        self._selector.unregister(self._exited)
        self._exited_seen = True
        with contextlib.suppress(AgentError):  # its EOF, once the tree is gone: read to it
            while self._read_stdout():
                pass
        line = self._take_line()
        if line is None:
            raise self._died("exited")
        return line

    def _take_line(self) -> bytes | None:
        while True:
            index = self._inbox.find(b"\n", self._scanned)
            if index < 0:
                self._scanned = len(self._inbox)
                if self._scanned > MAX_LINE_BYTES:
                    raise self._too_long()
                return None
            if index > MAX_LINE_BYTES:
                raise self._too_long()
            line = bytes(self._inbox[:index])
            del self._inbox[:index + 1]
            self._scanned = 0
            if line.strip():  # blank lines are skipped
                return line

    def _write(self) -> None:
        try:
            written = os.write(self._stdin, self._outbox[:_READ])
        except BlockingIOError:
            return
        except BrokenPipeError:
            raise self._died("closed its stdin") from None
        del self._outbox[:written]

    def _want_writes(self, wanted: bool) -> None:
        if wanted != self._writing:
            if wanted:
                self._selector.register(self._stdin, selectors.EVENT_WRITE)
            else:
                self._selector.unregister(self._stdin)
            self._writing = wanted

    def _read_stdout(self) -> bool:
        """Read what is there; whether anything was."""
        try:
            data = os.read(self._stdout, _READ)
        except BlockingIOError:
            return False
        if not data:  # no action can come: the turn ends now, whatever the agent does next
            raise self._died("closed its stdout")
        self._inbox += data
        return True

    def _read_stderr(self) -> None:
        try:
            data = os.read(self._stderr, _READ)
        except BlockingIOError:
            return
        if not data:
            self._selector.unregister(self._stderr)
            self._stderr_open = False
            return
        self._stderr_tail += data
        del self._stderr_tail[:-STDERR_TAIL_BYTES]

    # --- what went wrong --------------------------------------------------------------------

    def _too_long(self) -> AgentError:
        return AgentError(f"{self.name}: a stdout line longer than {MAX_LINE_BYTES} bytes "
                          f"(turn {self._turn}); one line is one action"
                          f"{self._stderr_note()}")

    def _died(self, what: str) -> AgentError:
        """The agent's pipe closed: drain its stderr (briefly) and say how it ended."""
        end = time.monotonic() + 0.5
        self._want_writes(False)  # only stderr is waited on now: stdin and stdout are done
        with contextlib.suppress(KeyError):
            self._selector.unregister(self._stdout)
        while self._stderr_open and (remaining := end - time.monotonic()) > 0:
            ready = [key.fd for key, _events in self._selector.select(remaining)]
            if not ready:
                break
            if self._stderr in ready:
                self._read_stderr()
        status = self._exit_status(0.5)
        how = what if status is None else status
        return AgentError(f"{self.name} {how} during turn {self._turn} without an action"
                          f"{self._stderr_note()}")

    def _exit_status(self, wait_s: float) -> str | None:
        """How the process ended, waiting up to `wait_s`; None if it is still running. Never
        reaps it (close does, after killing the group)."""
        end = time.monotonic() + wait_s
        while True:
            try:
                found = os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return "exited"
            if found is not None:
                if found.si_code == os.CLD_EXITED:
                    return f"exited {found.si_status}"
                return f"was killed by signal {found.si_status}"
            if time.monotonic() >= end:
                return None
            time.sleep(0.005)

    def _stderr_note(self) -> str:
        tail = self._stderr_tail.decode("utf-8", "replace").strip()
        return f"; stderr: ...{tail[-1000:]}" if tail else ""


class GeneratorSession:
    """One episode of a Python step agent: a generator that yields actions and is sent the
    observation of each. A bare first `yield` (None) asks for observation 1 before acting;
    otherwise its first yield is its first action. In this process: the deadline cannot cut a
    turn short, the episode's wall budget ends the episode after it."""

    def __init__(self, generator: Generator[Any, Any, Any], name: str):
        self.generator = generator
        self.name = name
        self.started = False

    def act(self, observation: Observation, deadline_s: float) -> Action:
        message = observation_message(observation)
        try:
            if self.started:
                value = self.generator.send(message)
            else:
                self.started = True
                value = next(self.generator)
                if value is None:
                    value = self.generator.send(message)
        except StopIteration:
            raise AgentError(f"{self.name}: the agent stopped without submitting "
                             f"(turn {observation.turn})") from None
        return action_from_value(value)

    def close(self) -> None:
        self.generator.close()
