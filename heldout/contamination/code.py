"""The rename-invariant fingerprint of a program's Python functions: a copied solution whose
names, formatting or comments were changed still matches."""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass
from typing import Any, Literal

from heldout.contamination.text import hash64

CODE_NORMALIZATION = "ast-positional-names-v2"  # its version, as text.NORMALIZATION
LiteralMode = Literal["keep", "type"]
LITERAL_MODES: tuple[LiteralMode, ...] = ("keep", "type")


@dataclass(frozen=True)
class CodeFingerprint:
    """Hashes of a program's normalized code, each with its size in AST nodes.

    `functions`: every function, whole. `subtrees`: every statement inside a function, at any
    depth. `statements`: the top-level statements of each outermost function, in order, which
    together make its body: what a partial copy is measured against. The eval side keeps
    functions and statements; the training side is matched by functions and subtrees."""

    functions: dict[int, int]
    subtrees: dict[int, int]
    statements: list[tuple[int | None, int]]

    def to_json(self) -> dict[str, list[list[int | None]]]:
        return {
            "functions": sorted([h, n] for h, n in self.functions.items()),
            "statements": [[h, n] for h, n in self.statements],
        }

    @classmethod
    def from_json(cls, value: dict[str, list[list[int | None]]]) -> CodeFingerprint:
        return cls(
            functions={h: n for h, n in value["functions"]},
            subtrees={},
            statements=[(h, n) for h, n in value["statements"]],
        )


_BUILTIN_NAMES = frozenset(dir(builtins))
# Fields that change nothing a program does, or that the node's position already says.
_IGNORED_FIELDS = frozenset({"ctx", "type_comment", "annotation", "returns", "kind"})
_USER = "\x00"  # prefix of a name as written, before it is resolved


def code_fingerprint(
    source: str, literals: LiteralMode = "keep", min_nodes: int = 1
) -> CodeFingerprint | None:
    """Hashes of the functions in `source` with every user-chosen name (function, argument,
    local, helper) replaced by a placeholder numbered by first occurrence, docstrings and type
    annotations dropped, imported names resolved to what they import and, with
    literals="type", constants replaced by their type. Renaming, reformatting and comments
    leave it unchanged; changing an operator, a call or (by default) a constant changes it.
    Functions and statements smaller than `min_nodes` AST nodes are left out.

    None when `source` is not Python (the caller falls back to the text methods)."""
    try:
        return _Serializer(literals).fingerprint(ast.parse(source), min_nodes)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


_Span = tuple[int, int, int]  # first token, end token, nodes


class _Serializer:
    """Writes an AST as a flat token list (pre-order) in one pass, remembering the token span
    and node count of each function and each statement inside one, so that each is hashed
    with its own placeholder numbering: a statement copied into another function still
    matches. Names are written as they are and resolved once the pass has seen every binding
    and import."""

    def __init__(self, literals: LiteralMode):
        self.literals = literals
        self.tokens: list[str] = []
        self.function_spans: list[_Span] = []
        self.statement_spans: list[_Span] = []
        self.top_spans: list[_Span] = []
        self.depth = 0  # functions entered
        self.nesting = 0  # statements entered within the innermost function
        self.imported: dict[str, str] = {}
        self.bound: set[str] = set()

    def fingerprint(self, tree: ast.Module, min_nodes: int) -> CodeFingerprint:
        self.emit(tree)
        self.resolved: dict[str, str | None] = {}
        hashes = {s: self.span_hash(s, e) for s, e, n in
                  [*self.function_spans, *self.statement_spans] if n >= min_nodes}
        return CodeFingerprint(
            functions={hashes[s]: n for s, _, n in self.function_spans if n >= min_nodes},
            subtrees={hashes[s]: n for s, _, n in self.statement_spans if n >= min_nodes},
            # Small top-level statements keep their size, which the body's total needs, and
            # no hash: they are too small to be evidence.
            statements=[(hashes.get(s), n) for s, _, n in self.top_spans],
        )

    def span_hash(self, start: int, end: int) -> int:
        placeholders: dict[str, str] = {}
        out = []
        for token in self.tokens[start:end]:
            if token[0] == _USER:
                token = self.resolve(token) or placeholders.setdefault(
                    token, f"_{len(placeholders)}")
            out.append(token)
        return hash64("\x1f".join(out))

    def resolve(self, token: str) -> str | None:
        """What a name stands for if the author did not choose it: an imported name is what it
        imports (`np` is `numpy`), a builtin the program never rebinds is the builtin."""
        if token not in self.resolved:
            name = token[1:]
            if name in self.imported:
                self.resolved[token] = "=" + self.imported[name]
            elif name in _BUILTIN_NAMES and name not in self.bound:
                self.resolved[token] = "=" + name
            else:
                self.resolved[token] = None
        return self.resolved[token]

    def emit(self, node: ast.AST) -> int:
        """Append the node's tokens; return its size in nodes."""
        kind = type(node)
        if kind in _LEAVES:  # operators: a name and nothing else
            self.tokens.append(kind.__name__)
            return 1
        if kind in _STATEMENTS and (self.depth or kind in _FUNCTIONS):
            return self.statement(node, kind)
        return self.children(node, kind)

    def statement(self, node: Any, kind: type) -> int:
        """A statement inside a function, or a function: remember its span."""
        if kind is ast.AnnAssign:
            # `x: int = 1` is `x = 1`; a bare declaration does nothing.
            if node.value is None:
                return 0
            node, kind = ast.Assign(targets=[node.target], value=node.value), ast.Assign
        start = len(self.tokens)
        in_function = self.depth > 0
        is_top_level = self.depth == 1 and self.nesting == 0
        is_function = kind in _FUNCTIONS
        outer_nesting = self.nesting
        self.depth += is_function
        self.nesting = 0 if is_function else self.nesting + 1
        size = self.children(node, kind)
        self.depth -= is_function
        self.nesting = outer_nesting
        span = (start, len(self.tokens), size)
        if is_function:
            self.function_spans.append(span)
        if in_function:
            self.statement_spans.append(span)
        if is_top_level:
            self.top_spans.append(span)
        return size

    def children(self, node: Any, kind: type) -> int:
        if kind in _BINDERS:
            self.bind(node)
        self.tokens.append(kind.__name__)
        size = 1
        for field in _FIELDS[kind]:
            value = getattr(node, field, None)
            if isinstance(value, list):
                self.tokens.append("[")
                for item in _without_docstring(node, field, value):
                    if isinstance(item, ast.AST):
                        size += self.emit(item)
                    else:
                        self.scalar(kind, field, item)
                self.tokens.append("]")
            elif isinstance(value, ast.AST):
                size += self.emit(value)
            else:
                self.scalar(kind, field, value)
        return size

    def scalar(self, kind: type, field: str, value: Any) -> None:
        if (kind, field) in _NAME_FIELDS and isinstance(value, str):
            self.tokens.append(_USER + value)
        elif kind is ast.alias and field == "asname":
            # `import numpy as np` and `import numpy as n` import the same thing.
            self.tokens.append("~")
        elif kind is ast.Constant and self.literals == "type":
            self.tokens.append("#" + type(value).__name__)
        else:
            self.tokens.append("#" + repr(value))

    def bind(self, node: Any) -> None:
        if isinstance(node, ast.Name):
            if not isinstance(node.ctx, ast.Load):
                self.bound.add(node.id)
        elif isinstance(node, ast.arg):
            self.bound.add(node.arg)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                self.imported[alias.asname or top] = alias.name if alias.asname else top
        elif isinstance(node, ast.ImportFrom):
            for alias in node.names:
                self.imported[alias.asname or alias.name] = f"{node.module or ''}.{alias.name}"
        elif node.name:
            self.bound.add(node.name)


_NODE_TYPES = [t for t in vars(ast).values() if isinstance(t, type) and issubclass(t, ast.AST)]
_FIELDS = {t: tuple(f for f in t._fields if f not in _IGNORED_FIELDS) for t in _NODE_TYPES}
_STATEMENTS = frozenset(t for t in _NODE_TYPES if issubclass(t, ast.stmt))
_LEAVES = frozenset(t for t in _NODE_TYPES if not t._fields) - _STATEMENTS
_FUNCTIONS = frozenset({ast.FunctionDef, ast.AsyncFunctionDef})
# Nodes that bind a name: a local called `sum` is the author's name, not the builtin.
_BINDERS = frozenset({ast.Name, ast.arg, ast.Import, ast.ImportFrom, ast.ClassDef,
                      ast.ExceptHandler, ast.MatchAs, ast.MatchStar, *_FUNCTIONS})
# (node type, field) pairs whose string values are names a programmer chose.
_NAME_FIELDS = frozenset(
    {
        (ast.Name, "id"),
        (ast.arg, "arg"),
        (ast.FunctionDef, "name"),
        (ast.AsyncFunctionDef, "name"),
        (ast.ClassDef, "name"),
        (ast.ExceptHandler, "name"),
        (ast.Global, "names"),
        (ast.Nonlocal, "names"),
        (ast.MatchAs, "name"),
        (ast.MatchStar, "name"),
        (ast.MatchMapping, "rest"),
    }
)
_DOCUMENTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Module)


def _without_docstring(node: ast.AST, field: str, items: list[Any]) -> list[Any]:
    if (
        field == "body"
        and isinstance(node, _DOCUMENTED)
        and items
        and isinstance(items[0], ast.Expr)
        and isinstance(items[0].value, ast.Constant)
        and isinstance(items[0].value.value, str)
    ):
        return items[1:]
    return items
