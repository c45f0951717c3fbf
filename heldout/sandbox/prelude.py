"""The in-program half of the scorer's completion marker (heldout.episodes.judge builds it).

A scored program is this function's source, with the solution (prompt + completion) and the
tests in place of the two placeholders as string literals, then a call to it. It prints
MARKER + nonce on a line of its own only after the tests returned, and the nonce is not in the
program: it comes on stdin, which the function reads before anything else runs and then
replaces with /dev/null.

Who may print the marker: an audit hook (the reporter) that holds the only reference to a
suspended generator, in whose frame alone the marker lives. The generator writes it only when
resumed by the reporter on the event "heldout.checked" raised by this very call's frame, which
raises it after both exec() calls returned; exec, compile and sys.audit are bound before the
solution runs, and the tests see the builtins as they were before it ran. A second audit hook
(the policy) refuses what would reach into frames, the garbage collector or raw memory
(tracebacks' and generators' frames, gc, ctypes, /proc/*/mem, forged code, tracing, new
processes, more audit hooks). What remains possible is listed in README.md, "The sandbox".

The solution and the tests are compiled separately, so a completion cannot swallow the tests
(an unclosed string, an indented block). Standard library only; it runs in the sandbox.
"""

# Replaced by string literals in each program; the names keep this module importable.
HELDOUT_SOLUTION = HELDOUT_TESTS = ""
MARKER = b"heldout-checks-returned:"


def _heldout_main():
    import builtins
    import os
    import sys

    # Bound now: the solution may rebind any builtin, or attributes of sys and os.
    run, build, audit, leave = exec, compile, sys.audit, os._exit
    solution, tests = HELDOUT_SOLUTION, HELDOUT_TESTS
    streams = (sys.stdout, sys.stderr)
    pristine_builtins = dict(builtins.__dict__)

    def policy_hook():
        denied = frozenset((
            "sys.addaudithook", "sys.settrace", "sys.setprofile", "sys._current_frames",
            "sys._current_exceptions", "gc.get_objects", "gc.get_referrers",
            "gc.get_referents", "code.__new__", "function.__new__", "os.fork", "os.forkpty",
            "os.exec", "os.posix_spawn", "os.system", "subprocess.Popen", "os.symlink",
            "os.link", "cpython.PyInterpreterState_New",
        ))
        frame_attributes = frozenset(("tb_frame", "gi_frame", "cr_frame", "ag_frame"))
        modules = frozenset(("ctypes", "_ctypes", "_posixsubprocess", "_testcapi",
                             "_testinternalcapi", "_xxsubinterpreters", "_xxinterpchannels"))

        def refuse(what):
            raise RuntimeError(f"heldout: {what} is not allowed in a scored program")

        def policy(event, args):
            if event in denied or event.startswith("ctypes."):
                refuse(event)
            elif event == "object.__getattr__" and args[1] in frame_attributes:
                refuse(f"reading {args[1]}")
            elif event == "import" and (type(args[0]) is not str
                                        or args[0].partition(".")[0] in modules):
                refuse(f"importing {args[0]!r}")
            elif event == "open" and not isinstance(args[0], int):
                path = os.fsdecode(args[0])
                if "mem" in (os.path.basename(path), os.path.basename(os.path.realpath(path))):
                    refuse(f"opening {path}")

        return policy

    def arm(checker, policy):
        """Read the nonce and install the hooks; nothing of it stays in the caller's frame."""
        nonce = b""
        while chunk := os.read(0, 4096):
            nonce += chunk
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)

        def sealed(marker, reporter_code, getframe, write):
            while True:
                yield
                if getframe(1).f_code is reporter_code and getframe(2) is checker:
                    try:  # noqa: SIM105 (contextlib would be one more import in every program)
                        write(1, marker)
                    except OSError:
                        pass

        def reporter(event, args):
            # Calls nothing the solution can rebind: no builtins, no methods of its objects.
            if event == "heldout.checked":
                emitter.send(None)

        emitter = sealed(b"\n" + MARKER + nonce.strip() + b"\n", reporter.__code__,
                         sys._getframe, os.write)
        emitter.send(None)
        sys.addaudithook(reporter)
        sys.addaudithook(policy)

    arm(sys._getframe(), policy_hook())
    del arm, policy_hook
    namespace = {"__name__": "__main__", "__builtins__": builtins}
    run(build(solution, "solution.py", "exec"), namespace)
    namespace["__builtins__"] = pristine_builtins
    run(build(tests, "tests.py", "exec"), namespace)
    for stream in streams:
        try:  # noqa: SIM105
            stream.flush()
        except Exception:
            pass
    audit("heldout.checked")
    # Nothing the solution left behind (threads, atexit handlers) runs after the marker.
    leave(0)
