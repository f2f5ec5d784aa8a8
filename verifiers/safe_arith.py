"""Evaluate untrusted arithmetic (`(3+5)*2`, `7/2-1`) without eval.

What it protects against: code execution (names, calls, attributes, subscripts are refused before
anything runs), CPU/memory blow-up (`**` is refused, expression length and node count are capped,
so the largest possible value has a few hundred digits), float rounding (values are exact
`Fraction`s, so 7/2*2 == 7). What it does not do: impose a time limit; none is needed at these sizes.

Allowed: decimal int literals, binary + - * /, unary minus, parentheses.
"""

from __future__ import annotations

import ast
import warnings
import operator
from dataclasses import dataclass
from fractions import Fraction

MAX_CHARS = 200
MAX_NODES = 64

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


class SafeArithError(ValueError):
    """An expression that was refused or could not be evaluated; the message says why."""


@dataclass(frozen=True)
class ArithValue:
    """An evaluated expression: its exact value and the int literals it used, in order of appearance."""

    value: Fraction
    literals: tuple[int, ...]


def evaluate(expr: str, max_chars: int = MAX_CHARS, max_nodes: int = MAX_NODES) -> ArithValue:
    """Parse and evaluate `expr` exactly; raise SafeArithError naming anything refused."""
    if len(expr) > max_chars:
        raise SafeArithError(f"expression is {len(expr)} characters, more than the limit of {max_chars}")
    try:
        with warnings.catch_warnings():  # `'\d'` in a model's text: "invalid escape sequence", printed through the bar
            warnings.simplefilter("ignore", SyntaxWarning)  # Python >= 3.12
            warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.11
            tree = ast.parse(expr.strip(), mode="eval")
    except (SyntaxError, ValueError) as e:  # ValueError: null bytes in the source
        raise SafeArithError(f"not a valid expression: {e.msg if isinstance(e, SyntaxError) else e}") from e
    nodes = sum(isinstance(node, ast.expr) for node in ast.walk(tree))
    if nodes > max_nodes:
        raise SafeArithError(f"expression has {nodes} nodes, more than the limit of {max_nodes}")
    for node in ast.walk(tree):  # refuse everything before computing anything
        _check_node(node, expr.strip())
    literals: list[int] = []
    value = _eval(tree.body, literals)
    return ArithValue(value, tuple(literals))


def _check_node(node: ast.AST, source: str) -> None:
    if isinstance(node, (ast.Expression, ast.BinOp, ast.UnaryOp, ast.USub)) or type(node) in _BINARY:
        if isinstance(node, ast.BinOp) and type(node.op) not in _BINARY:
            raise SafeArithError(f"operator {type(node.op).__name__} is not allowed (only + - * /)")
        if isinstance(node, ast.UnaryOp) and not isinstance(node.op, ast.USub):
            raise SafeArithError(f"unary operator {type(node.op).__name__} is not allowed (only unary minus)")
        return
    if isinstance(node, ast.Constant):
        if type(node.value) is not int:
            raise SafeArithError(f"literal {node.value!r} is not allowed (only integers)")
        text = ast.get_source_segment(source, node) or ""
        if not text.isdigit():
            raise SafeArithError(f"integer literal {text!r} is not allowed (only plain decimal digits)")
        return
    if isinstance(node, ast.operator | ast.unaryop):
        raise SafeArithError(f"operator {type(node).__name__} is not allowed (only + - * / and unary minus)")
    raise SafeArithError(f"{type(node).__name__} is not allowed in an arithmetic expression")


def _eval(node: ast.expr, literals: list[int]) -> Fraction:
    if isinstance(node, ast.Constant):
        literals.append(node.value)
        return Fraction(node.value)
    if isinstance(node, ast.UnaryOp):
        return -_eval(node.operand, literals)
    assert isinstance(node, ast.BinOp)  # _check_node admitted nothing else
    left, right = _eval(node.left, literals), _eval(node.right, literals)
    if isinstance(node.op, ast.Div) and right == 0:
        raise SafeArithError("division by zero")
    return _BINARY[type(node.op)](left, right)
