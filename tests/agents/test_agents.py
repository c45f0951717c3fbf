from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from heldout.agents.canaries import body_indent
from heldout.agents.demo import DemoAgent, DemoSettings
from heldout.agents.protocol import AgentContext, Completion
from heldout.agents.registry import make_agent
from heldout.episodes.seeds import episode_seed
from heldout.errors import AgentError, InputFileError, ParamsError
from heldout.tasks.sources import load_tasks

CONTEXT = AgentContext(template="{prompt}", temperature=0.8, top_p=0.95, max_tokens=64,
                       max_turns=1, timeout_s=10.0, project_root=".")
TASKS = load_tasks("humaneval")[:40]


def demo(skill: float, narrowing: float = 0.0) -> DemoAgent:
    return DemoAgent(DemoSettings(skill=skill, narrowing=narrowing))


def test_demo_is_deterministic_given_the_seed():
    agent = demo(0.5)
    seed = episode_seed(1, TASKS[0].id, 3)
    assert agent.complete(TASKS[0], 3, seed) == agent.complete(TASKS[0], 3, seed)


def test_common_random_numbers_a_more_skilled_checkpoint_solves_a_superset():
    weak, strong = demo(-0.5), demo(1.5)
    for task in TASKS:
        for sample in range(5):
            seed = episode_seed(7, task.id, sample)
            if weak.complete(task, sample, seed).text == task.reference:
                assert strong.complete(task, sample, seed).text == task.reference


def test_skill_raises_the_share_of_reference_answers():
    def share(agent: DemoAgent) -> float:
        hits = [agent.complete(t, s, episode_seed(3, t.id, s)).text == t.reference
                for t in TASKS for s in range(10)]
        return sum(hits) / len(hits)

    assert share(demo(-1.0)) < share(demo(0.5)) < share(demo(2.0))


def test_narrowing_lowers_the_reference_probability_only_on_the_narrowing_tasks():
    plain, narrow = demo(1.0), demo(1.0, narrowing=0.9)
    changed = [t.id for t in TASKS
               if narrow.probability_of_reference(t) < plain.probability_of_reference(t)]
    assert 0 < len(changed) < len(TASKS)
    for task in TASKS:
        ratio = narrow.probability_of_reference(task) / plain.probability_of_reference(task)
        assert ratio == pytest.approx(0.1 if task.id in changed else 1.0)


def test_demo_without_a_reference_is_an_agent_error():
    task = TASKS[0].model_copy(update={"reference": None})
    with pytest.raises(AgentError, match="needs a reference"):
        demo(0.0).complete(task, 0, 1)


def test_canaries_oracle_returns_the_reference_blind_an_indented_pass():
    oracle = make_agent("oracle", {"agent": "oracle"}, CONTEXT)
    blind = make_agent("blind", {"agent": "blind"}, CONTEXT)
    assert oracle.complete(TASKS[0], 0, 0).text == TASKS[0].reference
    assert blind.complete(TASKS[0], 0, 0).text == "    pass\n"
    nested = TASKS[0].model_copy(update={"prompt": "class A:\n    def f(self):\n",
                                         "entry_point": "f"})
    assert body_indent(nested) == "        "


def test_unknown_kind_and_unknown_setting_name_the_checkpoint_and_field():
    with pytest.raises(ParamsError, match=r"checkpoints.c1.agent: 'gpt' is not an agent kind"):
        make_agent("c1", {"agent": "gpt"}, CONTEXT)
    with pytest.raises(ParamsError,
                       match=r"checkpoints.c2.skil: not a field heldout reads; did you "
                             r"mean 'skill'"):
        make_agent("c2", {"agent": "demo", "skil": 1.0}, CONTEXT)


def test_command_agent_gets_the_task_view_without_hidden_tests(tmp_path: Path):
    script = tmp_path / "agent.py"
    script.write_text(
        "import json, sys\nview = json.load(sys.stdin)\n"
        "assert 'tests' not in view and 'reference' not in view\n"
        "print(f\"    return {view['sample']} # {view['entry_point']}\")\n"
    )
    agent = make_agent("cmd", {"agent": "command", "command": [sys.executable, str(script)]},
                       CONTEXT)
    assert agent.complete(TASKS[0], 4, 9).text == "    return 4 # has_close_elements\n"


def test_command_agent_failure_is_an_agent_error(tmp_path: Path):
    agent = make_agent("cmd", {"agent": "command",
                               "command": f"{sys.executable} -c 'import sys; sys.exit(3)'"},
                       CONTEXT)
    with pytest.raises(AgentError, match="exited 3"):
        agent.complete(TASKS[0], 0, 0)


def python_agent(view: dict, suffix: str = "") -> str | Completion:
    if suffix == "cut":
        return Completion(text="    return", finish_reason="length")
    return f"    return {view['seed']}{suffix}\n"


def test_python_agent_calls_module_function_with_options():
    settings = {"agent": "python", "function": "tests.agents.test_agents:python_agent"}
    assert make_agent("p", settings, CONTEXT).complete(TASKS[0], 0, 5).text == "    return 5\n"
    cut = make_agent("p", {**settings, "options": {"suffix": "cut"}}, CONTEXT)
    assert cut.complete(TASKS[0], 0, 5).finish_reason == "length"
    with pytest.raises(ParamsError, match="cannot load"):
        make_agent("p", {"agent": "python", "function": "tests.nope:f"}, CONTEXT)


def test_replay_reads_human_eval_samples_in_order(tmp_path: Path):
    rows = [{"task_id": "HumanEval/0", "completion": f"    return {i}\n"} for i in range(3)]
    rows.append({"task_id": "HumanEval/1", "completion": "    return []\n", "sample": 5})
    path = tmp_path / "samples.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    context = AgentContext(**{**CONTEXT.__dict__, "project_root": str(tmp_path)})
    agent = make_agent("r", {"agent": "replay", "path": "samples.jsonl"}, context)
    assert agent.complete(TASKS[0], 2, 0).text == "    return 2\n"
    assert agent.complete(TASKS[1], 5, 0).text == "    return []\n"
    with pytest.raises(AgentError, match="no completion for task HumanEval/1 sample 0"):
        agent.complete(TASKS[1], 0, 0)


def test_replay_rejects_rows_that_are_not_samples(tmp_path: Path):
    path = tmp_path / "samples.jsonl"
    path.write_text('{"task_id": "a"}\n')
    context = AgentContext(**{**CONTEXT.__dict__, "project_root": str(tmp_path)})
    with pytest.raises(InputFileError, match="samples.jsonl:1"):
        make_agent("r", {"agent": "replay", "path": "samples.jsonl"}, context)

