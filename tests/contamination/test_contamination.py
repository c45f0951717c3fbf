"""Decontamination methods on crafted pairs: what each one must catch and what it must not."""

from __future__ import annotations

import builtins
import json
import keyword
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from heldout.contamination.code import code_fingerprint
from heldout.contamination.config import DecontaminateConfig
from heldout.contamination.fingerprints import split_fingerprints
from heldout.contamination.index import EvalIndex
from heldout.contamination.report import build_report
from heldout.contamination.scan import SourceScan, scan_source
from heldout.contamination.sources import (
    TRAIN_SPLIT_SOURCE,
    TrainingCorpus,
    TrainingItem,
    corpus_items,
)
from heldout.contamination.text import normalize_text
from heldout.errors import InputFileError, StageError
from heldout.tasks.record import Task

PROMPT = '''def longest_plateau(values):
    """Return the length of the longest run of equal neighbouring values in a list of
    integers. A run of one counts, and an empty list has no run at all, so it gives zero.
    The list is read once from left to right, keeping the current run and the best so far.

    >>> longest_plateau([1, 2, 2, 2, 3, 3])
    3
    >>> longest_plateau([])
    0
    """
'''
REFERENCE = """    best = 0
    current = 0
    previous = None
    for value in values:
        if value == previous:
            current += 1
        else:
            current = 1
        previous = value
        best = max(best, current)
    return best
"""
TESTS = """def check(candidate):
    assert candidate([1, 2, 2, 2, 3, 3]) == 3
    assert candidate([]) == 0
    assert candidate([5]) == 1
"""
EVAL = Task(id="plateau", group="runs", prompt=PROMPT, entry_point="longest_plateau",
            tests=TESTS, reference=REFERENCE)

# The crafted training items, by what was done to the eval item.
VERBATIM = {"prompt": PROMPT, "completion": REFERENCE}
WHITESPACE_AND_CASE = {
    "prompt": textwrap.indent(" ".join(PROMPT.split()).upper(), "  "), "completion": ""}
COMMENTED = {"prompt": "", "completion": PROMPT + "".join(
    f"{line}  # step {number}\n" for number, line in enumerate(REFERENCE.splitlines()))}
RENAMED = {"prompt": "", "completion": """def f(xs):
    a = 0
    b = 0
    c = None
    for v in xs:
        if v == c:
            b += 1
        else:
            b = 1
        c = v
        a = max(a, b)
    return a
"""}
SIMILAR_DOCSTRING_OTHER_FUNCTION = {"prompt": '''def count_rising(values):
    """Count how many times a value is larger than the one just before it in a list of
    integers; an empty list or a list of one value has no rises, so it gives zero.
    """
''', "completion": """    return sum(1 for a, b in zip(values, values[1:]) if b > a)
"""}
SAME_DOCSTRING_OTHER_BODY = {"prompt": PROMPT, "completion": """    from itertools import groupby
    return max((len(list(group)) for _, group in groupby(values)), default=0)
"""}
OTHER_ALGORITHM = {"prompt": "", "completion": """def plateau(values):
    longest, start = 0, 0
    for end in range(1, len(values) + 1):
        if end == len(values) or values[end] != values[start]:
            longest = max(longest, end - start)
            start = end
    return longest
"""}
NOTES = ("Notes from our study group, with plenty of other discussion around it that has "
         "nothing to do with any one exercise: about reading statements carefully, testing edge "
         "cases first, naming things well, keeping functions short, writing the docstring "
         "before the body, and asking what the input looks like before choosing a data "
         "structure. We argued for a while about recursion against loops, agreed that both are "
         "fine when the reader can follow them, and moved on.")
PARTIAL_COPY = {"prompt": NOTES + " Then we looked at this one: " + " ".join(PROMPT.split()[:50])
                + " and went on to talk about complexity, memory, readability, code review "
                "habits, and whether a quadratic solution is acceptable when the input is small. "
                + NOTES, "completion": ""}


def near_duplicate(text: str, every: int = 20) -> str:
    """One word in `every` replaced, as a templated task family varies its instances."""
    words = text.split()
    for position in range(every // 2, len(words), every):
        words[position] = "thing"
    return " ".join(words)


NEAR_DUPLICATE = {"prompt": near_duplicate(PROMPT), "completion": ""}


def index_of(*tasks: Task, **settings: object) -> EvalIndex:
    return EvalIndex([split_fingerprints("val", "digest", list(tasks), 13)],
                     DecontaminateConfig(**settings))


def caught(fields: dict[str, str], index: EvalIndex | None = None, group: str | None = None):
    matches, _ = (index or index_of(EVAL)).scan(TrainingItem("corpus", "t1", fields, group))
    return {m.method for m in matches}


@pytest.mark.parametrize(
    ("training", "must_catch", "must_miss"),
    [
        (VERBATIM, {"exact", "ngram", "minhash", "code"}, set()),
        (WHITESPACE_AND_CASE, {"normalized"}, {"exact", "code"}),
        (COMMENTED, {"code"}, {"exact", "normalized"}),
        (RENAMED, {"code"}, {"exact", "normalized", "ngram", "minhash"}),
        (SIMILAR_DOCSTRING_OTHER_FUNCTION, set(), {"exact", "normalized", "ngram", "minhash",
                                                   "code"}),
        # The prompt leaked word for word, so the text methods must say so; the code did not.
        (SAME_DOCSTRING_OTHER_BODY, {"exact", "ngram", "minhash"}, {"code"}),
        (OTHER_ALGORITHM, set(), {"exact", "normalized", "ngram", "minhash", "code"}),
        (PARTIAL_COPY, {"ngram"}, {"exact", "normalized", "minhash", "code"}),
        (NEAR_DUPLICATE, {"minhash"}, {"exact", "normalized", "ngram", "code"}),
    ],
    ids=["verbatim", "whitespace-and-case", "added-comments", "renamed",
         "similar-docstring-other-function", "same-docstring-other-body", "other-algorithm",
         "partial-copy", "near-duplicate"],
)
def test_each_method_catches_its_pairs_and_only_those(training, must_catch, must_miss):
    methods = caught(training)
    assert must_catch <= methods, f"missed by {must_catch - methods}"
    assert not methods & must_miss, f"wrongly caught by {methods & must_miss}"


def test_matches_carry_their_evidence():
    matches, unparsable = index_of(EVAL).scan(TrainingItem("corpus.jsonl", "t9", PARTIAL_COPY,
                                                           line=4))
    (match,) = matches
    assert unparsable, "it quotes half a function: code that does not parse"
    assert (match.method, match.source, match.training_id, match.training_line) == (
        "ngram", "corpus.jsonl", "t9", 4)
    assert (match.eval_split, match.eval_id, match.eval_field) == ("val", "plateau", "prompt")
    assert 0.5 <= match.score < 1
    assert match.training_snippet in normalize_text(PARTIAL_COPY["prompt"])
    assert match.training_snippet in normalize_text(PROMPT), "the shared words are the evidence"


def test_group_keys_are_compared():
    assert "group" in caught({"prompt": "unrelated words entirely"}, group="runs")
    assert "group" not in caught({"prompt": "unrelated words entirely"}, group="other")


def test_unparsable_code_falls_back_to_text_and_is_counted():
    broken = {"text": PROMPT + REFERENCE.replace("for value in values:", "for value in values")}
    scan = scan_source(index_of(EVAL), "corpus", [
        TrainingItem("corpus", "broken", broken), TrainingItem("corpus", "ok", VERBATIM),
        TrainingItem("corpus", "prose", {"text": "no code here, only words"})])
    assert scan.code_unparsable == 1, "prose is not code that failed to parse"
    methods = {m.method for m in scan.matches if m.training_id == "broken"}
    assert "code" not in methods and {"ngram", "minhash"} <= methods


def test_text_shared_by_several_eval_items_is_template_not_evidence():
    harness = ("this prints if this assert fails and is good for debugging so read the "
               "message carefully before changing anything in the solution")
    tasks = [Task(id=f"t{i}", prompt=f"def f{i}(x):\n    '''Task number {i}.'''\n",
                  entry_point=f"f{i}", tests=f"# {harness}\nassert f{i}({i}) == {i}\n")
             for i in range(3)]
    training = {"prompt": harness}
    assert "ngram" not in caught(training, index_of(*tasks)), "shared by three: template"
    assert "ngram" in caught(training, index_of(*tasks[:1]))


def test_literals_by_type_is_a_setting():
    changed_constants = {"prompt": "", "completion": RENAMED["completion"].replace(
        "b = 1", "b = 2").replace("a = 0", "a = 5")}
    assert "code" not in caught(changed_constants)
    assert "code" in caught(changed_constants, index_of(EVAL, code_literals="type"))


def test_a_tiny_function_is_too_common_to_be_evidence():
    tiny = Task(id="inc", prompt="def inc(x):\n    '''Add one.'''\n", entry_point="inc",
                tests="assert inc(1) == 2\n", reference="    return x + 1\n")
    assert "code" not in caught({"prompt": "def g(y):\n    return y + 1\n"}, index_of(tiny))


# --- The rename-invariant code fingerprint ---------------------------------------------------


def test_code_fingerprint_ignores_names_formatting_comments_docstrings_and_aliases():
    original = """import numpy as np

def total(values: list[float], scale) -> float:
    '''Sum, scaled.'''
    sum = 0
    for value in values:
        sum += np.sqrt(value) * scale  # the root
    return sum
"""
    rewritten = """import numpy as numeric
def add_up(xs, k):
    acc=0
    for x in xs: acc+=numeric.sqrt(x)*k
    return acc
"""
    assert code_fingerprint(original) == code_fingerprint(rewritten)
    other_module = rewritten.replace("import numpy as numeric", "import math as numeric")
    assert code_fingerprint(original) != code_fingerprint(other_module)
    assert code_fingerprint("def f(:\n") is None


IDENTIFIERS = st.from_regex(r"[a-z][a-z0-9_]{0,7}", fullmatch=True).filter(
    lambda name: not keyword.iskeyword(name) and not hasattr(builtins, name))
OPERATORS = ["+", "-", "*", "//", "%"]


@st.composite
def functions(draw):
    """A function template over variables v0, v1, ... and operator slots o0, o1, ...: the
    names and operators are filled in afterwards, so one template gives renamed copies."""
    arguments = draw(st.integers(1, 3))
    variables = [f"v{i}" for i in range(arguments)]
    lines, operators = [], []

    def operator() -> str:
        operators.append(draw(st.sampled_from(OPERATORS)))
        return f"{{o{len(operators) - 1}}}"

    for _ in range(draw(st.integers(1, 6))):
        a, b = draw(st.sampled_from(variables)), draw(st.sampled_from(variables))
        target = f"v{len(variables)}"
        kind = draw(st.sampled_from(["assign", "constant", "if", "for"]))
        if kind == "assign":
            lines.append(f"    {{{target}}} = {{{a}}} {operator()} {{{b}}}")
        elif kind == "constant":
            lines.append(f"    {{{target}}} = {{{a}}} {operator()} {draw(st.integers(0, 9))}")
        elif kind == "if":
            lines += [f"    {{{target}}} = {{{b}}}", f"    if {{{a}}} > {{{b}}}:",
                      f"        {{{target}}} = {{{a}}} {operator()} {{{b}}}"]
        else:
            lines += [f"    {{{target}}} = {{{a}}}", f"    for i_ in range({{{b}}}):",
                      f"        {{{target}}} = {{{target}}} {operator()} i_"]
        variables.append(target)
    lines.append(f"    return {{{variables[-1]}}} {operator()} {{v0}}")
    signature = f"def {{fn}}({', '.join(f'{{v{i}}}' for i in range(arguments))}):"
    return "\n".join([signature, *lines]) + "\n", len(variables), operators


def render(template: str, names: list[str], operators: list[str]) -> str:
    slots = {"fn": names[0], **{f"v{i}": name for i, name in enumerate(names[1:])},
             **{f"o{i}": op for i, op in enumerate(operators)}}
    return template.format(**slots)


@settings(max_examples=150, deadline=None)
@given(data=st.data(), program=functions())
def test_consistent_renaming_never_changes_the_code_fingerprint(data, program):
    template, count, operators = program
    names = st.lists(IDENTIFIERS.filter(lambda n: n != "i_"), min_size=count + 1,
                     max_size=count + 1, unique=True)
    first, second = data.draw(names), data.draw(names)
    before = code_fingerprint(render(template, first, operators))
    after = code_fingerprint(render(template, second, operators))
    assert before is not None and before == after


@settings(max_examples=150, deadline=None)
@given(data=st.data(), program=functions())
def test_changing_an_operator_changes_the_code_fingerprint(data, program):
    template, count, operators = program
    names = [f"n{i}" for i in range(count + 1)]
    slot = data.draw(st.integers(0, len(operators) - 1))
    changed = list(operators)
    changed[slot] = data.draw(st.sampled_from([op for op in OPERATORS if op != operators[slot]]))
    before = code_fingerprint(render(template, names, operators))
    after = code_fingerprint(render(template, names, changed))
    assert before.functions.keys() != after.functions.keys()


def test_fingerprints_hashed_another_way_are_refused():
    fingerprints = split_fingerprints("val", "d", [EVAL], 13)
    with pytest.raises(StageError, match="ngram_hash differ.*re-run the split stage"):
        EvalIndex([fingerprints | {"ngram_hash": "blake2b-64"}], DecontaminateConfig())


def test_fingerprint_files_hold_hashes_not_text():
    fingerprints = split_fingerprints("val", "d" * 64, [EVAL], 13)
    (item,) = fingerprints["items"]
    assert set(item["program"]) == {"sha256", "normalized_sha256", "minhash", "code"}
    assert set(item["program"]["code"]) == {"keep", "type"}
    assert len(item["fields"]["prompt"]["minhash"]["signature"]) == 128
    serialized = json.dumps(fingerprints)
    assert "longest_plateau" not in serialized and "neighbouring" not in serialized


# --- Training sources and the report ---------------------------------------------------------


def test_a_corpus_is_streamed_and_its_bad_lines_reported_together(tmp_path: Path):
    path = tmp_path / "corpus.jsonl"
    path.write_text("\n".join([
        json.dumps({"id": 1, "text": "fine"}),
        json.dumps({"id": "b"}),
        "{not json",
        json.dumps({"text": "no id"}),
        json.dumps({"id": "c", "text": 3}),
    ]) + "\n")
    corpus = TrainingCorpus(path="corpus.jsonl", fields=["text"])
    with pytest.raises(InputFileError) as error:
        items = list(corpus_items(path, corpus))
    message = str(error.value)
    assert "corpus.jsonl:3: invalid JSON" in message
    assert "corpus.jsonl:4: field 'id'" in message
    assert "corpus.jsonl:5: field 'text': expected a string" in message
    path.write_text("\n".join(path.read_text().splitlines()[:2]) + "\n")
    items = list(corpus_items(path, corpus))
    assert [(i.id, i.fields, i.line) for i in items] == [
        ("1", {"text": "fine"}, 1), ("b", {"text": ""}, 2)]


@pytest.mark.parametrize("policy", ["flag", "drop"])
def test_the_policy_applies_to_corpus_leaks_not_to_removed_train_items(policy):
    index = index_of(EVAL)
    from_train = scan_source(index, TRAIN_SPLIT_SOURCE, [TrainingItem(
        TRAIN_SPLIT_SOURCE, "train-task", VERBATIM)])
    from_corpus = scan_source(index, "corpus.jsonl", [
        TrainingItem("corpus.jsonl", "leak", RENAMED),
        TrainingItem("corpus.jsonl", "clean", OTHER_ALGORITHM)])
    empty = scan_source(index, "other.jsonl", [])
    config = DecontaminateConfig(policy=policy)
    report = build_report(config, [from_train, from_corpus, empty], {"val": "d"}, {"plateau": EVAL})
    assert report["removed_train_ids"] == ["train-task"]
    assert report["flagged_eval_ids"] == {"val": ["plateau"], "test": []}
    assert report["excluded_eval_ids"] == (
        {"val": ["plateau"], "test": []} if policy == "drop" else {"val": [], "test": []})
    assert report["counts"]["code"] == {"val": 2, "test": 0}
    assert {(m["source"], m["training_id"]) for m in report["matches"]} == {
        (TRAIN_SPLIT_SOURCE, "train-task"), ("corpus.jsonl", "leak")}
    assert all(m["eval_snippet"] for m in report["matches"]), "val matches show the eval side"


def test_test_split_matches_show_no_text():
    index = EvalIndex([split_fingerprints("test", "d", [EVAL], 13)], DecontaminateConfig())
    scan = scan_source(index, "corpus.jsonl", [TrainingItem("corpus.jsonl", "x", VERBATIM)])
    report = build_report(DecontaminateConfig(), [scan], {"test": "d"}, {})
    assert report["flagged_eval_ids"]["test"] == ["plateau"]
    assert all(m["training_snippet"] is None and m["eval_snippet"] is None
               for m in report["matches"])


def test_workers_find_exactly_what_one_process_finds():
    items = [TrainingItem("c", f"t{i}", fields) for i, fields in enumerate(
        [VERBATIM, RENAMED, OTHER_ALGORITHM, PARTIAL_COPY, NEAR_DUPLICATE] * 3)]
    one = scan_source(index_of(EVAL), "c", items)
    two = scan_source(index_of(EVAL), "c", items, workers=2)
    assert isinstance(two, SourceScan) and two.items == one.items == 15
    assert sorted(map(repr, two.matches)) == sorted(map(repr, one.matches))
    assert len(one.matched_ids) == 12
