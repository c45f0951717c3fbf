"""An inspect_ai task whose answers a mock model gives (offline): the solver sets each sample's
output, right with the probability its model's skill gives, decided by a hash of the sample,
epoch and model, so the logs are the same on every run."""

import hashlib

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput
from inspect_ai.scorer import Score, Target, match, mean, scorer
from inspect_ai.solver import solver
from inspect_ai.util import LimitExceededError

SKILL = {"mockllm/base": 0.3, "mockllm/candidate": 0.8}


def right(skill: float, where: str) -> bool:
    return int.from_bytes(hashlib.sha256(where.encode()).digest()[:4], "big") % 1000 < skill * 1000


@solver
def answer(fail: str, limit: str):
    async def solve(state, generate):
        where = f"{state.model}:{state.sample_id}:{state.epoch}"
        if where == fail:
            raise RuntimeError("the tool server went away")
        if where == limit:
            raise LimitExceededError("token", value=5000, limit=4096)
        ok = right(SKILL[str(state.model)], where)
        state.output = ModelOutput.from_content(str(state.model),
                                                state.target.text if ok else "-1")
        return state
    return solve


@scorer(metrics={"correct": [mean()], "close": [mean()]})
def graded():
    """A dict-valued scorer: the right answer, and any number at all."""
    async def score(state, target: Target):
        got = state.output.completion.strip()
        return Score(value={"correct": float(got == target.text),
                            "close": float(got.lstrip("-").isdigit())})
    return score


@task
def arithmetic(count: int = 34, epochs: int = 2, fail: str = "", limit: str = ""):
    samples = [Sample(id=f"q{i:02d}", input=f"What is {i} plus {i}?", target=str(2 * i),
                      metadata={"family": f"f{i % 4}"}) for i in range(count)]
    return Task(dataset=samples, solver=answer(fail, limit), scorer=[match(), graded()],
                epochs=epochs, fail_on_error=False)
