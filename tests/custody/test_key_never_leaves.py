"""The test key never leaves heldout (issue 23, item 2): no agent may name it as its API key or
hold it under another name, and an endpoint that records every header it receives never sees
it. (What a `command` agent can find of it is tests/agents/test_agent_steps.py's.)"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from flows.params import check_params_file
from heldout.errors import HeldoutError, ParamsError
from stages import rollouts, split
from tests.conftest import TEST_KEY_HEX, configure_small_project

REPLY = {"id": "x", "object": "chat.completion", "model": "m",
         "choices": [{"index": 0, "finish_reason": "stop",
                      "message": {"role": "assistant", "content": "```python\n    return 0\n```"}}],
         "usage": {"prompt_tokens": 1, "completion_tokens": 1}}


class _Recorder(BaseHTTPRequestHandler):
    def do_POST(self):  # noqa: N802 - http.server's name
        self.server.headers_seen.append(dict(self.headers.items()))
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = json.dumps(REPLY).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def endpoint():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    server.headers_seen = []
    thread = threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def remote_project(project: Path, endpoint, **agent) -> Path:
    url = f"http://127.0.0.1:{endpoint.server_address[1]}/v1"
    checkpoints = {"base": {"agent": "demo", "skill": -0.5},
                   "remote": {"agent": "openai", "base_url": url, "model": "m", **agent}}
    configure_small_project(project, tasks=6, n=1, checkpoints=checkpoints)
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["sensitivity"]["checkpoints"] = []
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return project


def headers_hold_the_key(endpoint) -> list[str]:
    return [f"{name}: …" for headers in endpoint.headers_seen for name, value in headers.items()
            if TEST_KEY_HEX.lower() in value.lower()]


def test_an_agent_naming_the_test_key_as_its_api_key_is_refused(project, endpoint):
    remote_project(project, endpoint, api_key_env="HELDOUT_TEST_KEY")
    with pytest.raises(ParamsError, match="holds the test key, which never leaves heldout"):
        check_params_file(project)
    split.run(project)
    with pytest.raises(HeldoutError, match="holds the test key"):
        rollouts.run("remote", project)
    assert endpoint.headers_seen == []


def test_the_test_key_under_another_name_is_refused(project, endpoint, monkeypatch):
    monkeypatch.setenv("INNOCENT_LOOKING_KEY", TEST_KEY_HEX)
    remote_project(project, endpoint, api_key_env="INNOCENT_LOOKING_KEY")
    with pytest.raises(ParamsError, match=r"checkpoints\.remote\.api_key_env: holds the test "
                                          r"key") as refused:
        check_params_file(project)
    assert TEST_KEY_HEX not in str(refused.value)
    params = yaml.safe_load((project / "params.yaml").read_text())
    params["checkpoints"]["remote"]["system_prompt"] = TEST_KEY_HEX  # pasted anywhere
    del params["checkpoints"]["remote"]["api_key_env"]
    (project / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    with pytest.raises(ParamsError, match=r"checkpoints\.remote\.system_prompt: holds the test"):
        check_params_file(project)
    assert endpoint.headers_seen == []


def test_an_endpoint_that_records_every_header_never_sees_the_key(project, endpoint,
                                                                   monkeypatch):
    monkeypatch.setenv("REMOTE_API_KEY", "sk-its-own-key")
    remote_project(project, endpoint, api_key_env="REMOTE_API_KEY")
    check_params_file(project)
    split.run(project)
    rollouts.run("remote", project)
    assert endpoint.headers_seen  # a request per val episode
    assert all(h.get("Authorization") == "Bearer sk-its-own-key" for h in endpoint.headers_seen)
    assert headers_hold_the_key(endpoint) == []
