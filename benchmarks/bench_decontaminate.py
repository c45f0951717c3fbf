"""Decontamination at scale: 100,000 training items against 1,000 eval items.

    .venv/bin/python benchmarks/bench_decontaminate.py [--train 100000] [--eval 1000]

Items are synthetic Python tasks: a signature, a docstring of pseudo-words drawn from a
Zipf-like vocabulary and a body of 3-15 statements from a varied grammar, about HumanEval's
size, so that their text, code and n-gram statistics resemble real ones without shipping a
real corpus. Leaked variants of eval items (the five kinds of scripts/make_training_corpus.py)
are hidden among the training items, and the run reports how many were found.

Then a naive all-pairs n-gram comparison (every training item's n-grams intersected with every
eval field's) and the indexed one, on the first 5,000 training items: the ratio is the point.
Run by hand; never part of the test suite.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path

# The leak generators live in scripts/, which is not an installed package.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from heldout.contamination.config import DecontaminateConfig  # noqa: E402
from heldout.contamination.fingerprints import split_fingerprints  # noqa: E402
from heldout.contamination.index import EvalIndex  # noqa: E402
from heldout.contamination.scan import scan_source  # noqa: E402
from heldout.contamination.sources import TrainingCorpus, corpus_items  # noqa: E402
from heldout.contamination.text import ngram_hashes, normalize_text, word_hashes  # noqa: E402
from heldout.tasks.sources import Task  # noqa: E402
from scripts.make_training_corpus import LEAKS  # noqa: E402

NGRAM = 13
NAIVE_ITEMS = 5_000
LEAKS_PER_KIND = 20
SYLLABLES = [c + v for c in "bcdfghklmnprstvz" for v in "aeiou"]
OPERATORS = ["+", "-", "*", "//", "%", "**", "&", "|", "^", "<<"]
COMPARISONS = ["<", ">", "<=", ">=", "==", "!=", "in", "not in", "is"]
BUILTINS = ["len", "abs", "sum", "max", "min", "sorted", "int", "str", "float", "round", "set",
            "list", "tuple", "reversed", "any", "all", "bool", "ord", "chr", "hash"]
METHODS = ["append", "split", "strip", "lower", "upper", "get", "pop", "count", "index",
           "replace", "join", "items", "keys", "values", "sort", "extend", "find", "startswith",
           "endswith", "update", "add", "remove", "insert", "copy", "format", "isdigit"]
STATEMENTS = [
    "{t} = {a} {op} {k}",
    "{t} = {f}({a}) {op} {b}",
    "{t} = {a}.{m}({b})",
    "{a}.{m}({b} {op} {k})",
    "{t} = {a}[{b}:{k}]",
    "{t} = [{f}(x) for x in {a} if x {cmp} {k}]",
    "{t} = {{x: {f}(x) {op} {k} for x in {b}}}",
    "{t} = '{w}' if {a} {cmp} {b} else {f}({a})",
    "{t} = {f}({a}, key=lambda x: x[{k}])",
    "{t} = ({a} {op} {b}) {cmp} {k}",
    "{t} = {a}.{m}('{w}').{m}({k})",
    "{t} += {f}({b}) {op} {k}",
    "return {f}({a}) {op} {k}",
]
BLOCKS = [
    "for {t} in {a}:",
    "for {t} in range({f}({a}) {op} {k}):",
    "for {t}, {b} in enumerate({a}.{m}()):",
    "if {a} {cmp} {k} and {b}:",
    "while {f}({a}) {cmp} {k}:",
    "with {f}({a}) as {t}:",
]


def vocabulary(rng: random.Random, size: int) -> list[str]:
    return sorted({"".join(rng.choices(SYLLABLES, k=rng.randint(1, 4))) for _ in range(size)})


class TaskMaker:
    """Synthetic tasks: a Zipf-like vocabulary makes common words common, as in real text."""

    def __init__(self, seed: int):
        self.rng = random.Random(seed)
        self.words = vocabulary(self.rng, 30_000)
        self.weights = [1 / (rank + 1) for rank in range(len(self.words))]

    def text(self, count: int) -> str:
        return " ".join(self.rng.choices(self.words, self.weights, k=count))

    def name(self) -> str:
        return self.rng.choice(self.words[200:])

    def body(self, names: list[str], depth: int = 1) -> list[str]:
        """Statements drawn from a grammar with calls, attributes, slices, constants and
        nesting, so that statement shapes vary as much as they do in real code."""
        pad, rng, lines = "    " * depth, self.rng, []
        for _ in range(rng.randint(1, 3) if depth > 1 else rng.randint(3, 7)):
            target = self.name()
            if depth < 3 and rng.random() < 0.3:
                header = rng.choice(BLOCKS).format(t=target, **self.pick(names))
                lines.append(pad + header)
                lines += self.body([*names, target], depth + 1)
            else:
                lines.append(pad + rng.choice(STATEMENTS).format(t=target, **self.pick(names)))
            names = [*names, target]
        return lines

    def pick(self, names: list[str]) -> dict[str, object]:
        rng = self.rng
        return {"a": rng.choice(names), "b": rng.choice(names), "k": rng.randint(0, 999),
                "op": rng.choice(OPERATORS), "cmp": rng.choice(COMPARISONS),
                "f": rng.choice(BUILTINS), "m": rng.choice(METHODS), "w": rng.choice(self.words)}

    def task(self, task_id: str) -> Task:
        args = [self.name() for _ in range(self.rng.randint(1, 3))]
        prompt = (f"def {self.name()}({', '.join(args)}):\n    \"\"\"{self.text(45)}\n\n"
                  f"    >>> example({self.rng.randint(0, 999)})\n    \"\"\"\n")
        reference = "\n".join([*self.body(args), f"    return {args[0]}"]) + "\n"
        tests = "def check(candidate):\n" + "".join(
            f"    assert candidate({self.rng.randint(0, 99)}) == {self.rng.randint(0, 99)}\n"
            for _ in range(4))
        return Task(id=task_id, group=task_id, prompt=prompt, entry_point="f",
                    tests=tests, reference=reference)


def write_training(path: Path, maker: TaskMaker, count: int, eval_tasks: list[Task]) -> dict:
    """`count` training items with LEAKS_PER_KIND leaks of each kind in random places."""
    rng = random.Random(7)
    leaks = {}
    positions = rng.sample(range(count), LEAKS_PER_KIND * len(LEAKS))
    plan = {p: (kind, eval_tasks[i % len(eval_tasks)])
            for i, (p, kind) in enumerate(zip(positions, [k for k in LEAKS
                                                          for _ in range(LEAKS_PER_KIND)],
                                              strict=True))}
    with path.open("w", encoding="utf-8") as out:
        for number in range(count):
            if number in plan:
                kind, task = plan[number]
                prompt, completion = LEAKS[kind][0](task)
                leaks[f"t{number}"] = (kind, task.id)
            else:
                task = maker.task(f"t{number}")
                prompt, completion = task.prompt, task.reference
            out.write(json.dumps({"id": f"t{number}", "prompt": prompt,
                                  "completion": completion}) + "\n")
    return leaks


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cpu_seconds() -> float:
    """CPU time of this process and of its finished children (the scan's workers)."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def worker_peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def naive_ngram_pairs(train_words: list[list[str]], eval_sets: list[set[int]]) -> int:
    matches = 0
    for words in train_words:
        grams = ngram_hashes(words, NGRAM)
        matches += sum(len(grams & e) / len(e) >= 0.5 for e in eval_sets)
    return matches


def indexed_ngram(index: EvalIndex, train_words: list[list[str]]) -> int:
    return sum(len(index.ngram_overlap("all", words, word_hashes(words))) for words in train_words)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--train", type=int, default=100_000)
    parser.add_argument("--eval", type=int, default=1_000)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    maker = TaskMaker(2026)
    eval_tasks = [maker.task(f"e{i}") for i in range(args.eval)]
    config = DecontaminateConfig()
    corpus = TrainingCorpus(path="train.jsonl", fields=["prompt", "completion"])
    print(f"{args.train:,} training items vs {args.eval:,} eval items, "
          f"{len(LEAKS) * LEAKS_PER_KIND} planted leaks, {args.workers} workers")

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "train.jsonl"
        leaks = write_training(path, maker, args.train, eval_tasks)
        size_mb = path.stat().st_size / 1e6
        rss_before = peak_rss_mb()
        started = time.perf_counter()
        fingerprints = [split_fingerprints("val", "-", eval_tasks[: args.eval // 2], NGRAM),
                        split_fingerprints("test", "-", eval_tasks[args.eval // 2 :], NGRAM)]
        fingerprinted = time.perf_counter()
        index = EvalIndex(fingerprints, config)
        indexed = time.perf_counter()
        cpu_before = cpu_seconds()
        scan = scan_source(index, corpus.path, corpus_items(path, corpus), args.workers)
        finished = time.perf_counter()
        scan_cpu = cpu_seconds() - cpu_before

    found = {m.training_id for m in scan.matches}
    print(f"  training file            {size_mb:8.1f} MB")
    print(f"  eval fingerprints        {fingerprinted - started:8.2f} s")
    print(f"  index                    {indexed - fingerprinted:8.2f} s")
    print(f"  scan                     {finished - indexed:8.2f} s "
          f"({scan.items / (finished - indexed):,.0f} items/s)")
    print(f"  total                    {finished - started:8.2f} s")
    print(f"  scan CPU, all processes  {scan_cpu:8.2f} s "
          f"({scan_cpu / scan.items * 1e3:.2f} ms per item; the machine's load average was "
          f"{os.getloadavg()[0]:.2f})")
    print(f"  peak RSS                 {peak_rss_mb():8.0f} MB "
          f"(+{peak_rss_mb() - rss_before:.0f} MB during the run; largest worker "
          f"{worker_peak_rss_mb():.0f} MB)")
    for kind in LEAKS:
        ids = [i for i, (k, _) in leaks.items() if k == kind]
        print(f"  found {kind:<26} {sum(i in found for i in ids):3d}/{len(ids)}")
    print(f"  other training items matched: {len(found - set(leaks))}")

    subset = [normalize_text(t.prompt + "\n" + t.reference).split()
              for t in (maker.task(f"n{i}") for i in range(NAIVE_ITEMS))]
    eval_sets = [set(field["ngrams"]) for f in fingerprints for item in f["items"]
                 for field in item["fields"].values()]
    started = time.perf_counter()
    naive = naive_ngram_pairs(subset, eval_sets)
    naive_s = time.perf_counter() - started
    started = time.perf_counter()
    fast = indexed_ngram(index, subset)
    fast_s = time.perf_counter() - started
    print(f"n-gram containment on {NAIVE_ITEMS:,} training items x {len(eval_sets):,} eval "
          "fields:")
    print(f"  naive all pairs          {naive_s:8.2f} s  ({naive} matches)")
    print(f"  inverted index           {fast_s:8.2f} s  ({fast} matches)")
    print(f"  ratio                    {naive_s / fast_s:8.0f}x")


if __name__ == "__main__":
    main()
