"""The openai agent against a real HTTP server on loopback that speaks the OpenAI wire format
and fails on request. Backoff sleeps are recorded instead of slept, so retries cost nothing and
their delays can be checked exactly; attempts are counted at the server."""

from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from heldout.agents.openai import OpenAIAgent, OpenAISettings, extract_code
from heldout.agents.protocol import AgentContext
from heldout.agents.registry import make_agent
from heldout.errors import AgentError, ParamsError
from heldout.tasks.record import Task

CONTEXT = AgentContext(
    template="Complete the function.\n{prompt}",
    temperature=0.7,
    top_p=0.95,
    max_tokens=321,
    max_turns=1,
    timeout_s=10.0,
    project_root=".",
)
TASK = Task(
    id="toy/add",
    group="toy/add",
    prompt='def add(a, b):\n    """Return a + b."""\n',
    entry_point="add",
    tests="assert add(1, 2) == 3\n",
)
CODE = "def add(a, b):\n    return a + b\n"
KEY_VARIABLE = "HELDOUT_TEST_OPENAI_KEY"


@dataclass
class FakeServer:
    """What the server will answer, and what it saw."""

    url: str = ""
    reply: str = f"Here it is:\n```python\n{CODE}```\nDone."
    finish_reason: str | None = "stop"
    refusal: str | None = None
    faults: list[str] = field(default_factory=list)  # one per request, then normal answers
    retry_after: str = "7"
    hold_s: float = 0.0  # every normal answer waits this long, so requests overlap
    bodies: list[dict[str, Any]] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list)
    in_flight: int = 0
    max_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    release: threading.Event = field(default_factory=threading.Event)
    streamed: int = 0  # bytes of an "endless" answer the client took before it hung up
    hung_up: threading.Event = field(default_factory=threading.Event)

    @property
    def attempts(self) -> int:
        return len(self.bodies)


class _Server(ThreadingHTTPServer):
    fake: FakeServer


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body leave in one write: two small writes on a kept-alive connection meet
    # Nagle's algorithm and delayed ACKs, 40 ms a reply.
    wbufsize = 1 << 16
    server: _Server

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        fake = self.server.fake
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with fake.lock:
            fake.bodies.append(body)
            fake.paths.append(self.path)
            fake.authorizations.append(self.headers.get("Authorization"))
            fault = fake.faults.pop(0) if fake.faults else None
            fake.in_flight += 1
            fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
        try:
            answer = self._answer(fake, body, fault)
        finally:
            # Counted out before answering: the client may send its next request the moment
            # it has this answer, and that one must not overlap this one in the count.
            with fake.lock:
                fake.in_flight -= 1
        if answer is None:
            self.close_connection = True
            return
        if fault == "endless":
            self._stream_endlessly(fake)
            return
        status, payload, headers = answer
        self.send_response(status)
        for name, value in {"Content-Type": "application/json", **headers}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _stream_endlessly(self, fake: FakeServer) -> None:
        """A valid JSON answer that never says its length and does not end before 256 MiB:
        the client must stop reading, not the server sending."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        chunk = b"[]," * (1 << 18)
        try:
            self.wfile.write(b'{"choices": [], "padding": [')
            while fake.streamed < 256 << 20:
                self.wfile.write(chunk)
                fake.streamed += len(chunk)
        except OSError:
            pass
        finally:
            fake.hung_up.set()

    def _answer(
        self, fake: FakeServer, body: dict[str, Any], fault: str | None
    ) -> tuple[int, bytes, dict[str, str]] | None:
        """(status, payload, headers), or None to hang up without a word."""
        if fault in ("drop", "slow"):
            if fault == "slow":
                fake.release.wait(timeout=5)
            return None
        if fault == "500":
            return 500, _json({"error": {"message": "boom: CUDA out of memory"}}), {}
        if fault in ("429", "503"):
            return (
                int(fault),
                _json({"error": {"message": "busy"}}),
                {"Retry-After": fake.retry_after},
            )
        if fault == "400":
            error = {"message": "max_tokens is too large: 321 > 256", "type": "BadRequestError"}
            return 400, _json({"error": error}), {}
        if fault == "malformed":
            return 200, b'{"choices": [{"message": ', {}
        if fault == "no-choices":
            return 200, _json({"object": "list", "data": []}), {}
        if fault == "huge":  # valid JSON, announced: 9 MiB of empty lists
            return 200, b'{"choices": [], "padding": [' + b"[]," * (3 << 20) + b"[]]}", {}
        if fault == "endless":
            return 200, b"", {}
        time.sleep(fake.hold_s)
        if self.path == "/v1/chat/completions":
            prompt = " ".join(m["content"] for m in body["messages"])
            message = {"role": "assistant", "content": fake.reply, "refusal": fake.refusal}
            choice: dict[str, Any] = {"index": 0, "message": message}
        elif self.path == "/v1/completions":
            prompt = body["prompt"]
            choice = {"index": 0, "text": fake.reply, "logprobs": None}
        else:
            return 404, _json({"error": {"message": f"no route {self.path}"}}), {}
        choice["finish_reason"] = fake.finish_reason
        usage = {"prompt_tokens": len(prompt.split()), "completion_tokens": len(fake.reply.split())}
        return 200, _json({"model": body["model"], "choices": [choice], "usage": usage}), {}


def _json(value: object) -> bytes:
    return json.dumps(value).encode()


@pytest.fixture
def server():
    httpd = _Server(("127.0.0.1", 0), _Handler)
    httpd.fake = FakeServer(url=f"http://127.0.0.1:{httpd.server_address[1]}/v1")
    # A short poll interval: shutdown() waits for the loop to notice, once per test.
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    yield httpd.fake
    httpd.fake.release.set()
    httpd.shutdown()
    httpd.server_close()
    thread.join()


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def agent_for(server: FakeServer, sleeps: list[float]):
    """Agents on the fake server whose backoff sleeps are recorded, not slept."""
    made: list[OpenAIAgent] = []

    def build(**settings: Any) -> OpenAIAgent:
        validated = OpenAISettings.model_validate(
            {"base_url": server.url, "model": "tiny-coder", **settings}
        )
        made.append(OpenAIAgent(validated, CONTEXT, sleep=sleeps.append))
        return made[-1]

    yield build
    for agent in made:
        agent.close()


def test_make_agent_builds_a_chat_agent_whose_request_carries_model_sampling_and_seed(
    server: FakeServer,
):
    agent = make_agent(
        "candidate",
        {"agent": "openai", "base_url": server.url + "/", "model": "tiny-coder"},
        CONTEXT,
    )
    assert isinstance(agent, OpenAIAgent)
    completion = agent.complete(TASK, sample=3, seed=123456789)
    agent.close()
    assert completion.text == CODE
    assert completion.finish_reason == "stop"
    # The program is prompt + completion + tests: the reply's def replaces the prompt's stub.
    exec(TASK.prompt + completion.text + TASK.tests, {})
    assert server.paths == ["/v1/chat/completions"]
    body = server.bodies[0]
    assert body["model"] == "tiny-coder"
    assert (body["temperature"], body["top_p"], body["max_tokens"]) == (0.7, 0.95, 321)
    assert body["seed"] == 123456789
    assert body["messages"] == [
        {"role": "user", "content": CONTEXT.template.format(prompt=TASK.prompt)}
    ]
    assert server.authorizations == [None]


def test_usage_becomes_token_counts(server: FakeServer, agent_for):
    completion = agent_for().complete(TASK, 0, 1)
    user_message = CONTEXT.template.format(prompt=TASK.prompt)
    assert completion.tokens_in == len(user_message.split())
    assert completion.tokens_out == len(server.reply.split())


def test_system_prompt_comes_before_the_task(server: FakeServer, agent_for):
    agent_for(system_prompt="You write Python.").complete(TASK, 0, 1)
    assert [m["role"] for m in server.bodies[0]["messages"]] == ["system", "user"]
    assert server.bodies[0]["messages"][0]["content"] == "You write Python."


def test_completions_endpoint_sends_the_prompt_and_keeps_a_bare_continuation(
    server: FakeServer, agent_for
):
    server.reply = "    return a + b\n"
    completion = agent_for(endpoint="completions").complete(TASK, 0, 42)
    assert server.paths == ["/v1/completions"]
    assert server.bodies[0]["prompt"] == CONTEXT.template.format(prompt=TASK.prompt)
    assert "messages" not in server.bodies[0]
    assert server.bodies[0]["seed"] == 42
    assert completion.text == "    return a + b\n"


def test_a_completion_inside_a_fence_opened_by_the_template_ends_at_the_closing_fence(
    server: FakeServer, sleeps: list[float]
):
    server.reply = "    return a + b\n```\n\nThis adds the two numbers.\n"
    context = replace(CONTEXT, template="```python\n{prompt}")
    settings = OpenAISettings(base_url=server.url, model="m", endpoint="completions")
    agent = OpenAIAgent(settings, context, sleep=sleeps.append)
    assert agent.complete(TASK, 0, 1).text == "    return a + b\n"
    agent.close()


@pytest.mark.parametrize(
    ("finish", "refusal", "expected"),
    [
        ("stop", None, "stop"),
        ("length", None, "length"),
        ("content_filter", None, "refused"),
        ("stop", "I cannot help with that.", "refused"),
        (None, None, "stop"),
    ],
)
def test_finish_reason(server: FakeServer, agent_for, finish, refusal, expected):
    server.finish_reason, server.refusal = finish, refusal
    assert agent_for().complete(TASK, 0, 1).finish_reason == expected


def test_a_reply_cut_by_the_token_budget_keeps_its_open_block(server: FakeServer, agent_for):
    server.reply, server.finish_reason = "```python\ndef add(a, b):\n    return a +", "length"
    completion = agent_for().complete(TASK, 0, 1)
    assert completion.finish_reason == "length"
    assert completion.text == "def add(a, b):\n    return a +\n"


def test_server_errors_are_retried_with_growing_jittered_backoff(
    server: FakeServer, agent_for, sleeps: list[float]
):
    server.faults = ["500", "500", "500"]
    completion = agent_for(backoff_base_s=1.0, backoff_max_s=60.0).complete(TASK, 0, 1)
    assert completion.text == CODE
    assert server.attempts == 4
    assert len(sleeps) == 3
    for attempt, delay in enumerate(sleeps):
        assert 2**attempt / 2 <= delay <= 2**attempt


def test_backoff_never_exceeds_its_cap(server: FakeServer, agent_for, sleeps: list[float]):
    server.faults = ["500"] * 5
    agent_for(backoff_base_s=1.0, backoff_max_s=3.0).complete(TASK, 0, 1)
    assert len(sleeps) == 5
    assert all(delay <= 3.0 for delay in sleeps)
    assert sleeps[-1] >= 1.5


@pytest.mark.parametrize(("retry_after", "waited"), [("7", 7.0), ("3600", 30.0), ("0", 0.0)])
def test_429_waits_as_long_as_retry_after_says_up_to_the_cap(
    server: FakeServer, agent_for, sleeps: list[float], retry_after: str, waited: float
):
    server.faults, server.retry_after = ["429"], retry_after
    assert agent_for(backoff_max_s=30.0).complete(TASK, 0, 1).text == CODE
    assert server.attempts == 2
    assert sleeps == [waited]


@pytest.mark.parametrize(
    ("offset", "waited"), [(timedelta(hours=1), 30.0), (timedelta(days=-1), 0.0)]
)
def test_503_retry_after_may_be_an_http_date(
    server: FakeServer, agent_for, sleeps: list[float], offset: timedelta, waited: float
):
    server.faults = ["503"]
    server.retry_after = format_datetime(datetime.now(UTC) + offset, usegmt=True)
    agent_for(backoff_max_s=30.0).complete(TASK, 0, 1)
    assert sleeps == [waited]


def test_a_reply_slower_than_the_request_timeout_is_retried(server: FakeServer, agent_for):
    server.faults = ["slow"]
    assert agent_for(request_timeout_s=0.5).complete(TASK, 0, 1).text == CODE
    assert server.attempts == 2


def test_a_server_that_never_answers_in_time_is_an_agent_error(server: FakeServer, agent_for):
    server.faults = ["slow", "slow"]
    with pytest.raises(AgentError, match=r"2 attempts; the last: no answer within 0.1 s"):
        agent_for(request_timeout_s=0.1, max_retries=1).complete(TASK, 0, 1)
    assert server.attempts == 2


def test_a_dropped_connection_is_retried(server: FakeServer, agent_for):
    server.faults = ["drop"]
    assert agent_for().complete(TASK, 0, 1).text == CODE
    assert server.attempts == 2


def test_exhausted_retries_raise_with_what_the_server_answered(
    server: FakeServer, agent_for, sleeps: list[float]
):
    server.faults = ["500"] * 3
    with pytest.raises(AgentError) as raised:
        agent_for(max_retries=2).complete(TASK, 0, 1)
    message = str(raised.value)
    assert f"POST {server.url}/chat/completions" in message
    assert "3 attempts" in message
    assert "HTTP 500" in message and "CUDA out of memory" in message
    assert server.attempts == 3
    assert len(sleeps) == 2


def test_a_bad_request_is_not_retried(server: FakeServer, agent_for, sleeps: list[float]):
    server.faults = ["400"]
    with pytest.raises(AgentError, match=r"HTTP 400: .*max_tokens is too large: 321 > 256"):
        agent_for().complete(TASK, 0, 1)
    assert server.attempts == 1
    assert sleeps == []


def test_a_wrong_base_url_names_the_setting_to_check(server: FakeServer, agent_for):
    with pytest.raises(AgentError, match=r"HTTP 404: .*check base_url"):
        agent_for(base_url=server.url.removesuffix("/v1")).complete(TASK, 0, 1)


def test_malformed_json_is_an_error_and_not_retried(server: FakeServer, agent_for):
    server.faults = ["malformed"]
    with pytest.raises(AgentError, match=r'malformed JSON: \{"choices": \[\{"message":'):
        agent_for().complete(TASK, 0, 1)
    assert server.attempts == 1


def test_json_that_is_not_a_completion_is_an_error(server: FakeServer, agent_for):
    server.faults = ["no-choices"]
    with pytest.raises(AgentError, match=r"not a chat completion \(KeyError: 'choices'\)"):
        agent_for().complete(TASK, 0, 1)


def test_an_answer_over_8_mib_is_refused_by_its_announced_length_and_not_retried(
    server: FakeServer, agent_for
):
    server.faults = ["huge"]
    with pytest.raises(AgentError, match=r"larger than 8 MiB \(9,437,[0-9]{3} bytes announced"):
        agent_for().complete(TASK, 0, 1)
    assert server.attempts == 1


def test_an_answer_that_never_says_its_length_is_cut_off_as_it_streams(
    server: FakeServer, agent_for
):
    """Parsed, 64 MiB of `[],` took 1.5 GB; read whole, an endless answer takes everything."""
    server.faults = ["endless"]
    with pytest.raises(AgentError, match=r"the answer is larger than 8 MiB$"):
        agent_for().complete(TASK, 0, 1)
    assert server.hung_up.wait(timeout=30)
    # What the client took, and what the sockets' buffers held, and no more.
    assert 8 << 20 <= server.streamed < 24 << 20
    assert server.attempts == 1


def test_requests_in_flight_never_exceed_the_ceiling(server: FakeServer, agent_for):
    server.hold_s = 0.05
    agent = agent_for(max_in_flight=3)
    with ThreadPoolExecutor(max_workers=8) as pool:
        completions = list(pool.map(lambda seed: agent.complete(TASK, 0, seed), range(12)))
    assert all(c.text == CODE for c in completions)
    assert sorted(body["seed"] for body in server.bodies) == list(range(12))
    assert server.max_in_flight == 3


def test_the_api_key_comes_from_the_named_variable_as_a_bearer_token(
    server: FakeServer, agent_for, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv(KEY_VARIABLE, "sk-local-123")
    agent_for(api_key_env=KEY_VARIABLE).complete(TASK, 0, 1)
    assert server.authorizations == ["Bearer sk-local-123"]


def test_a_key_variable_that_is_not_set_is_a_params_error(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(KEY_VARIABLE, raising=False)
    settings = {"agent": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
    with pytest.raises(ParamsError) as raised:
        make_agent("candidate", {**settings, "api_key_env": KEY_VARIABLE}, CONTEXT)
    assert "checkpoints.candidate.api_key_env: Value error, the environment variable" in str(
        raised.value
    )
    assert f"{KEY_VARIABLE} is not set" in str(raised.value)


def test_a_key_pasted_in_place_of_its_variable_name_is_not_repeated():
    settings = {"agent": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
    with pytest.raises(ParamsError) as raised:
        make_agent("candidate", {**settings, "api_key_env": "sk-live-0123456789"}, CONTEXT)
    assert "never the key itself" in str(raised.value)
    assert "sk-live" not in str(raised.value)


@pytest.mark.parametrize(
    ("extra", "field_and_message"),
    [
        ({"temperature": 0.2}, "temperature: not a field heldout reads; the fields are base_url"),
        ({"endpoint": "responses"}, "endpoint: Input should be 'chat' or 'completions'"),
        ({"base_url": "localhost:8000/v1"}, "base_url: Value error, must start with http://"),
        ({"model": " "}, "model: Value error, must not be empty"),
        ({"max_in_flight": 0}, "max_in_flight: Input should be greater than 0"),
        ({"concurrency": 8}, "concurrency: Value error, is now max_in_flight"),
        ({"backoff_max_s": 0.5}, "backoff_max_s: Value error, must be at least backoff_base_s"),
        (
            {"endpoint": "completions", "system_prompt": "Be brief."},
            "system_prompt: Value error, needs endpoint: chat",
        ),
    ],
)
def test_bad_settings_name_the_checkpoint_and_the_field(extra, field_and_message):
    settings = {"agent": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m", **extra}
    with pytest.raises(ParamsError, match="checkpoints.candidate." + field_and_message):
        make_agent("candidate", settings, CONTEXT)


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        (f"Sure!\n```python\n{CODE}```\nThis works because...", CODE),
        (f"```\n{CODE}```", CODE),
        (f"```Python\n{CODE}```", CODE),
        (f"```py\n{CODE}```", CODE),
        (f"Run it:\n```\n$ python add.py\n```\nCode:\n```python\n{CODE}```", CODE),
        (f"```python\n{CODE}```\nTests:\n```python\nassert add(1, 2) == 3\n```", CODE),
        (f"```bash\npip install numpy\n```\n```\n{CODE}```", CODE),
        (f"```python\n{CODE}", CODE),
        (CODE, CODE),
        ("    return a + b\n", "    return a + b\n"),
        ("```bash\npip install numpy\n```", "```bash\npip install numpy\n```"),
    ],
    ids=[
        "python block in prose",
        "bare block",
        "tag in capitals",
        "py tag",
        "python block preferred to an earlier bare one",
        "first of two python blocks",
        "bare block after another language",
        "unclosed block",
        "no fence: a whole function",
        "no fence: a body",
        "only another language: raw",
    ],
)
def test_extract_code(reply: str, code: str):
    assert extract_code(reply) == code


_LINE = st.text(st.characters(exclude_characters="`\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"))


@given(st.lists(_LINE, max_size=8))
def test_code_in_a_python_block_comes_back_unchanged_and_text_without_fences_is_kept(lines):
    code = "".join(f"{line}\n" for line in lines)
    assert extract_code(f"Here:\n```python\n{code}```\nBye") == code
    assert extract_code(code) == code
