"""Checks a forged test report cannot pass: copies of the real hidden tests that must fail.

The repository's code runs inside the test process, so anything that process reports can be
forged. What it cannot do is tell which of several versions of a test is the real one without
knowing the right answer. Each `fail_to_pass` test function is written COPIES + 1 times into its
file, at its place, in a random order, every version under a fresh random name
(`<name>_<16 hex digits>`): the real test and COPIES copies that differ from it only at its
*sites*, the places where a different value makes a correct solution fail:

- a literal compared with `==` in an `assert` on the function's own level (`assert f(x) == 3`,
  `assert 3 == f(x)`; inside a literal list, tuple or dict, one element of it);
- a `pytest.mark.parametrize` value bound to a name the function uses only as such an operand
  (`assert tokens[0].value == value`), every case of it;
- the polarity of such an `assert` that is a call, a name or an attribute (`assert is_x(a)` and
  `assert not is_x(a)`), or an `is`/`is not`/`in`/`not in` comparison.

Only lines the hidden test patch adds are sites (a value the base tree also shows would name the
real version), and only in functions with no `return` or `yield`, so that a correct solution
reaches every site and fails every copy. The versions are symmetric in what a reader of the
file can see: at a literal site the COPIES + 1 values are an arithmetic run (a number's last
digit, a string's one character drawn from its class) with the real value at a uniform place,
every version rendered the same way; a polarity site is split evenly. So a process that reads
every version, and every value in them, has no better rule than a guess: a forgery that makes
every failing test pass makes the copies pass too, and one that picks a version per function
picks the real one with probability 1 / (COPIES + 1) for each function that has sites.

What it does not cover: a test function with no site (a `pytest.raises` alone, values computed
in the test) is only renamed; a reader that judges which value is *plausible* (a dictionary word
among misspellings) does better than a guess, by as much as it knows of the answer.
"""

from __future__ import annotations

import ast
import difflib
import random
import secrets
from dataclasses import dataclass, field

from heldout.tasks.stand_ins import SCALAR, named, perturbed

COPIES = 7  # versions of a checked function: the real one and 7 copies
FEWEST_VERSIONS = 4  # where a site has too few values for COPIES + 1 (a one-letter string)


@dataclass
class CheckedFile:
    """A test file with its `fail_to_pass` functions renamed and copied."""

    text: str
    renamed: dict[str, str] = field(default_factory=dict)  # old qualified name -> new
    copies: list[str] = field(default_factory=list)  # qualified names of the copies
    unchecked: list[str] = field(default_factory=list)  # functions with no site


@dataclass(frozen=True)
class _Site:
    """One place of a function's source: its text span, and how each version renders it."""

    start: int  # character offsets into the function's source
    end: int
    renderings: tuple[str, ...]  # index 0: the real version
    polarity: bool = False  # two renderings, the assertion and its negation


def added_lines(before: str, after: str) -> set[int]:
    """The 1-based line numbers of `after` that are not lines of `before`."""
    matcher = difflib.SequenceMatcher(None, before.splitlines(), after.splitlines(),
                                      autojunk=False)
    return {line + 1 for tag, _a1, _a2, b1, b2 in matcher.get_opcodes()
            if tag in ("insert", "replace") for line in range(b1, b2)}


def check_file(before: str, after: str, functions: set[str], rng: random.Random | None = None,
               copies: int = COPIES) -> CheckedFile:
    """`after` (a test file with the hidden tests; `before` is it at the base) with each of
    `functions` (qualified: `name` or `Class.name`) renamed, and copied where it has sites."""
    rng = rng or random.SystemRandom()
    tree = ast.parse(after)
    fresh = added_lines(before, after)
    offsets = _line_offsets(after)
    found = {qualified: node for qualified, node in _functions(tree)
             if qualified in functions}
    result = CheckedFile(text=after)
    replacements = []
    for qualified, node in sorted(found.items(), key=lambda item: item[1].lineno):
        first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
        start = offsets[first - 1]
        end = _offset(after, offsets, node.end_lineno, node.end_col_offset)
        source = after[start:end]
        for count in (copies + 1, FEWEST_VERSIONS):  # fewer where a site has few values
            sites = _sites(node, fresh, after, start, offsets, rng, count)
            if sites:
                break
        versions = _versions(source, sites, count, rng) if sites else [source]
        prefix = qualified.rpartition(".")[0]
        names = []
        texts = []
        for version in versions:
            name = f"{node.name}_{secrets.token_hex(8)}"
            names.append(f"{prefix}.{name}" if prefix else name)
            texts.append(_renamed(version, node, first, name))
        result.renamed[qualified] = names[0]
        result.copies += names[1:]
        if not sites:
            result.unchecked.append(qualified)
        order = list(range(len(texts)))
        rng.shuffle(order)
        joined = ("\n\n" if node.col_offset else "\n\n\n").join(texts[index] for index in order)
        replacements.append((start, end, joined))
    text = after
    for start, end, joined in sorted(replacements, reverse=True):
        text = text[:start] + joined + text[end:]
    result.text = text
    return result


# --- where a function's sites are ---------------------------------------------------------


def _functions(tree: ast.Module):
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield node.name, node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
                    yield f"{node.name}.{item.name}", item


def _offset(text: str, offsets: list[int], line: int, column: int) -> int:
    """The character offset of an AST position (its column counts UTF-8 bytes)."""
    start = offsets[line - 1]
    return start + len(text[start:start + column].encode()[:column].decode(errors="ignore"))


def _line_offsets(text: str) -> list[int]:
    offsets, total = [], 0
    for line in text.splitlines(keepends=True):
        offsets.append(total)
        total += len(line)
    return offsets


def _own_nodes(function: ast.AST):
    """The nodes of a function's body, nested functions and classes left out."""
    stack = list(ast.iter_child_nodes(function))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
                          | ast.ClassDef):
            stack.extend(ast.iter_child_nodes(node))


def _literal(node: ast.AST):
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return _NOT_LITERAL


_NOT_LITERAL = object()


def _sites(function, fresh: set[int], text: str, base: int, offsets: list[int],
           rng: random.Random, versions: int) -> list[_Site]:
    """The function's sites (offsets relative to `base`, where its source starts in `text`)."""
    if any(isinstance(node, ast.Return | ast.Yield | ast.YieldFrom | ast.Await)
           for node in _own_nodes(function)):
        return []

    def span(node: ast.AST) -> tuple[int, int]:
        return (_offset(text, offsets, node.lineno, node.col_offset) - base,
                _offset(text, offsets, node.end_lineno, node.end_col_offset) - base)

    def renderings_of(node: ast.AST) -> tuple[tuple[str, ...], ast.AST] | None:
        """A constant's renderings (and the node), unless the file elsewhere shows its real
        value and not the others (an input "2.5" beside an expected 2.5 names the real one)."""
        start, end = span(node)
        elsewhere = text[:base + start] + " " + text[base + end:]
        for _attempt in range(3):
            values = perturbed(_literal(node), rng, versions, elsewhere)
            if values is None:
                return None
            shown = {named(value, elsewhere) for value in values}
            if len(shown) == 1:  # every version as shown elsewhere as the real one
                return tuple(repr(value) for value in values), node
        return None

    def on_fresh_lines(node: ast.AST) -> bool:
        return all(line in fresh for line in range(node.lineno, node.end_lineno + 1))

    sites: list[_Site] = []
    asserts = [statement for statement in function.body if isinstance(statement, ast.Assert)]
    expected_names: dict[str, int] = {}  # names used within an `==` assert's right operand
    for statement in asserts:
        test = statement.test
        if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0],
                                                                                ast.Eq):
            for node in ast.walk(test.comparators[0]):
                if isinstance(node, ast.Name):
                    expected_names[node.id] = expected_names.get(node.id, 0) + 1
            if not on_fresh_lines(statement):
                continue
            # The expected value: the right operand, or a bare literal on the left (`3 ==
            # f(x)`); never a constant that feeds the computation (an input changed is no check).
            expected = test.comparators[0]
            if _literal(test.left) is not _NOT_LITERAL and _literal(expected) is _NOT_LITERAL:
                expected = test.left
            candidates = list(_constants(expected))
            rng.shuffle(candidates)
            found = next(filter(None, map(renderings_of, candidates)), None)
            if found:
                sites.append(_Site(*span(found[1]), found[0]))
        elif on_fresh_lines(statement):
            flipped = _flipped(test)
            if flipped is not None:
                start, end = span(test)
                sites.append(_Site(start, end, (ast.unparse(test), ast.unparse(flipped)),
                                   polarity=True))
    uses = {}
    for node in _own_nodes(function):
        if isinstance(node, ast.Name):
            uses[node.id] = uses.get(node.id, 0) + 1
    for decorator in function.decorator_list:
        sites += _parametrize_sites(decorator, expected_names, uses, on_fresh_lines, span,
                                    renderings_of, rng)
    return sites


def _flipped(test: ast.expr) -> ast.expr | None:
    """The assertion's test with its polarity turned, where it has one to turn."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return test.operand
    if isinstance(test, ast.Call | ast.Name | ast.Attribute):
        return ast.UnaryOp(op=ast.Not(), operand=test)
    opposite = {ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and type(test.ops[0]) in opposite:
        return ast.Compare(left=test.left, ops=[opposite[type(test.ops[0])]()],
                           comparators=test.comparators)
    return None


def _parametrize_sites(decorator, expected_names, uses, on_fresh_lines, span, renderings_of,
                       rng: random.Random) -> list[_Site]:
    """Sites in `@pytest.mark.parametrize("a, b", [...])`: in each case, a constant of the
    value of a name the function uses only within the right operands of its `==` asserts."""
    if not (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute)
            and decorator.func.attr == "parametrize" and len(decorator.args) >= 2):
        return []
    names_node, cases = decorator.args[0], decorator.args[1]
    names = _literal(names_node)
    if isinstance(names, str):
        names = [name.strip() for name in names.split(",") if name.strip()]
    if not (isinstance(names, list | tuple) and isinstance(cases, ast.List | ast.Tuple)
            and on_fresh_lines(cases)):
        return []
    sites = []
    for position, name in enumerate(names):
        if not (isinstance(name, str) and expected_names.get(name)
                and uses.get(name) == expected_names[name]):
            continue
        for case in cases.elts:
            if len(names) == 1:
                element = case
            elif isinstance(case, ast.Tuple | ast.List) and len(case.elts) == len(names):
                element = case.elts[position]
            else:
                return []
            # Not in a call: a case's values are built when the module is collected, and a
            # constructor that refuses a perturbed value would stop the whole file.
            candidates = list(_constants(element, calls=False))
            rng.shuffle(candidates)
            found = next(filter(None, map(renderings_of, candidates)), None)
            if found is not None:
                sites.append(_Site(*span(found[1]), found[0]))
    return sites


def _constants(node: ast.AST, calls: bool = True):
    """The constants of an expression a site can perturb: numbers (with their sign) and
    strings, not inside an f-string (nor a call, unless `calls`), not booleans or None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd) \
            and isinstance(node.operand, ast.Constant):
        if isinstance(node.operand.value, int | float) and not isinstance(node.operand.value,
                                                                          bool):
            yield node
        return
    if isinstance(node, ast.Constant):
        if isinstance(node.value, SCALAR) and not isinstance(node.value, bool):
            yield node
        return
    if isinstance(node, ast.JoinedStr | ast.Lambda) or (isinstance(node, ast.Call) and not calls):
        return
    for child in ast.iter_child_nodes(node):
        yield from _constants(child, calls)


# --- the versions ---------------------------------------------------------------------------


def _versions(source: str, sites: list[_Site], count: int, rng: random.Random) -> list[str]:
    """The function's source in `count` versions, the real one first: at a literal site each
    version has its own value; at a polarity site half the versions have each polarity (when
    every site is a polarity, the versions are distinct sets of polarities)."""
    literal = [site for site in sites if not site.polarity]
    polarity = [site for site in sites if site.polarity]
    choices: list[list[int]] = [[0] * len(sites)]  # the real version: rendering 0 everywhere
    if literal:
        orders = {id(site): rng.sample(range(1, count), count - 1) for site in literal}
        splits = {id(site): _even_split(count, rng) for site in polarity}
        for version in range(1, count):
            choices.append([orders[id(site)][version - 1] if id(site) in orders
                            else splits[id(site)][version] for site in sites])
    else:
        count = min(count, 2 ** len(sites))
        vectors = rng.sample(range(1, 2 ** len(sites)), count - 1)
        choices += [[(vector >> bit) & 1 for bit in range(len(sites))] for vector in vectors]
    texts = []
    for choice in choices:
        text = source
        for site, pick in sorted(zip(sites, choice, strict=True), key=lambda item: -item[0].start):
            text = text[:site.start] + site.renderings[pick] + text[site.end:]
        texts.append(text)
    return texts


def _even_split(count: int, rng: random.Random) -> list[int]:
    """For each version, its polarity (0: the real one's): half each way, version 0 real."""
    others = [0] * (count // 2 - 1) + [1] * (count - count // 2)
    rng.shuffle(others)
    return [0, *others]


def _renamed(source: str, node, first: int, name: str) -> str:
    """The version's source with its `def` renamed (the def line is after any decorator)."""
    lines = source.splitlines(keepends=True)
    index = node.lineno - first
    keyword = "async def " if isinstance(node, ast.AsyncFunctionDef) else "def "
    lines[index] = lines[index].replace(f"{keyword}{node.name}(", f"{keyword}{name}(", 1)
    return "".join(lines)
