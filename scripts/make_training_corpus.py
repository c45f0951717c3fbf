"""Write the embedded default's training corpus: what the decontaminate stage checks.

    .venv/bin/python scripts/make_training_corpus.py

The corpus (tasks/training_corpus.jsonl, `{"id", "prompt", "completion"}` a line) is the train
split's HumanEval tasks plus a few deliberately leaked copies of val and test tasks, each made
so that one method catches what the others miss: a verbatim copy, a reformatted copy with
comments, a copy with every identifier renamed, a partial copy inside another document, and a
template variant with scattered word changes. Ids are neutral and the order shuffled, so
nothing in the corpus says which items leaked; that is written to tests/data/planted_leaks.json,
which only the tests read.

Re-run it when the split changes (split.salt, split.fractions): the leaks follow the split.
The leak generators are also used by the tests and the benchmark.
"""

from __future__ import annotations

import ast
import builtins
import json
import random
import re
from pathlib import Path
from typing import Any

import yaml

from heldout.tasks.record import Task
from heldout.tasks.sources import load_tasks
from heldout.tasks.split import SplitConfig, assign

ROOT = Path(__file__).resolve().parent.parent
CORPUS = ROOT / "tasks" / "training_corpus.jsonl"
PLANTED = ROOT / "tests" / "data" / "planted_leaks.json"
SEED = "heldout-training-corpus"

FILLER = (
    "Notes from a study group on programming interviews. We met on Tuesday and went through "
    "a handful of warm-up problems before the main session, mostly about lists, strings and "
    "small bits of arithmetic. Somebody brought up that the hardest part is usually reading "
    "the statement carefully and writing down the edge cases before typing anything. Another "
    "person preferred to start from examples and generalise from there, which led to a long "
    "and friendly argument about testing first. Here is one of the statements we looked at, "
    "as far as I remember it: {fragment} After that we moved on to talking about complexity, "
    "and whether a quadratic solution is acceptable when the input is known to be small. The "
    "consensus was that clarity wins unless the constraints say otherwise, and that a short "
    "comment explaining the choice is worth more than a clever trick nobody can maintain. "
    "Later in the evening the conversation drifted to tooling: which editor everyone used, "
    "whether type checkers catch enough real mistakes to be worth the ceremony, and how to "
    "keep a test suite fast when it grows past a few hundred cases. One of us had spent a "
    "week chasing a bug that turned out to be an off-by-one error in a loop over a range, "
    "and told the story in enough detail that everybody winced at the right moments. We "
    "agreed to meet again next month, to bring one problem each that we had found hard, and "
    "to explain not only the solution but the wrong turns taken on the way to it, since those "
    "are usually where the learning happens. Someone volunteered to book the room, someone "
    "else promised snacks, and the rest of us promised to read the problems in advance."
)
STEP_COMMENTS = ("# work through the input", "# keep the running result here",
                 "# this handles the general case", "# edge cases first")
SUBSTITUTES = ("value", "entry", "thing", "piece", "unit", "record", "figure", "token")


# --- Leak generators: each takes a task, returns a (prompt, completion) training item --------


def verbatim(task: Task) -> tuple[str, str]:
    return task.prompt, task.reference or ""


def reformatted_with_comments(task: Task) -> tuple[str, str]:
    """The program re-printed by ast.unparse (other quotes, spacing, line breaks) with a
    comment before every statement of every function: same AST, different text."""
    source = ast.unparse(ast.parse(task.prompt + (task.reference or "")))
    tree = ast.parse(source)
    starts = sorted({(node.lineno, node.col_offset) for function in ast.walk(tree)
                     if isinstance(function, ast.FunctionDef) for node in function.body
                     if node is not _docstring(function)})
    lines = source.splitlines()
    for number, (lineno, column) in enumerate(reversed(starts)):
        comment = STEP_COMMENTS[number % len(STEP_COMMENTS)]
        lines.insert(lineno - 1, " " * column + comment)
    return "", "\n".join(lines) + "\n"


def _docstring(function: ast.FunctionDef) -> ast.stmt | None:
    first = function.body[0]
    is_text = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
    return first if is_text and isinstance(first.value.value, str) else None


def renamed(task: Task) -> tuple[str, str]:
    """The solution without its docstring and with every name the author chose (function,
    arguments, locals, helpers) replaced: only the structure is left of the original."""
    rng = random.Random(task.id)
    tree = ast.parse(task.prompt + (task.reference or ""))
    chosen = _chosen_names(tree)
    fresh = [f"{rng.choice('abcdefghjkmnpqrstuvwxyz')}{word}" for word in
             rng.sample(range(1000, 10000), len(chosen))]
    mapping = dict(zip(sorted(chosen), fresh, strict=True))
    _Renamer(mapping).visit(tree)
    return "", ast.unparse(tree) + "\n"


def partial_copy(task: Task, share: float = 0.7) -> tuple[str, str]:
    """The first part of the task's prompt inside a longer, unrelated document: the n-gram
    share of the eval prompt is high, the resemblance of the two documents is not."""
    words = task.prompt.split()
    fragment = " ".join(words[: int(len(words) * share)])
    return FILLER.format(fragment=fragment), ""


def template_variant(task: Task, every: int = 20) -> tuple[str, str]:
    """The prompt with one word in `every` replaced, as a templated task family varies its
    instances. With a change every 20 words a 13-gram survives in 7 windows of 20 (share about
    0.35) and a 5-word shingle in 15 of 20 (Jaccard about 0.6)."""
    pieces = re.split(r"(\s+)", task.prompt)
    word_positions = [i for i, piece in enumerate(pieces) if piece.strip()]
    for count, position in enumerate(word_positions[every // 2 :: every]):
        pieces[position] = SUBSTITUTES[count % len(SUBSTITUTES)]
    return "".join(pieces), ""


LEAKS = {
    # kind: (generator, methods that must catch it, methods that must miss it)
    "verbatim": (verbatim, ["exact", "ngram", "minhash", "code"], []),
    "reformatted_with_comments": (reformatted_with_comments, ["code"], ["exact", "normalized"]),
    "renamed": (renamed, ["code"], ["exact", "normalized", "ngram", "minhash"]),
    "partial_copy": (partial_copy, ["ngram"], ["exact", "normalized", "minhash", "code"]),
    "template_variant": (template_variant, ["minhash"], ["exact", "normalized", "ngram", "code"]),
}


def _chosen_names(tree: ast.Module) -> set[str]:
    """Names the author chose: every name the program binds, and any other that is neither a
    builtin nor imported."""
    imported = {alias.asname or alias.name.split(".")[0] for node in ast.walk(tree)
                if isinstance(node, ast.Import | ast.ImportFrom) for alias in node.names}
    bound, used = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (used if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.FunctionDef):
            bound.add(node.name)
    return (bound | {name for name in used if not hasattr(builtins, name)}) - imported


class _Renamer(ast.NodeTransformer):
    def __init__(self, mapping: dict[str, str]):
        self.mapping = mapping

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self.mapping.get(node.id, node.id)
        return node

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.arg = self.mapping.get(node.arg, node.arg)
        node.annotation = None
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        node.name = self.mapping.get(node.name, node.name)
        node.returns = None
        if _docstring(node) is not None:
            node.body = node.body[1:] or [ast.Pass()]
        self.generic_visit(node)
        return node


# --- The corpus --------------------------------------------------------------------------


def split_from_params() -> dict[str, list[Task]]:
    params = yaml.safe_load((ROOT / "params.yaml").read_text(encoding="utf-8"))
    config = SplitConfig.model_validate(params["split"])
    return assign(load_tasks("humaneval"), config.salt, config.fractions)


def leak_targets(splits: dict[str, list[Task]], rng: random.Random) -> dict[str, Task]:
    """One eval task per leak kind, each with enough text and code for its method to have
    something to find, alternating between val and test."""
    eval_tasks = {name: list(splits[name]) for name in ("val", "test")}
    targets = {}
    for number, kind in enumerate(LEAKS):
        pool = [t for t in eval_tasks[("val", "test")[number % 2]]
                if len(t.prompt.split()) >= 60 and len((t.reference or "").split()) >= 15
                and t not in targets.values()]
        targets[kind] = rng.choice(pool)
    return targets


def build() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    rng = random.Random(SEED)
    splits = split_from_params()
    split_of = {t.id: name for name, tasks in splits.items() for t in tasks}
    items: list[tuple[dict[str, Any], dict[str, Any] | None]] = [
        ({"prompt": t.prompt, "completion": t.reference or ""}, None) for t in splits["train"]
    ]
    for kind, task in leak_targets(splits, rng).items():
        generate, must_catch, must_miss = LEAKS[kind]
        prompt, completion = generate(task)
        truth = {"kind": kind, "eval_split": split_of[task.id], "eval_id": task.id,
                 "must_catch": must_catch, "must_miss": must_miss}
        items.append(({"prompt": prompt, "completion": completion}, truth))
    rng.shuffle(items)
    corpus, planted = [], []
    for number, (record, truth) in enumerate(items, start=1):
        training_id = f"doc-{number:04d}"
        corpus.append({"id": training_id, **record})
        if truth is not None:
            planted.append({"training_id": training_id, **truth})
    return corpus, planted


def main() -> None:
    corpus, planted = build()
    CORPUS.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in corpus),
                      encoding="utf-8")
    PLANTED.parent.mkdir(parents=True, exist_ok=True)
    PLANTED.write_text(json.dumps(planted, indent=2) + "\n", encoding="utf-8")
    print(f"{CORPUS.relative_to(ROOT)}: {len(corpus)} items, {len(planted)} planted leaks "
          f"(listed in {PLANTED.relative_to(ROOT)})")


if __name__ == "__main__":
    main()
