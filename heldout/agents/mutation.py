"""Mutants of a reference solution, made by real AST mutation operators.

Each mutant changes one node of the reference and leaves every other character as it was: the
node's source span is replaced by the unparsed mutated node. Some mutants still pass the tests
(equivalent mutants); that is real, and the scorer, not this module, decides.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

_COMPARISON_FLIPS: dict[type, type] = {
    ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt,
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In,
    ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}
_ARITHMETIC_SWAPS: dict[type, type] = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.FloorDiv, ast.FloorDiv: ast.Mult,
    ast.Mod: ast.FloorDiv,
}
_NAME_SWAPS = {"min": "max", "max": "min", "True": "False", "False": "True"}


def _flip_comparison(node: ast.AST) -> Iterator[ast.AST]:
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in _COMPARISON_FLIPS:
                ops = [*node.ops]
                ops[i] = _COMPARISON_FLIPS[type(op)]()
                yield ast.Compare(left=node.left, ops=ops, comparators=node.comparators)


def _shift_constant(node: ast.AST) -> Iterator[ast.AST]:
    # Off-by-one on integer literals covers range bounds, indices and thresholds alike.
    if isinstance(node, ast.Constant) and type(node.value) is int:
        yield ast.Constant(node.value + 1)
        yield ast.Constant(node.value - 1)


def _swap_arithmetic(node: ast.AST) -> Iterator[ast.AST]:
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC_SWAPS:
        yield ast.BinOp(left=node.left, op=_ARITHMETIC_SWAPS[type(node.op)](), right=node.right)


def _swap_boolean(node: ast.AST) -> Iterator[ast.AST]:
    if isinstance(node, ast.BoolOp):
        yield ast.BoolOp(op=ast.Or() if isinstance(node.op, ast.And) else ast.And(),
                         values=node.values)


def _swap_name(node: ast.AST) -> Iterator[ast.AST]:
    if isinstance(node, ast.Name) and node.id in _NAME_SWAPS:
        yield ast.Name(id=_NAME_SWAPS[node.id], ctx=node.ctx)
    if isinstance(node, ast.Constant) and type(node.value) is bool:
        yield ast.Constant(not node.value)


def _drop_guard(node: ast.AST) -> Iterator[ast.AST]:
    # An `if` whose body returns, raises or continues is a guard; without it, edge cases fall
    # through to the general path.
    if isinstance(node, ast.If) and not node.orelse and any(
        isinstance(s, ast.Return | ast.Raise | ast.Continue | ast.Break) for s in node.body
    ):
        yield ast.Pass()


def _replace_return_value(node: ast.AST) -> Iterator[ast.AST]:
    returns_none = isinstance(node, ast.Return) and (
        node.value is None or (isinstance(node.value, ast.Constant) and node.value.value is None)
    )
    if isinstance(node, ast.Return) and not returns_none:
        yield ast.Return(value=ast.Constant(None))


OPERATORS: dict[str, Callable[[ast.AST], Iterator[ast.AST]]] = {
    "flip_comparison": _flip_comparison,
    "shift_constant": _shift_constant,
    "swap_arithmetic": _swap_arithmetic,
    "swap_boolean": _swap_boolean,
    "swap_name": _swap_name,
    "drop_guard": _drop_guard,
    "replace_return_value": _replace_return_value,
}


def mutants(prompt: str, reference: str, limit: int = 40) -> list[tuple[str, str]]:
    """(operator, mutated completion) pairs, in source order, distinct, at most `limit`.
    Only nodes inside the reference are touched; the prompt is never changed."""
    source = prompt + reference
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    offsets = _line_offsets(source)
    start_of_reference = len(prompt)
    seen = {reference}
    found: list[tuple[str, str]] = []
    for node in ast.walk(tree):
        if not hasattr(node, "end_col_offset") or node.end_col_offset is None:
            continue
        begin = offsets[node.lineno - 1] + _char_column(source, offsets, node.lineno,
                                                        node.col_offset)
        end = offsets[node.end_lineno - 1] + _char_column(source, offsets, node.end_lineno,
                                                          node.end_col_offset)
        if begin < start_of_reference:
            continue
        for name, operator in OPERATORS.items():
            for replacement in operator(node):
                mutated = source[:begin] + ast.unparse(replacement) + source[end:]
                completion = mutated[start_of_reference:]
                if completion not in seen and _parses(mutated):
                    seen.add(completion)
                    found.append((name, completion))
    found.sort(key=lambda pair: _first_difference(reference, pair[1]))
    return found[:limit]


def _line_offsets(source: str) -> list[int]:
    offsets, total = [], 0
    for line in source.splitlines(keepends=True):
        offsets.append(total)
        total += len(line)
    offsets.append(total)
    return offsets


def _char_column(source: str, offsets: list[int], lineno: int, byte_column: int) -> int:
    # ast columns count UTF-8 bytes; slicing a str needs characters.
    line = source[offsets[lineno - 1] : offsets[lineno]]
    return len(line.encode("utf-8")[:byte_column].decode("utf-8", errors="ignore"))


def _parses(source: str) -> bool:
    try:
        ast.parse(source)
    except SyntaxError:
        return False
    return True


def _first_difference(a: str, b: str) -> int:
    pairs = enumerate(zip(a, b, strict=False))
    return next((i for i, (x, y) in pairs if x != y), min(len(a), len(b)))
