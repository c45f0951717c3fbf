"""What a forked program process becomes: a plain program, a candidate, or the judge.

Standard library only, no heldout imports: the runner (runner.py) loads this file's source as a
module of its own inside the sandbox, with the codec (codec.py) beside it, and hands the codec
to the roles that speak it.

A judged program is two processes, each a fork of the runner as a user of its own:
- the *candidate* runs the task's prompt and the completion as __main__, then answers calls on
  its channel: a call names a function and carries plain-data arguments; the answer is the
  plain-data result, or the name and message of the exception it raised. It never receives the
  tests, the reference or anything of the verdict, so nothing it can reach decides anything;
- the *judge* reads the trusted part (prompt, tests, entry point) straight from the runner's
  input, never through the runner's memory, defines the prompt's helpers itself, binds the
  entry point to a proxy that calls the candidate, runs the tests and writes the verdict to the
  runner. Only plain data crosses from the candidate, so no object of the candidate's (a lying
  `__eq__`, a subclass, a raising `__repr__`) ever runs in the judge.
A `python-program` task (heldout/tasks/python_program.py) is judged the same way: its candidate
runs the program once per call, in a fork, on the case's input; its judge's tests give each call
a deadline of its own (`Candidate.within`) and end with a verdict of their own (`Candidate.fail`).
"""

import ast
import atexit
import builtins
import contextlib
import io
import json
import os
import select
import sys
import time
import types

# Replies from the candidate larger than this are a failed call, never read whole.
REPLY_LIMIT = 16 * 1024 * 1024
# A test may expect these, raised by the candidate, and catch them; any other exception the
# candidate raises is a failed call.
# Not StopIteration: re-raised inside a test's map() or generator it would end the iteration
# early and pass what never ran; not MemoryError, which is the candidate's "oom".
_EXPECTABLE = {name: value for name, value in vars(builtins).items()
               if isinstance(value, type) and issubclass(value, Exception)
               and value not in (StopIteration, StopAsyncIteration, MemoryError)}


# --- a plain program: what `python -I -S main.py` would do ---------------------------------


def run_as_main(source, path, env):
    """Run `source` as `python -I -S path` would, in this (forked) interpreter: a new __main__,
    fresh standard streams, the program's environment; the exit status it would have had."""
    main = _become_main(path, env)
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


def _become_main(path, env):
    os.environ.clear()
    os.environ.update(env)
    sys.argv = [path]
    # The runner's stream objects stay referenced (never finalized): their fds are now ours.
    _runner_streams.extend((sys.stdin, sys.stdout, sys.stderr))
    sys.stdin = sys.__stdin__ = _text_stream(0, "r")
    sys.stdout = sys.__stdout__ = _text_stream(1, "w")
    sys.stderr = sys.__stderr__ = _text_stream(2, "w", errors="backslashreplace",
                                               line_buffering=True)
    main = types.ModuleType("__main__")
    main.__file__ = path
    main.__builtins__ = builtins
    sys.modules["__main__"] = main
    return main


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
    if not _flushed():
        status = status or 120  # as CPython does when stdout cannot be flushed at exit
    return status


def _flushed():
    flushed = True
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - the solution's own stream objects may be anything
            flushed = False
    return flushed


# --- the candidate ---------------------------------------------------------------------------


def run_candidate(source, path, env, calls, answers, codec):
    """Run the solution as __main__, then answer calls until the judge hangs up. Whatever this
    process does (exit, print, hook, forge an answer) can only make a call fail."""
    main = _become_main(path, env)
    try:
        exec(compile(source, path, "exec"), main.__dict__)
    except BaseException as error:  # noqa: BLE001 - a solution that cannot load fails every call
        traceback = error.__traceback__.tb_next if error.__traceback__ else None
        sys.excepthook(type(error), error, traceback)
        _answer(answers, codec, ["unloaded", type(error).__name__, _message(error)])
        return _finish(1)
    while True:
        try:
            # The judge's deadline is the judge's: the runner ends this process with it.
            request = codec.decode(codec.read_frame(calls, time.monotonic() + 86400,
                                                    REPLY_LIMIT))
        except codec.ChannelClosed:
            return _finish(0)
        name, args, kwargs = request
        function = main.__dict__.get(name)
        try:
            if not callable(function):
                raise NameError(f"the solution defines no function {name!r}")
            answer = ["returned", function(*args, **kwargs)]
        except BaseException as error:  # noqa: BLE001 - it is the call's outcome
            answer = ["raised", _builtin_kind(error), _message(error)]
        # What it printed reaches the pipe before the answer: after the last answer the judge
        # exits, and the runner ends this process before it would flush at exit.
        _flushed()
        try:
            _answer(answers, codec, answer)
        except codec.CodecError as error:
            _answer(answers, codec, ["unsupported", str(error)])


def _answer(answers, codec, answer):
    codec.write_frame(answers, codec.encode(answer))


def _builtin_kind(error):
    """The name of the nearest builtin class of `error`: a solution's own ValueError subclass
    is, to a test expecting ValueError, a ValueError."""
    for kind in type(error).__mro__:
        if getattr(builtins, kind.__name__, None) is kind:
            return kind.__name__
    return type(error).__name__


def _message(error):
    try:
        return str(error)[:500]
    except BaseException:  # noqa: BLE001 - a message that cannot be made is no message
        return ""


# --- the judge -------------------------------------------------------------------------------


class CallFailed(BaseException):
    """A call whose answer is no answer. A BaseException, so `except Exception` in a test
    cannot turn a failed call into a pass."""

    def __init__(self, reason, kind="failed"):
        super().__init__(reason)
        self.reason, self.kind = reason, kind


class Passed(BaseException):
    """The judge's own pass, with its reason: only the judge's code raises it (the candidate's
    answers carry builtin exceptions only)."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


class Limits:
    """The candidate's limits as the judge sees them: the wall-clock backstop (`deadline`, a
    time.monotonic() value, `wall_s` after the start), and the runner's word, on `spent_fd`,
    once the candidate has used its CPU time (runner.py). The runner writes it before it ends
    the candidate, so a call that waits for an answer wakes on it, and one that finds the
    channel closed, a frame cut short or its deadline passed reads it before anything else."""

    def __init__(self, deadline, wall_s, spent_fd):
        self.deadline, self.wall_s, self.spent_fd = deadline, wall_s, spent_fd
        self.spent = None

    def check(self):
        """Raise the candidate's timeout if the runner said its CPU is used up."""
        if self.spent is None and select.select([self.spent_fd], [], [], 0)[0]:
            self.spent = os.read(self.spent_fd, 4096).decode("utf-8", "replace") or \
                "the runner ended the candidate"
        if self.spent is not None:
            raise CallFailed(self.spent, "timeout")


class Candidate:
    """The entry point, as the tests see it: each call crosses to the candidate process as
    plain data and comes back as plain data."""

    def __init__(self, name, calls, answers, limits, codec, deadline=None):
        self.__name__ = name
        self._calls, self._answers, self._limits, self._codec = calls, answers, limits, codec
        self._deadline = limits.deadline if deadline is None else deadline

    def __call__(self, *args, **kwargs):
        codec, limits = self._codec, self._limits
        limits.check()
        if time.monotonic() >= self._deadline:
            # Past the deadline no answer can count: nothing is asked of a stuck candidate.
            raise CallFailed(self._late(), "timeout")
        try:
            request = codec.encode([self.__name__, list(args), kwargs])
        except codec.CodecError as error:
            raise CallFailed(f"the test's arguments cannot cross to the candidate: {error}") \
                from None
        try:
            # A candidate that already ended may have left its last word (why it did not load).
            with contextlib.suppress(codec.ChannelClosed):
                codec.write_frame(self._calls, request)
            # The answer, or the runner's word that the candidate's CPU is spent, first.
            select.select([self._answers, limits.spent_fd], [], [],
                          max(0.0, self._deadline - time.monotonic()))
            limits.check()
            answer = codec.decode(codec.read_frame(self._answers, self._deadline, REPLY_LIMIT))
        except codec.CodecError as error:
            # Ended for its CPU inside a frame, the candidate leaves a frame cut short, or one
            # that a process of its own, still alive, never ends.
            limits.check()
            if isinstance(error, codec.FrameTimeout):
                raise CallFailed(self._late(), "timeout") from None
            if isinstance(error, codec.ChannelClosed):
                raise CallFailed("the candidate process ended during a call") from None
            raise CallFailed(f"the candidate's answer is not plain data: {error}") from None
        return self._unpack(answer)

    def _late(self):
        if self._deadline < self._limits.deadline:
            return f"no answer from {self.__name__} before the deadline"
        return f"no answer from {self.__name__} within {self._limits.wall_s:g} s of wall clock"

    def within(self, seconds):
        """This proxy with a deadline `seconds` from now, or the program's where that comes
        first: a judge that asks once per test case gives each case its own time limit."""
        return Candidate(self.__name__, self._calls, self._answers, self._limits, self._codec,
                         min(self._deadline, time.monotonic() + seconds))

    @staticmethod
    def fail(reason, kind="failed"):
        """End the tests with this verdict ("failed", "timeout" or "oom") and reason."""
        raise CallFailed(reason, kind)

    @staticmethod
    def succeed(reason):
        """End the tests with a pass and this reason (what the judge noted on the way)."""
        raise Passed(reason)

    def _unpack(self, answer):
        shape = (type(answer) is list and len(answer) >= 2
                 and all(type(part) is str for part in answer[:1]))
        kind = answer[0] if shape else None
        if kind == "returned" and len(answer) == 2:
            return answer[1]
        if kind == "raised" and len(answer) == 3 and type(answer[1]) is str:
            if answer[1] == "MemoryError":
                raise CallFailed("the candidate ran out of memory (MemoryError)", "oom")
            expectable = _EXPECTABLE.get(answer[1])
            if expectable is None:
                raise CallFailed(f"the candidate raised {answer[1][:100]}: {answer[2]!s:.200}")
            raise expectable(answer[2])
        if kind == "unsupported" and len(answer) == 2:
            raise CallFailed(f"the candidate returned {answer[1]!s:.200}")
        if kind == "unloaded" and len(answer) == 3:
            raise CallFailed(f"the solution did not load: {answer[1]!s:.100}: {answer[2]!s:.200}")
        raise CallFailed("the candidate's answer is not an answer")


def run_judge(size, calls, answers, verdicts, limits, codec):
    """Read the judge's part of the job (`size` bytes of JSON: prompt, tests, entry point) from
    fd 0, run the tests against the candidate, within `limits` (Limits), and write the verdict,
    one JSON object, to `verdicts`: {"passed": bool, "kind": "ok" | "failed" | "timeout" |
    "oom", "reason": str}."""
    payload = b""
    while len(payload) < size:
        chunk = os.read(0, size - len(payload))
        if not chunk:
            break
        payload += chunk
    spec = json.loads(payload)
    failures = []
    namespace = {"__name__": "__main__", "__builtins__": builtins,
                 _ANY_FAILURE: BaseException, _RECORD: failures.append}
    try:
        # The prompt is trusted text: its helpers (encode_cyclic, poly) are the judge's own.
        exec(compile(spec["prompt"], "prompt.py", "exec"), namespace)
        namespace[spec["entry_point"]] = Candidate(spec["entry_point"], calls, answers,
                                                   limits, codec)
        exec(every_assert(spec["tests"]), namespace)
    except BaseException as error:  # noqa: BLE001 - any other end of the tests is a failure
        failures.append(error)
    os.write(verdicts, json.dumps(_verdict(failures)).encode())
    return 0


# The names by which the tests, rewritten, record a failed assert: no test uses them.
_ANY_FAILURE, _RECORD = "__heldout_any_failure__", "__heldout_record_failure__"


class _EveryAssert(ast.NodeTransformer):
    def visit_Try(self, node):
        # An assert the tests guard with a try of their own is theirs to handle (the public
        # tests' feedback records each failure and goes on): left as it is.
        for field in ("handlers", "orelse", "finalbody"):
            setattr(node, field, [self.visit(child) for child in getattr(node, field)])
        return node

    visit_TryStar = visit_Try

    def visit_Assert(self, node):
        failure = "__heldout_failure__"
        record = ast.Expr(ast.Call(ast.Name(_RECORD, ast.Load()),
                                   [ast.Name(failure, ast.Load())], []))
        handler = ast.ExceptHandler(ast.Name(_ANY_FAILURE, ast.Load()), failure, [record])
        return ast.copy_location(ast.Try([node], [handler], [], []), node)


def every_assert(tests):
    """The tests with every assert made to record its failure and go on, so that the judge
    makes every call the tests make whatever the candidate answered: a candidate called again
    learns nothing of whether its last answer was right. A test that stops for another reason
    (a statement outside an assert raised) still stops there."""
    tree = ast.fix_missing_locations(_EveryAssert().visit(ast.parse(tests, "tests.py")))
    return compile(tree, "tests.py", "exec")


def _verdict(failures):
    """The verdict from every failure the tests recorded, in order: the first one decides."""
    if not failures:
        return {"passed": True, "kind": "ok", "reason": "the tests passed"}
    first = failures[0]
    if isinstance(first, Passed):
        return {"passed": True, "kind": "ok", "reason": first.reason}
    if isinstance(first, CallFailed):
        return {"passed": False, "kind": first.kind, "reason": first.reason}
    return {"passed": False, "kind": "failed", "reason": _where(first)}


def _where(error):
    """`AssertionError at tests.py line 12`, with the message when there is one."""
    line = None
    traceback = error.__traceback__
    while traceback is not None:
        if traceback.tb_frame.f_code.co_filename == "tests.py":
            line = traceback.tb_lineno
        traceback = traceback.tb_next
    place = f" at tests.py line {line}" if line is not None else ""
    message = _message(error)
    return f"{type(error).__name__}{place}" + (f": {message}" if message else "")
