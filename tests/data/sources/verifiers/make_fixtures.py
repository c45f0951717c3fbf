"""Regenerate the verifiers (0.4.0, `verifiers.v1`) eval fixtures from scratch, offline.

Usage:  python tests/data/sources/verifiers/make_fixtures.py (in a venv with verifiers==0.4.0)

What it does
* starts a deterministic OpenAI-compatible chat-completions server on 127.0.0.1
  (stdlib http.server, random free port, in a thread of this process);
* runs verifiers' own CLI `vf-eval` (subprocess) on the local taskset
  `arith-fixture` (arith_fixture.py beside this file, put on PYTHONPATH) for
    runs/base       model `base`      8 examples x 3 rollouts
    runs/candidate  model `candidate` 8 examples x 3 rollouts (1 rollout gets HTTP 500)
    runs/mismatch   model `base`      4 examples x 2 rollouts
  with `-c 1` (one episode at a time -> deterministic order and answers);
* keeps traces.jsonl + configs/resolved/eval.json per run, saves the head of
  vf-eval's printed final dashboard frame (header, progress line with the average
  reward, rewards/metrics/usage/time rows) as eval_stdout.txt, deletes logs/;
* writes runs/summary.json (what verifiers printed, parsed; the fake server's
  per-request log; averages recomputed from traces.jsonl as a cross-check);
* stops the server. vf-eval runs with HOME=<this dir>/.vfhome (its subprocess
  runtime makes per-rollout dirs under $HOME/.cache/verifiers), removed afterwards.
The eight questions, families and scoring live in arith_fixture.py.

The fake model: for a request it takes the last user message (the question), the
requested model name and k = how many times this (model, question) was already asked
in the current run (0,1,2 = rollout order, since rollouts run sequentially in plan
order). It answers correctly iff sha256(f"{model}|{question}|{k}") maps below the
model's skill; otherwise a wrong integer or, sometimes, a non-numeric reply. It reports
usage {prompt_tokens, completion_tokens, total_tokens, cost}. For model `candidate`,
question idx 3 ("What is 91 - 46?"), k == 1 it returns HTTP 500.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parent
RUNS = HERE / "runs"
VFHOME = HERE / ".vfhome"
VF_EVAL = str(Path(sys.executable).parent / "vf-eval")  # the venv verifiers is in
TASKSET_ID = "arith-fixture"

SKILL = {"base": 0.55, "candidate": 0.85}
ERROR_ON = ("candidate", "What is 91 - 46?", 1)  # (model, question, k) -> HTTP 500
PRICE_PER_TOKEN = 1e-6  # reported as usage.cost (USD)

RUN_SPECS = [
    # (run dir name, model, num examples (-n) or None = all 8, rollouts per example)
    ("base", "base", None, 3),
    ("candidate", "candidate", None, 3),
    ("mismatch", "base", 4, 2),
]

sys.dont_write_bytecode = True  # no __pycache__ beside the fixtures
sys.path.insert(0, str(HERE))
from arith_fixture import QUESTIONS  # noqa: E402

QUESTION_IDX = {q: i for i, (q, _, _) in enumerate(QUESTIONS)}  # == task.data.idx
QUESTION_RE = re.compile(r"What is (-?\d+) ([-+*/]) (-?\d+)\?")


def solve(question: str) -> int | None:
    m = QUESTION_RE.search(question)
    if not m:
        return None
    a, op, b = int(m.group(1)), m.group(2), int(m.group(3))
    return {"+": a + b, "-": a - b, "*": a * b, "/": a // b if b else 0}[op]


def _u(*parts: object) -> float:
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


class FakeModel:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: dict[tuple[str, str], int] = {}
        self.log: list[dict] = []

    def reset(self) -> None:
        with self.lock:
            self.counts.clear()
            self.log.clear()

    def answer(self, model: str, messages: list[dict]) -> tuple[int, dict]:
        users = [m for m in messages if m.get("role") == "user"]
        content = users[-1].get("content") if users else ""
        if isinstance(content, list):
            content = " ".join(p.get("text", "") for p in content if isinstance(p, dict))
        question = str(content or "")
        with self.lock:
            k = self.counts.get((model, question), 0)
            self.counts[(model, question)] = k + 1
        entry = {"q": QUESTION_IDX.get(question), "k": k}
        self.log.append(entry)
        if (model, question, k) == ERROR_ON:
            entry["status"] = 500
            return 500, {
                "error": {
                    "message": "fixture: injected internal server error",
                    "type": "server_error",
                    "code": 500,
                }
            }
        truth = solve(question)
        skill = SKILL.get(model, 0.5)
        right = truth is not None and _u(model, question, k) < skill
        if right:
            text = f"The answer is {truth}."
        elif truth is not None and _u("style", model, question, k) < 0.7:
            off = 1 + int(_u("off", model, question, k) * 9)
            text = f"The answer is {truth + off}."
        else:
            text = "I am not sure."
        entry.update(status=200, correct=right, numeric=bool(re.search(r"\d", text)))
        prompt_text = " ".join(str(m.get("content") or "") for m in messages)
        prompt_tokens = len(prompt_text.split()) + 4 * len(messages)
        completion_tokens = len(text.split())
        created = 1_700_000_000
        return 200, {
            "id": "chatcmpl-" + hashlib.sha256(f"{model}|{question}|{k}".encode()).hexdigest()[:24],
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
                "cost": round((prompt_tokens + completion_tokens) * PRICE_PER_TOKEN, 8),
            },
        }


FAKE = FakeModel()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args) -> None:  # quiet
        pass

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path.rstrip("/").endswith("/models"):
            self._send(200, {"object": "list", "data": [
                {"id": m, "object": "model", "owned_by": "fixture"} for m in SKILL]})
        else:
            self._send(404, {"error": {"message": "not found"}})

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._send(404, {"error": {"message": f"no route {self.path}"}})
            return
        try:
            body = json.loads(raw)
        except ValueError:
            self._send(400, {"error": {"message": "bad json"}})
            return
        if body.get("stream"):
            self._send(400, {"error": {"message": "streaming not supported by fixture"}})
            return
        status, payload = FAKE.answer(str(body.get("model")), body.get("messages") or [])
        self._send(status, payload)


def parse_dashboard(text: str) -> dict:
    """Pull the numbers out of vf-eval's final dashboard frame."""
    out: dict = {}
    m = re.search(r"(\d+)/(\d+) · \S+ · reward (\S+)(?: \(([^)]*)\))? · err (\S+)", text)
    if m:
        out["done"], out["total"] = int(m.group(1)), int(m.group(2))
        out["reward"] = m.group(3)
        if m.group(4):
            out["reward_paren"] = m.group(4)
        out["err"] = m.group(5)
    for label in ("rewards", "metrics"):
        mm = re.search(rf"^\s*{label}\s+(.+)$", text, re.M)
        if mm:
            out[label] = mm.group(1).strip()
    return out


def trim_dashboard(text: str) -> str:
    """Keep the dashboard head (up to the rule before the per-rollout rows, which
    repeat what traces.jsonl holds) and the trailing notice."""
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if line.startswith("\u2500\u2500\u2500"):
            tail = [ln for ln in lines[i + 1:] if not ln.startswith(("\u256d", "\u2502", "\u2570"))]
            kept = lines[: i + 1] + ["[... per-rollout rows trimmed by make_verifiers_fixtures.py ...]"] + tail
            return "\n".join(ln.rstrip() for ln in kept) + "\n"
    return text


def recompute(run_dir: Path) -> dict:
    """Independent averages from traces.jsonl (one episode per line, one trace each)."""
    rows = [json.loads(line) for line in (run_dir / "traces.jsonl").read_text().splitlines() if line.strip()]
    traces = [t for r in rows for t in r["traces"]]

    def reward(t: dict) -> float:
        return sum(v["score"] * v.get("weight", 1.0) for v in t.get("rewards", {}).values() if v)

    ok = [t for t in traces if t["ok"]]
    return {
        "episodes": len(rows),
        "errored": sum(not r["ok"] for r in rows),
        "mean_reward_ok_only": round(sum(map(reward, ok)) / len(ok), 4) if ok else None,
        "mean_reward_errored_as_0": round(sum(map(reward, ok)) / len(traces), 4) if traces else None,
        "mean_parsed_ok_only": round(sum(t["metrics"].get("parsed") or 0 for t in ok) / len(ok), 4) if ok else None,
    }


def dump_summary(summary: dict) -> str:
    """Indented JSON, but one compact line per server_log entry (keeps it small)."""
    placeholder = {}
    for name, run in summary.items():
        key = f"@@LOG_{name}@@"
        placeholder[key] = run["server_log"]
        run = dict(run, server_log=key)
        summary = dict(summary, **{name: run})
    text = json.dumps(summary, indent=2)
    for key, log in placeholder.items():
        body = ",\n".join("      " + json.dumps(e, separators=(",", ":")) for e in log)
        text = text.replace(f'"{key}"', "[\n" + body + "\n    ]")
    return text + "\n"


def main() -> int:
    if RUNS.exists():
        shutil.rmtree(RUNS)
    shutil.rmtree(VFHOME, ignore_errors=True)
    VFHOME.mkdir()
    RUNS.mkdir(parents=True)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base_url = f"http://127.0.0.1:{port}/v1"
    print(f"fake model server on {base_url}")
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(HERE), os.environ.get("PYTHONPATH")])),
        "FIXTURE_API_KEY": "sk-fixture",
        "COLUMNS": "160",
        "NO_COLOR": "1",
        "TERM": "dumb",
        "NO_PROXY": "127.0.0.1,localhost",
        "no_proxy": "127.0.0.1,localhost",
        "HOME": str(VFHOME),
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    summary = {}
    try:
        for name, model, limit, rollouts in RUN_SPECS:
            FAKE.reset()
            cmd = [
                VF_EVAL, TASKSET_ID,
                "-m", model,
                "-r", str(rollouts),
                "-c", "1",
                "--no-push",
                "-o", str(RUNS),
                "--run.name", name,
                "--client.base-url", base_url,
                "--client.api-key-var", "FIXTURE_API_KEY",
                "--env.agent.runtime.type", "subprocess",
            ]
            if limit is not None:
                cmd += ["-n", str(limit)]
            print("$", " ".join(cmd))
            t0 = time.time()
            proc = subprocess.run(cmd, env=env, cwd=str(HERE), capture_output=True,
                                  text=True, timeout=600)
            run_dir = RUNS / name
            (run_dir / "eval_stdout.txt").write_text(trim_dashboard(proc.stdout))
            if proc.returncode != 0:
                print(proc.stdout[-3000:])
                print(proc.stderr[-5000:], file=sys.stderr)
                raise SystemExit(f"vf-eval failed for {name} (rc={proc.returncode})")
            logs = run_dir / "logs"
            if logs.exists():
                shutil.rmtree(logs)
            dash = parse_dashboard(proc.stdout)
            summary[name] = {"model": model, "num_examples": limit or 8,
                             "rollouts_per_example": rollouts,
                             "requests": len(FAKE.log),
                             "seconds": round(time.time() - t0, 1),
                             "vf_eval_printed": dash,
                             "recomputed_from_traces": recompute(run_dir),
                             "server_log": list(FAKE.log)}
            print(f"  {name}: {dash}")
    finally:
        server.shutdown()
        server.server_close()
        shutil.rmtree(VFHOME, ignore_errors=True)
    (RUNS / "summary.json").write_text(dump_summary(summary))
    print(json.dumps({k: v["vf_eval_printed"] for k, v in summary.items()}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
