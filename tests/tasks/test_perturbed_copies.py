"""The copies of a repository task's hidden tests: where they differ from the real one, that
every copy must fail where the real one passes, and that nothing a reader of the file can see
tells the real version from its copies (heldout/tasks/perturbed_copies.py)."""

from __future__ import annotations

import ast
import random
import re
from collections import Counter

import pytest

from heldout.tasks.perturbed_copies import COPIES, check_file

NAME = re.compile(r"def (test_\w+)_([0-9a-f]{16})\(")


def versions(text: str) -> dict[str, str]:
    """{16-hex suffix: the function's source, decorators included} of every version in a
    checked file."""
    lines = text.splitlines(keepends=True)
    found = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef) and (match := NAME.match(f"def {node.name}(")):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            found[match.group(2)] = "".join(lines[first - 1:node.end_lineno])
    return found


def real_and_copies(checked, function: str) -> tuple[str, list[str]]:
    every = versions(checked.text)
    real = checked.renamed[function].rpartition("_")[2]
    return every.pop(real), [source for suffix, source in every.items()
                             if function in source.split("(")[0]]


def run(source: str, namespace: dict) -> bool:
    """Whether the function in `source` passes when called (no fixtures)."""
    scope = dict(namespace)
    exec(compile(source, "<test>", "exec"), scope)
    function = next(value for key, value in scope.items() if key.startswith("test_"))
    try:
        function()
    except AssertionError:
        return False
    return True


ADDED = """from calc import clamp


def test_above():
    assert clamp(5, 0, 3) == 3


def test_far_above():
    assert clamp(100, -1, 7) == 7


def test_below():
    assert clamp(-4, 0, 3) == 0
"""


def test_the_real_version_passes_where_every_copy_fails():
    checked = check_file("", ADDED, {"test_above"}, random.Random(1))
    real, copies = real_and_copies(checked, "test_above")
    fixed = {"clamp": lambda value, low, high: max(low, min(value, high))}
    assert len(copies) == len(checked.copies) >= 3
    assert run(real, fixed)
    assert not any(run(copy, fixed) for copy in copies)
    compile(checked.text, "test_file.py", "exec")


def test_an_input_is_never_perturbed():
    """Only the expected side: a changed input would leave a correct solution passing."""
    for seed in range(30):
        checked = check_file("", ADDED, {"test_above"}, random.Random(seed))
        for source in versions(checked.text).values():
            assert "clamp(5, 0, 3) == " in source


def test_every_copy_shows_the_file_as_the_real_one_does():
    """The expected 3 is also an input here: each copy's value is a number the file shows too,
    so 'the value that appears elsewhere' names no version."""
    shown = {"5", "0", "3", "100", "-1", "7", "-4"}
    for seed in range(30):
        checked = check_file("", ADDED, {"test_above"}, random.Random(seed))
        assert len(checked.copies) == 3  # 6 other numbers shown: 4 versions, not 8
        for source in versions(checked.text).values():
            assert source.rpartition("== ")[2].strip() in shown


def test_the_real_value_sits_anywhere_in_the_run_of_values():
    """An expected value no other line shows: the versions' values are a run of numbers with the
    real one at a uniform place (not always in the middle, nor at an end)."""
    text = "from calc import area\n\n\ndef test_area():\n    assert area(6, 7) == 4212\n"
    ranks = Counter()
    draws = 800
    for seed in range(draws):
        checked = check_file("", text, {"test_area"}, random.Random(seed))
        values = sorted(int(source.rpartition("== ")[2]) for source in
                        versions(checked.text).values())
        assert len(values) == COPIES + 1 and len(set(values)) == COPIES + 1
        ranks[values.index(4212)] += 1
    expected = draws / (COPIES + 1)
    assert all(0.6 * expected < ranks[rank] < 1.4 * expected for rank in range(COPIES + 1)), \
        ranks


def test_a_polarity_is_split_evenly_and_the_copies_fail():
    text = ("from roman import is_roman\n\n\ndef test_agrees():\n    assert is_roman('XCIX')\n"
            "    assert not is_roman('IC')\n    assert is_roman('IV')\n")
    checked = check_file("", text, {"test_agrees"}, random.Random(3))
    real, copies = real_and_copies(checked, "test_agrees")
    canonical = {"is_roman": lambda numeral: numeral in ("XCIX", "IV")}
    assert run(real, canonical) and not any(run(copy, canonical) for copy in copies)
    assert len(set(copies)) == len(copies) == COPIES  # distinct sets of polarities


def test_a_parametrized_expected_value_is_perturbed_in_every_case_and_an_input_never():
    text = """import pytest

from calc import double


@pytest.mark.parametrize("given, wanted", [(1, 2), (21, 42), (50, 100)])
def test_double(given, wanted):
    assert double(given) == wanted
"""
    checked = check_file("", text, {"test_double"}, random.Random(4))
    every = versions(checked.text)
    assert len(every) == COPIES + 1
    real = every.pop(checked.renamed["test_double"].rpartition("_")[2])
    assert "[(1, 2), (21, 42), (50, 100)]" in real
    for source in every.values():
        cases = ast.literal_eval(source.split('wanted", ')[1].split(")\ndef")[0])
        assert [given for given, _wanted in cases] == [1, 21, 50]
        # (1, 2) keeps its 2: a run through 2 holds 1, which the case shows as its input
        assert cases[0] == (1, 2) and cases[1][1] != 42 and cases[2][1] != 100


def test_a_value_built_by_a_call_in_a_case_is_not_perturbed():
    """A case's values are built when the file is collected: a constructor that refused a
    perturbed value would stop every test of the file, the real ones too."""
    text = """import pytest

from intervals import Interval, merge


@pytest.mark.parametrize("items, expected", [([(1, 3)], [Interval(1, 3)])])
def test_merge(items, expected):
    assert merge(items) == expected
"""
    checked = check_file("", text, {"test_merge"}, random.Random(5))
    assert checked.copies == [] and checked.unchecked == ["test_merge"]


@pytest.mark.parametrize("body", [
    "    result = f()\n    if result:\n        return\n    assert result == 4\n",
    "    yield\n    assert f() == 4\n",
])
def test_a_function_that_can_return_before_its_asserts_has_no_sites(body):
    checked = check_file("", f"def test_f():\n{body}", {"test_f"}, random.Random(6))
    assert checked.copies == [] and checked.unchecked == ["test_f"]
    assert re.search(r"def test_f_[0-9a-f]{16}\(", checked.text)


def test_lines_the_base_already_has_are_no_sites():
    """A value the base file shows on the same line would name the real version."""
    base = "def test_old():\n    assert f() == 4212\n"
    after = base + "\n\ndef test_new():\n    assert g() == 9000\n"
    checked = check_file(base, after, {"test_old", "test_new"}, random.Random(7))
    assert checked.unchecked == ["test_old"]
    assert len([name for name in checked.copies if name.startswith("test_new_")]) == COPIES


def test_methods_are_copied_inside_their_class():
    text = ("class TestArea:\n    def test_area(self):\n        assert area(6, 7) == 4212\n\n"
            "    def test_other(self):\n        assert True\n")
    checked = check_file("", text, {"TestArea.test_area"}, random.Random(8))
    tree = ast.parse(checked.text)
    (cls,) = tree.body
    names = [node.name for node in cls.body]
    assert len(names) == COPIES + 2 and "test_other" in names
    assert checked.renamed["TestArea.test_area"].startswith("TestArea.test_area_")
    assert all(copy.startswith("TestArea.test_area_") for copy in checked.copies)
