"""What `run_public_tests` tells an agent: which of the public asserts failed and how, as a
developer running them would see it.

The public tests run through the same judge as the hidden ones (the candidate never holds them),
rewritten so that every top-level `assert` is tried on its own and a failing one does not hide
the next: the judge's reason then lists each failure. Only the agent reads this; the row's
`public_passed` comes from the public tests as written, never from this rewrite.
"""

from __future__ import annotations

import ast

# The judge keeps this much of a reason; the failures are listed until it is reached.
REASON_LIMIT = 500


def feedback_tests(public_tests: str) -> str:
    """`public_tests` with each top-level assert run on its own, its failure recorded, and an
    AssertionError at the end that lists what failed. Tests that are not top-level asserts (a
    `check(candidate)` function) are left as they are: the first failure ends them."""
    try:
        module = ast.parse(public_tests)
    except SyntaxError:
        return public_tests
    asserts = [node for node in module.body if isinstance(node, ast.Assert)]
    if not asserts:
        return public_tests
    lines = public_tests.splitlines()
    out = ["__failures, __total = [], 0"]
    for node in module.body:
        source = "\n".join(lines[node.lineno - 1:node.end_lineno])
        if not isinstance(node, ast.Assert):
            out.append(source)
            continue
        label = repr(f"line {node.lineno}: {' '.join(source.split())[:160]}")
        out += [
            "__total += 1",
            "try:",
            f"    assert {ast.unparse(node.test)}",
            "except AssertionError:",
            f"    __failures.append({label})",
            # The judge's failed calls are BaseExceptions: a public run reports them and goes on.
            "except BaseException as __error:",
            f"    __failures.append({label} + ' raised ' + type(__error).__name__ + ': '"
            " + str(__error)[:120])",
        ]
    out += [
        "if __failures:",
        "    raise AssertionError(f'{len(__failures)} of {__total} public tests failed; ' "
        "+ ' | '.join(__failures))",
    ]
    return "\n".join(out) + "\n"


def describe_public_run(passed: bool, status: str, reason: str, output: str) -> str:
    """The observation text of one public run."""
    if passed:
        return "All public tests passed."
    text = {"timeout": "The public tests timed out. ", "oom": "The program ran out of memory. "
            }.get(status, "")
    text += reason.strip() or "The public tests failed."
    if output.strip():
        text += f"\nOutput (last lines):\n{output.strip()[-800:]}"
    return text
