"""Shunting-yard conversion from tokens to reverse Polish notation."""

from calclex.tokens import LPAREN, OP, RPAREN

PRECEDENCE = {"+": 1, "-": 1, "*": 2, "/": 2, "%": 2, "**": 3}
RIGHT_ASSOCIATIVE = {"**"}


def to_rpn(tokens):
    """Token texts in reverse Polish order (binary operators only)."""
    output = []
    stack = []
    for token in tokens:
        if token.kind == OP:
            while stack and stack[-1].kind == OP:
                top = PRECEDENCE[stack[-1].text]
                current = PRECEDENCE[token.text]
                if top > current or (top == current and token.text not in RIGHT_ASSOCIATIVE):
                    output.append(stack.pop().text)
                else:
                    break
            stack.append(token)
        elif token.kind == LPAREN:
            stack.append(token)
        elif token.kind == RPAREN:
            while stack and stack[-1].kind != LPAREN:
                output.append(stack.pop().text)
            if not stack:
                raise ValueError(f"unbalanced ')' at position {token.pos}")
            stack.pop()
        else:
            output.append(token.text)
    while stack:
        token = stack.pop()
        if token.kind == LPAREN:
            raise ValueError(f"unbalanced '(' at position {token.pos}")
        output.append(token.text)
    return output
