"""The openai agent's multi-turn protocols (`tools`, `text`) driven through the real episode loop,
against a real HTTP server on loopback that speaks the OpenAI chat wire format from a script:
each request is answered by the script's next reply, and every request body is kept, so what
the model was told can be checked turn by turn."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from heldout.agents.openai import OpenAIAgent, OpenAITurnsAgent
from heldout.agents.openai_settings import OpenAISettings
from heldout.agents.openai_text import REMINDER, read_text_action
from heldout.agents.openai_turns import NOT_RUN
from heldout.agents.protocol import AgentContext, EpisodeBrief
from heldout.agents.registry import make_agent
from heldout.episodes.budgets import EpisodeBudgets
from heldout.episodes.environments import TOOL_SPECS, PythonFunctionEnvironment, ToolResult
from heldout.episodes.harness import Harness
from heldout.episodes.loop import Outcome, run_loop, turn_seed
from heldout.errors import AgentError, ParamsError
from heldout.sandbox.config import SandboxConfig
from heldout.tasks.record import Task

TASK = Task(
    id="toy/add",
    prompt='def add(a, b):\n    """Return a + b."""\n',
    entry_point="add",
    tests="assert add(1, 2) == 3\nassert add(-1, 1) == 0\n",
    public_tests="assert add(1, 2) == 3\nassert add(0, 0) == 0\n",
)
WRONG = "    return a - b\n"
RIGHT = "    return a + b\n"
TEMPLATE = "Complete the function.\n{prompt}"
TOOLS = ("run_public_tests", "submit")
SEED = 987654321

Item = dict[str, Any] | str | tuple


@dataclass
class Server:
    """What the server answers (`script(n, body)`: the n-th request's reply) and what it saw."""

    url: str = ""
    script: Callable[[int, dict[str, Any]], Item] = lambda n, body: stop_reply("nothing")
    bodies: list[dict[str, Any]] = field(default_factory=list)
    hold_s: float = 0.0
    in_flight: int = 0
    max_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    release: threading.Event = field(default_factory=threading.Event)


class _HTTPServer(ThreadingHTTPServer):
    fake: Server


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    wbufsize = 1 << 16
    server: _HTTPServer

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        fake = self.server.fake
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        with fake.lock:
            number = len(fake.bodies)
            fake.bodies.append(body)
            fake.in_flight += 1
            fake.max_in_flight = max(fake.max_in_flight, fake.in_flight)
        try:
            item = fake.script(number, body)
            time.sleep(fake.hold_s)
        finally:
            with fake.lock:
                fake.in_flight -= 1
        try:
            self._send(fake, item)
        except OSError:  # the client gave up on a trickle: what the test wants
            self.close_connection = True

    def _send(self, fake: Server, item: Item) -> None:
        if item == "stall":  # accept, read, never answer
            fake.release.wait(60)
            self.close_connection = True
            return
        if item in ("trickle-headers", "trickle-body"):
            payload = json.dumps(stop_reply("late")).encode()
            head = (f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                    f"Content-Length: {len(payload)}\r\n\r\n").encode()
            if item == "trickle-body":
                self.wfile.write(head)
                head = b""
            self._trickle(fake, head + payload)
            return
        status, headers = 200, {}
        if isinstance(item, tuple):
            status, headers, item = item
        payload = json.dumps(item).encode()
        self.send_response(status)
        for name, value in {"Content-Type": "application/json", **headers}.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _trickle(self, fake: Server, data: bytes) -> None:
        """One byte every 2 s, until the client hangs up or the test ends."""
        for byte in data:
            self.wfile.write(bytes([byte]))
            self.wfile.flush()
            if fake.release.wait(2):
                break
        self.close_connection = True


def chat(message: dict[str, Any], finish: str = "stop",
         usage: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"id": "chatcmpl-1", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5} if usage is None else usage}


def stop_reply(content: str, **options: Any) -> dict[str, Any]:
    return chat({"role": "assistant", "content": content}, **options)


def tool_call(call_id: str, name: str, arguments: Any) -> dict[str, Any]:
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": raw}}


def calls_reply(*calls: dict[str, Any], **options: Any) -> dict[str, Any]:
    message = {"role": "assistant", "content": None, "tool_calls": list(calls)}
    return chat(message, finish="tool_calls", **options)


def run_tests_reply(code: str = WRONG, call_id: str = "call_run") -> dict[str, Any]:
    return calls_reply(tool_call(call_id, "run_public_tests", {"code": code}))


def script(*items: Item) -> Callable[[int, dict[str, Any]], Item]:
    """The items in order, then the last one for ever."""
    return lambda n, body: items[min(n, len(items) - 1)]


@pytest.fixture
def server():
    httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
    httpd.fake = Server(url=f"http://127.0.0.1:{httpd.server_address[1]}/v1")
    thread = threading.Thread(target=httpd.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    yield httpd.fake
    httpd.fake.release.set()
    httpd.shutdown()
    httpd.server_close()
    thread.join()


def harness(**budgets: Any) -> Harness:
    return Harness(template=TEMPLATE, temperature=0.3, top_p=0.9,
                   **{"max_turns": 6, "max_tokens": 400, **budgets})


def context_of(harness: Harness) -> AgentContext:
    return AgentContext(template=harness.template, temperature=harness.temperature,
                        top_p=harness.top_p, max_tokens=harness.max_tokens,
                        max_turns=harness.max_turns, timeout_s=harness.agent_timeout_s,
                        project_root=".")


@dataclass
class FakeEnvironment:
    """The python-function environment's tools, with every public run failing, no sandbox."""

    tools: tuple = tuple(TOOL_SPECS[name] for name in TOOLS)
    last_program: str | None = None
    calls: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    def opening(self) -> str:
        return TEMPLATE.format(prompt=TASK.prompt)

    def call(self, tool: str, arguments: dict[str, Any]) -> ToolResult:
        self.calls.append((tool, arguments))
        self.last_program = arguments.get("code")
        if tool == "submit":
            return ToolResult("Submitted.", {"submitted": True}, submitted=self.last_program)
        return ToolResult(f"run {len(self.calls)}: 1 of 2 public tests failed", {"passed": False})


@pytest.fixture
def agents():
    made: list[Any] = []

    def build(url: str, plan: Harness, **settings: Any) -> Any:
        made.append(make_agent("candidate", {"agent": "openai", "base_url": url, "model": "m",
                                             "protocol": "tools", **settings}, context_of(plan)))
        return made[-1]

    yield build
    for agent in made:
        agent.close()


def episode(agent: Any, plan: Harness, environment: Any = None,
            seed: int = SEED) -> tuple[Outcome, Any]:
    environment = environment or FakeEnvironment()
    budgets = EpisodeBudgets.start(plan, TASK)
    return run_loop(agent, environment, budgets, TASK, 0, seed), environment


def test_a_scripted_episode_tries_fixes_from_the_failure_it_was_shown_and_submits(
    server: Server, agents
):
    def scripted(n: int, body: dict[str, Any]) -> Item:
        last = body["messages"][-1]
        if n == 0:
            return run_tests_reply(WRONG, "call_a")
        if n == 1:  # the right body only once the failure was seen
            shown = last["role"] == "tool" and "public tests failed" in last["content"]
            return run_tests_reply(RIGHT if shown else WRONG, "call_b")
        return calls_reply(tool_call("call_c", "submit", {"code": RIGHT}))

    server.script = scripted
    plan = harness()
    sandbox = SandboxConfig().open()
    try:
        environment = PythonFunctionEnvironment(TASK, sandbox, EpisodeBudgets.start(
            plan, TASK).execution, TEMPLATE, TOOLS)
        outcome, _ = episode(agents(server.url, plan), plan, environment)
    finally:
        sandbox.close()
    assert outcome.end_reason == "submitted", outcome.error
    assert (outcome.turns, outcome.tool_calls, outcome.program) == (3, 3, RIGHT)
    assert [step.tool for step in outcome.steps] == ["run_public_tests"] * 2 + ["submit"]
    assert outcome.steps[1].observation == "All public tests passed."
    assert len(server.bodies) == 3
    body = server.bodies[2]
    assert body["tools"] == [TOOL_SPECS[name].as_openai() for name in TOOLS]
    assert (body["model"], body["temperature"], body["top_p"]) == ("m", 0.3, 0.9)
    messages = body["messages"]
    assert [m["role"] for m in messages] == ["user", "assistant", "tool", "assistant", "tool"]
    assert messages[0]["content"] == TEMPLATE.format(prompt=TASK.prompt)
    # The assistant messages are kept as the server sent them.
    assert messages[1] == run_tests_reply(WRONG, "call_a")["choices"][0]["message"]
    assert messages[2]["tool_call_id"] == "call_a"
    assert "1 of 2 public tests failed" in messages[2]["content"]
    assert "assert add(1, 2) == 3" in messages[2]["content"]
    assert messages[4] == {"role": "tool", "tool_call_id": "call_b",
                           "content": "All public tests passed."}


def test_max_turns_ends_an_episode_that_never_submits_after_exactly_that_many_requests(
    server: Server, agents
):
    server.script = script(run_tests_reply())
    plan = harness(max_turns=2)
    outcome, environment = episode(agents(server.url, plan), plan)
    assert outcome.end_reason == "max_turns"
    assert len(server.bodies) == 2 and outcome.turns == 2
    assert len(environment.calls) == 2


def test_the_token_budget_caps_each_request_and_ends_the_episode(server: Server, agents):
    def well_behaved(n: int, body: dict[str, Any]) -> Item:
        used = min(60, body["max_tokens"])
        return calls_reply(tool_call(f"c{n}", "run_public_tests", {"code": WRONG}),
                           usage={"prompt_tokens": 10, "completion_tokens": used})

    server.script = well_behaved
    plan = harness(max_tokens=100)
    outcome, _ = episode(agents(server.url, plan), plan)
    assert outcome.end_reason == "max_tokens"
    # 100 asked, 60 spent; 40 left, spent; none left, and a request asks for at least one.
    assert [body["max_tokens"] for body in server.bodies] == [100, 40, 1]
    assert outcome.tokens_out == 101


def test_the_tool_call_budget_ends_the_episode(server: Server, agents):
    server.script = script(run_tests_reply())
    plan = harness(max_tool_calls=2)
    outcome, environment = episode(agents(server.url, plan), plan)
    assert outcome.end_reason == "max_tool_calls"
    assert len(environment.calls) == 2  # the call past the budget is not run
    assert len(server.bodies) == 3


@pytest.mark.parametrize("behaviour", ["trickle-headers", "trickle-body", "stall"])
def test_a_server_that_trickles_or_stalls_cannot_hold_an_episode_past_its_wall_time(
    server: Server, agents, behaviour: str
):
    server.script = script(behaviour)
    plan = harness(agent_timeout_s=3.0)
    started = time.monotonic()
    outcome, _ = episode(agents(server.url, plan, request_timeout_s=300.0), plan)
    elapsed = time.monotonic() - started
    assert outcome.end_reason in ("timeout", "error")
    assert 2.5 < elapsed < 15, elapsed  # it waited for the answer, and not for ever
    assert len(server.bodies) == 1  # no retry past the episode's deadline



@pytest.mark.parametrize("protocol", ["completion", "tools", "text"])
def test_every_episode_ends_by_its_wall_time_whatever_its_request_timeout_and_retries(
    server: Server, protocol: str
):
    # 10 s a request and 3 retries would hold a stalled request 40 s; the episode has 2.
    server.script = script("stall")
    plan = harness(agent_timeout_s=2.0)
    agent = make_agent("candidate", {"agent": "openai", "base_url": server.url, "model": "m",
                                     "protocol": protocol, "request_timeout_s": 10.0,
                                     "max_retries": 3}, context_of(plan))
    started = time.monotonic()
    outcome, _ = episode(agent, plan)
    elapsed = time.monotonic() - started
    agent.close()
    assert outcome.end_reason == "timeout", outcome.error
    assert 1.9 < elapsed < 5, elapsed
    assert len(server.bodies) == 1  # no retry past the episode's deadline

def test_a_session_act_raises_by_its_deadline_on_a_trickling_server(server: Server, agents):
    server.script = script("trickle-headers")
    plan = harness()
    session = agents(server.url, plan).begin(TASK, 0, SEED, EpisodeBrief(
        tuple(TOOL_SPECS[name] for name in TOOLS), {"tokens": 400}))
    started = time.monotonic()
    with pytest.raises(AgentError, match="before the deadline"):
        session.act(None, 3.0)
    assert time.monotonic() - started < 3.0 + 2.0


def test_the_single_shot_agent_bounds_the_whole_request_too(server: Server):
    server.script = script("trickle-body")
    settings = OpenAISettings(base_url=server.url, model="m", request_timeout_s=1.0,
                              max_retries=1)
    agent = OpenAIAgent(settings, context_of(harness()), sleep=lambda s: None)
    started = time.monotonic()
    with pytest.raises(AgentError, match=r"2 attempts; the last: no answer within 1 s"):
        agent.complete(TASK, 0, SEED)
    agent.close()
    assert time.monotonic() - started < 2 * 1.0 + 3.0
    assert len(server.bodies) == 2


def test_a_retry_never_sleeps_past_the_deadline(server: Server):
    server.script = script((429, {"Retry-After": "30"}, {"error": {"message": "busy"}}))
    sleeps: list[float] = []
    plan = harness(agent_timeout_s=5.0)
    agent = OpenAITurnsAgent(OpenAISettings(base_url=server.url, model="m", protocol="tools"),
                             context_of(plan), sleep=sleeps.append)
    outcome, _ = episode(agent, plan)
    agent.close()
    assert outcome.end_reason == "error"
    assert "a retry would wait 30 s" in outcome.error and "HTTP 429" in outcome.error
    assert sleeps == [] and len(server.bodies) == 1


def test_malformed_and_unknown_tool_calls_are_told_to_the_model_and_the_episode_goes_on(
    server: Server, agents
):
    server.script = script(
        calls_reply(tool_call("c1", "run_public_tests", "not json")),
        calls_reply(tool_call("c2", "run_public_tests", "[1, 2]")),
        calls_reply(tool_call("c3", "rm_rf", {"path": "/"})),
        calls_reply(tool_call("c4", "submit", {"code": RIGHT})),
    )
    plan = harness()
    outcome, environment = episode(agents(server.url, plan), plan)
    assert outcome.end_reason == "submitted" and outcome.program == RIGHT
    assert environment.calls == [("submit", {"code": RIGHT})]
    assert outcome.tool_calls == 4  # a call that could not be read still spends one
    told = [body["messages"][-1] for body in server.bodies[1:]]
    assert [m["tool_call_id"] for m in told] == ["c1", "c2", "c3"]
    assert "are not JSON" in told[0]["content"]
    assert "must be a JSON object, not list" in told[1]["content"]
    assert "There is no tool 'rm_rf'" in told[2]["content"]
    assert outcome.steps[0].tool == "run_public_tests" and outcome.steps[0].arguments == {}


def test_only_the_first_tool_call_of_a_reply_is_run_and_the_others_are_answered(
    server: Server, agents
):
    server.script = script(
        calls_reply(tool_call("x", "run_public_tests", {"code": WRONG}),
                    tool_call("y", "submit", {"code": WRONG})),
        calls_reply(tool_call("z", "submit", {"code": RIGHT})),
    )
    plan = harness()
    outcome, environment = episode(agents(server.url, plan), plan)
    assert outcome.program == RIGHT
    assert environment.calls == [("run_public_tests", {"code": WRONG}),
                                 ("submit", {"code": RIGHT})]
    assert server.bodies[1]["messages"][-2:] == [
        {"role": "tool", "tool_call_id": "x", "content": "run 1: 1 of 2 public tests failed"},
        {"role": "tool", "tool_call_id": "y", "content": NOT_RUN},
    ]


def test_a_reply_without_a_tool_call_is_told_so_as_a_user_message(server: Server, agents):
    server.script = script(stop_reply("Let me think."),
                           calls_reply({"type": "function", "function": {
                               "name": "submit", "arguments": json.dumps({"code": RIGHT})}}))
    plan = harness()
    outcome, _ = episode(agents(server.url, plan), plan)
    assert outcome.end_reason == "submitted"
    assert outcome.steps[0].tool is None and outcome.steps[0].message == "Let me think."
    messages = server.bodies[1]["messages"]
    assert messages[-2] == {"role": "assistant", "content": "Let me think."}
    assert messages[-1]["role"] == "user" and "No tool was called" in messages[-1]["content"]


def test_untrusted_usage_is_clamped_or_ignored_and_cost_is_reported_or_priced(
    server: Server, agents
):
    server.script = script(
        run_tests_reply() | {"usage": {"prompt_tokens": 10**30, "completion_tokens": "many"}},
        run_tests_reply() | {"usage": {"prompt_tokens": -5, "completion_tokens": 2.5,
                                       "cost": 0.25}},
        calls_reply(tool_call("s", "submit", {"code": RIGHT}),
                    usage={"prompt_tokens": 1000, "completion_tokens": 100}),
    )
    plan = harness()
    outcome, _ = episode(agents(server.url, plan, price_in_per_mtok=2.0,
                                price_out_per_mtok=10.0), plan)
    assert outcome.end_reason == "submitted", outcome.error
    assert [(s.tokens_in, s.tokens_out) for s in outcome.steps] == [
        (10**9, 0), (0, 2), (1000, 100)]
    assert [s.cost_usd for s in outcome.steps] == pytest.approx(
        [10**9 * 2.0 / 1e6, 0.25, (1000 * 2.0 + 100 * 10.0) / 1e6])


def test_the_single_shot_agent_clamps_usage_too(server: Server):
    server.script = script(stop_reply(f"```python\n{RIGHT}```", usage={
        "prompt_tokens": 10**30, "completion_tokens": -3, "cost": "free"}))
    agent = OpenAIAgent(OpenAISettings(base_url=server.url, model="m"), context_of(harness()))
    completion = agent.complete(TASK, 0, SEED)
    agent.close()
    assert (completion.text, completion.tokens_in, completion.tokens_out) == (RIGHT, 10**9, 0)
    assert completion.cost_usd == 0.0


def test_the_text_protocol_submits_the_block_before_its_action_line(server: Server, agents):
    server.script = script(stop_reply(
        "Here is my answer.\n```python\n" + RIGHT + "```\n**ACTION:** submit"))
    plan = harness()
    outcome, environment = episode(agents(server.url, plan, protocol="text"), plan)
    assert outcome.end_reason == "submitted" and outcome.program == RIGHT
    assert environment.calls == [("submit", {"code": RIGHT})]
    body = server.bodies[0]
    assert "tools" not in body
    first = body["messages"][0]["content"]
    assert first.endswith(TEMPLATE.format(prompt=TASK.prompt))
    assert "ACTION: <one of the actions below>" in first
    assert "- run_public_tests: " in first and "- submit: " in first


def test_a_text_reply_without_an_action_line_calls_no_tool_and_is_reminded(
    server: Server, agents
):
    server.script = script(stop_reply(f"```python\n{WRONG}```\nI am not sure yet."),
                           stop_reply(f"```python\n{RIGHT}```\nACTION: submit"))
    plan = harness()
    outcome, environment = episode(agents(server.url, plan, protocol="text"), plan)
    assert outcome.steps[0].tool is None
    assert outcome.tool_calls == 1 and environment.calls == [("submit", {"code": RIGHT})]
    told = server.bodies[1]["messages"]
    assert told[-2] == {"role": "assistant",
                        "content": f"```python\n{WRONG}```\nI am not sure yet."}
    assert told[-1]["role"] == "user"
    assert "No tool was called" in told[-1]["content"] and REMINDER in told[-1]["content"]


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (f"```python\n{RIGHT}```\nACTION: submit", ("submit", {"code": RIGHT}, "")),
        (f"```python\n{RIGHT}```\naction: Run_Public_Tests",
         ("run_public_tests", {"code": RIGHT}, "")),
        (f"```python\n{WRONG}```\n```python\n{RIGHT}```\nACTION: submit",
         ("submit", {"code": RIGHT}, "")),
        (f"```python\n{RIGHT}```\nACTION: run_public_tests\n```\n{WRONG}```\nACTION: submit",
         ("submit", {"code": WRONG}, "")),
        (f"```python\n{RIGHT}ACTION: submit\n```", (None, {}, "")),
        ("```bash\nls\n```\nACTION: submit", ("submit", {}, "needs the code")),
        ("ACTION: submit", ("submit", {}, "needs the code")),
        ("I would write ACTION: submit later.", (None, {}, "")),
    ],
    ids=["plain", "case", "last block", "last action", "inside a block", "only bash",
         "no block", "not a line of its own"],
)
def test_read_text_action(reply: str, expected: tuple):
    tool, arguments, problem = read_text_action(reply)
    assert (tool, arguments) == expected[:2]
    assert (expected[2] in problem) if expected[2] else problem == ""


def test_two_models_send_the_same_seed_at_every_turn_of_the_same_episode(
    server: Server, agents
):
    server.script = lambda n, body: (run_tests_reply() if n % 3 < 2 else calls_reply(
        tool_call("s", "submit", {"code": RIGHT})))
    plan = harness()
    for model in ("model-a", "model-b"):
        outcome, _ = episode(agents(server.url, plan, model=model), plan)
        assert outcome.end_reason == "submitted"
    expected = [SEED, turn_seed(SEED, 2), turn_seed(SEED, 3)]
    assert [b["model"] for b in server.bodies] == ["model-a"] * 3 + ["model-b"] * 3
    assert [b["seed"] for b in server.bodies] == expected * 2
    assert len(set(expected)) == 3


def test_threads_share_one_client_and_its_cap_on_requests_in_flight(server: Server, agents):
    server.script = script(calls_reply(tool_call("s", "submit", {"code": RIGHT})))
    server.hold_s = 0.05
    plan = harness()
    agent = agents(server.url, plan, max_in_flight=2)
    with ThreadPoolExecutor(max_workers=6) as pool:
        outcomes = list(pool.map(lambda seed: episode(agent, plan, seed=seed)[0], range(6)))
    assert [o.end_reason for o in outcomes] == ["submitted"] * 6
    assert sorted(body["seed"] for body in server.bodies) == list(range(6))
    assert server.max_in_flight == 2


def test_a_refusal_ends_the_episode_as_refused(server: Server, agents):
    server.script = script(stop_reply("No.", finish="content_filter"))
    plan = harness()
    outcome, environment = episode(agents(server.url, plan), plan)
    assert outcome.end_reason == "refused" and environment.calls == []


def test_make_returns_a_multi_turn_agent_only_for_a_multi_turn_protocol():
    settings = {"agent": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m"}
    context = context_of(harness())
    single = make_agent("candidate", settings, context)
    turns = make_agent("candidate", {**settings, "protocol": "text"}, context)
    try:
        assert isinstance(single, OpenAIAgent) and not hasattr(single, "begin")
        assert isinstance(turns, OpenAITurnsAgent) and hasattr(turns, "begin")
    finally:
        single.close()
        turns.close()


@pytest.mark.parametrize("protocol", ["tools", "text"])
def test_a_multi_turn_protocol_refuses_the_completions_endpoint(protocol: str):
    settings = {"agent": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m",
                "endpoint": "completions", "protocol": protocol}
    with pytest.raises(ParamsError, match=rf"checkpoints.candidate.protocol: Value error, "
                                          rf"{protocol} needs endpoint: chat"):
        make_agent("candidate", settings, context_of(harness()))


def test_the_first_turn_may_come_without_an_observation(server: Server, agents):
    server.script = script(calls_reply(tool_call("s", "submit", {"code": RIGHT})))
    plan = harness()
    brief = EpisodeBrief(tuple(TOOL_SPECS[name] for name in TOOLS), {"tokens": 50.0})
    action = agents(server.url, plan).begin(TASK, 0, SEED, brief).act(None, 10.0)
    assert (action.tool, action.arguments, action.call_id) == ("submit", {"code": RIGHT}, "s")
    body = server.bodies[0]
    assert (body["seed"], body["max_tokens"]) == (SEED, 50)
    assert body["messages"] == [{"role": "user", "content": TEMPLATE.format(prompt=TASK.prompt)}]
