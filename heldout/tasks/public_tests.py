"""Public tests derived from a prompt's doctest examples: what `run_public_tests` shows an agent.

The rule, applied to the docstring of the entry point's function as the prompt writes it (its
source text, escapes such as `\\n` left as written, which is what the agent reads):

1. An example is a line starting `>>> ` (after indentation) with its `... ` continuation lines
   (the source, EXPR), followed by its expected output: the next lines up to a blank line, the
   next `>>>` line or the docstring's end, each stripped, joined by newlines (EXPECTED).
2. The example becomes `assert EXPR == EXPECTED` when
   - EXPR parses as one Python expression that is a call of the entry point by name,
     `ENTRY(...)`, whose arguments (positional and keyword) are all literals
     (`ast.literal_eval` accepts each);
   - EXPECTED parses with `ast.literal_eval`; an empty output means `None`, as in doctest
     (an expression that prints nothing returned None).
   A self-checking example, EXPR written `ENTRY(...) == VALUE` with VALUE a literal and with
   no output or the output `True` (the form some HumanEval prompts use), is taken as the
   call `ENTRY(...)` with expected output VALUE.
3. When EXPECTED is a float (the value itself, not one inside a container) the assert allows
   for rounding: `assert abs(ENTRY(...) - EXPECTED) < 1e-6`. Every other one compares exactly.
4. Every other example is skipped, with a reason: an output that is an exception traceback
   (`exception`), an EXPR that is not one expression (`not an expression`), that is not a call
   of the entry point (`not a call of the entry point`, e.g. `round(ENTRY(x), 2)` or an
   assignment), whose arguments are not literals (`arguments not literals`), or an output
   that is not a literal (`output not a literal`).

Both sides are written with `ast.unparse`, so a multi-line example is one line, each assert
starts `assert ` and the text depends only on the prompt and the entry point: the same prompt
gives the same text, its asserts in the docstring's order, one a line. A prompt without a
usable example has no public tests (None).

A docstring can be wrong, and a public test that the task's own solution fails would teach an
agent the wrong function. Which examples are wrong is known only by running a solution, which
needs the sandbox, so it is not done at load time: scripts/make_public_tests.py derives the
embedded HumanEval set's public tests once, runs each assert against the task's canonical
solution through the judge, drops those it fails (refuted) and writes the rest, with the rule
and the counts, to tasks/humaneval_public_tests.json, which heldout.tasks.sources reads (see
docs/public-tests.md).
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path

from heldout.errors import InputFileError, Problem

# The public tests of the embedded HumanEval set, written by scripts/make_public_tests.py.
HUMANEVAL_PUBLIC_TESTS = Path(__file__).resolve().parents[2] / "tasks" / \
    "humaneval_public_tests.json"

# The rule in brief, as the file of the embedded set's public tests records it.
RULE = (
    "From the docstring of the entry point's function as the prompt writes it: each doctest "
    "example, `>>> EXPR` with its `... ` continuation lines and its expected output (the next "
    "lines up to a blank line, the next `>>>` or the docstring's end; none means None), becomes "
    "`assert EXPR == EXPECTED` when EXPR is a call of the entry point with literal arguments and "
    "EXPECTED parses with ast.literal_eval; `ENTRY(...) == VALUE` with no output or `True` "
    "counts as ENTRY(...) expecting VALUE; a float EXPECTED is checked as "
    "`assert abs(EXPR - EXPECTED) < 1e-6`. Other examples (tracebacks, other expressions, "
    "outputs that are not literals) are skipped. Both sides are written by ast.unparse, one "
    "assert a line in the docstring's order. Asserts the task's canonical solution fails in "
    "the judge are dropped (refuted)."
)

# The tolerance of a float's assert, written as it appears in the assert.
FLOAT_TOLERANCE = "1e-6"

SKIP_REASONS = (
    "exception",
    "not an expression",
    "not a call of the entry point",
    "arguments not literals",
    "output not a literal",
)


@dataclass(frozen=True)
class Example:
    """One doctest example: its source (continuations joined by newlines), its expected
    output (stripped lines joined by newlines, "" for none) and the docstring line of its
    `>>>` (1-based)."""

    source: str
    want: str
    line: int


@dataclass(frozen=True)
class Derived:
    """What the rule makes of one example: its assert, or the reason it was skipped."""

    example: Example
    assertion: str | None
    skipped: str | None = None


def public_tests_from_prompt(prompt: str, entry_point: str) -> str | None:
    """The public tests the rule derives from the prompt: one assert a line, or None when no
    example is usable."""
    return render([d.assertion for d in derive(prompt, entry_point) if d.assertion])


def render(assertions: list[str]) -> str | None:
    """Asserts as public tests' text: one a line, None for none."""
    return "".join(f"{a}\n" for a in assertions) or None


def derive(prompt: str, entry_point: str) -> list[Derived]:
    """Every example of the entry point's docstring, in order, each with its assert or the
    reason it was skipped."""
    return [derive_example(example, entry_point) for example in
            doctest_examples(docstring_source(prompt, entry_point) or "")]


def docstring_source(prompt: str, entry_point: str) -> str | None:
    """The text of the entry point's docstring as written in the prompt (between its quotes,
    escapes not processed), or None if the prompt does not parse or the function has none."""
    try:
        module = ast.parse(prompt)
    except SyntaxError:
        return None
    function = next((node for node in ast.walk(module)
                     if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                     and node.name == entry_point), None)
    if function is None or not function.body:
        return None
    first = function.body[0]
    if not (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)):
        return None
    segment = ast.get_source_segment(prompt, first.value) or ""
    body = segment.lstrip("rRuU")
    quote = next((q for q in ('"""', "'''", '"', "'") if body.startswith(q)), None)
    if quote is None or not body.endswith(quote) or len(body) < 2 * len(quote):
        return None  # implicitly concatenated strings: not a docstring this rule reads
    return body[len(quote):-len(quote)]


def doctest_examples(docstring: str) -> list[Example]:
    """The doctest examples of a docstring, in order (rule, step 1)."""
    lines = docstring.splitlines()
    examples: list[Example] = []
    index = 0
    while index < len(lines):
        stripped = lines[index].strip()
        if not _is_prompt(stripped, ">>>"):
            index += 1
            continue
        start = index
        source = [_after(stripped, ">>>")]
        index += 1
        while index < len(lines) and _is_prompt(lines[index].strip(), "..."):
            source.append(_after(lines[index].strip(), "..."))
            index += 1
        want: list[str] = []
        while index < len(lines) and lines[index].strip() and \
                not _is_prompt(lines[index].strip(), ">>>"):
            want.append(lines[index].strip())
            index += 1
        examples.append(Example("\n".join(source), "\n".join(want), start + 1))
    return examples


def derive_example(example: Example, entry_point: str) -> Derived:
    """The assert of one example, or why it has none (rule, steps 2 to 4)."""
    if example.want.startswith("Traceback (most recent call last):"):
        return Derived(example, None, "exception")
    try:
        expression = ast.parse(example.source.strip(), mode="eval").body
    except SyntaxError:
        return Derived(example, None, "not an expression")
    want = example.want or "None"
    if _is_call_of(expression, entry_point):
        call = expression
    elif (isinstance(expression, ast.Compare) and len(expression.ops) == 1
          and isinstance(expression.ops[0], ast.Eq) and _is_call_of(expression.left, entry_point)
          and example.want in ("", "True")):
        call, want = expression.left, ast.unparse(expression.comparators[0])
    else:
        return Derived(example, None, "not a call of the entry point")
    assert isinstance(call, ast.Call)
    arguments = [*call.args, *(keyword.value for keyword in call.keywords)]
    if any(isinstance(a, ast.Starred) for a in call.args) or \
            any(k.arg is None for k in call.keywords) or not all(map(_is_literal, arguments)):
        return Derived(example, None, "arguments not literals")
    try:
        expected_node = ast.parse(want, mode="eval").body
        expected = ast.literal_eval(expected_node)
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return Derived(example, None, "output not a literal")
    left, right = ast.unparse(call), ast.unparse(expected_node)
    if isinstance(expected, float):
        return Derived(example, f"assert abs({left} - {right}) < {FLOAT_TOLERANCE}")
    return Derived(example, f"assert {left} == {right}")


def _is_prompt(stripped: str, marker: str) -> bool:
    return stripped == marker or stripped.startswith(marker + " ")


def _after(stripped: str, marker: str) -> str:
    return stripped[len(marker) + 1:]


def _is_call_of(node: ast.expr, entry_point: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
        node.func.id == entry_point


def _is_literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def read_public_tests(path: Path = HUMANEVAL_PUBLIC_TESTS) -> dict[str, str]:
    """Task id -> public tests, from a file scripts/make_public_tests.py writes."""
    hint = "scripts/make_public_tests.py writes this file: .venv/bin/python " \
           "scripts/make_public_tests.py"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputFileError(path, [Problem(None, None, "no such file")], hint=hint) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise InputFileError(path, [Problem(None, None, f"unreadable: {error}")],
                             hint=hint) from None
    tests = data.get("public_tests") if isinstance(data, dict) else None
    if not isinstance(tests, dict) or not all(
            isinstance(k, str) and isinstance(v, str) and v.strip() for k, v in tests.items()):
        raise InputFileError(path, [Problem(None, "public_tests",
                                            "expected an object of task id -> non-blank text")],
                             hint=hint)
    return tests
