"""A calculator tool that cannot be turned against the kernel: an AST walk over arithmetic, never `eval`.

Only number literals, + - * / // % ** << >>, unary +/-, parentheses, a few math functions and constants are
allowed; names, attributes, subscripts, other calls, comprehensions and lambdas are refused. An expression is
read as a person writes arithmetic first: `×` `x` `·` multiply, `÷` divides, `^` is a power (never XOR), `20% of
50` and `20 percent of 50` are 10, `15%` alone is 0.15 (`%` between two numbers stays the remainder), and the
words plus, minus, times, multiplied by, divided by, to the power of, squared and cubed are their operators.
Sizes are checked before work is done, so `9**9**9`, `factorial(10**6)` or `1 << 10**9` are refused at once
instead of eating the kernel's time and memory: results may have at most `MAX_DIGITS` digits, expressions at most
`MAX_CHARS` characters, `MAX_NODES` syntax nodes and `MAX_DEPTH` levels of nesting.

Example:
    >>> evaluate("sqrt(2) * 2**10")
    1448.1546878700492
    >>> evaluate("15% of 80"), evaluate("3^4"), evaluate("7 × 8"), evaluate("2 to the power of 10")
    (12.0, 81, 56, 1024)
"""

from __future__ import annotations

import ast
import dataclasses
import math
import operator
import re
from collections.abc import Callable
from typing import Any

from .schema import ToolError
from .tool import Tool, tool

__all__ = ["CalculatorError", "calculator", "evaluate", "normalize"]

MAX_CHARS = 1000
MAX_NODES = 500
MAX_DEPTH = 200
MAX_DIGITS = 1000
_MAX_BITS = int(MAX_DIGITS * math.log2(10)) + 1

Number = int | float

_CONSTANTS: dict[str, float] = {"pi": math.pi, "e": math.e, "tau": math.tau, "inf": math.inf}


def _factorial(n: Number) -> int:
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise CalculatorError("factorial() needs a non-negative integer.")
    if n > 2 and math.lgamma(n + 1) / math.log(10) > MAX_DIGITS:
        raise CalculatorError(f"factorial({n}) would have more than {MAX_DIGITS} digits.")
    return math.factorial(n)


def _round(x: Number, ndigits: int | None = None) -> Number:
    if ndigits is not None and (not isinstance(ndigits, int) or abs(ndigits) > MAX_DIGITS):
        raise CalculatorError(f"round() takes a whole number of digits between -{MAX_DIGITS} and {MAX_DIGITS}.")
    return round(x) if ndigits is None else round(x, ndigits)


_FUNCTIONS: dict[str, Callable[..., Number]] = {
    "abs": abs, "round": _round, "min": min, "max": max, "factorial": _factorial,
    "sqrt": math.sqrt, "exp": math.exp, "log": math.log, "log10": math.log10, "log2": math.log2,
    "sin": math.sin, "cos": math.cos, "tan": math.tan, "asin": math.asin, "acos": math.acos, "atan": math.atan,
    "atan2": math.atan2, "sinh": math.sinh, "cosh": math.cosh, "tanh": math.tanh, "hypot": math.hypot,
    "floor": math.floor, "ceil": math.ceil, "degrees": math.degrees, "radians": math.radians, "gcd": math.gcd,
}  # fmt: skip


def _pow(a: Number, b: Number) -> Number:
    if isinstance(a, int) and isinstance(b, int) and b > 0 and abs(a) > 1 and b * math.log2(abs(a)) > _MAX_BITS:
        raise CalculatorError(f"the result of {_short(a)} ** {_short(b)} would have more than {MAX_DIGITS} digits.")
    result = a**b
    if isinstance(result, complex):
        raise CalculatorError("the result is a complex number, which this calculator does not do.")
    return result


def _mul(a: Number, b: Number) -> Number:
    if isinstance(a, int) and isinstance(b, int) and a.bit_length() + b.bit_length() > _MAX_BITS + 1:
        raise CalculatorError(f"the product would have more than {MAX_DIGITS} digits.")
    return a * b


def _lshift(a: Number, b: Number) -> Number:
    if isinstance(a, int) and isinstance(b, int) and a and b > 0 and a.bit_length() + b > _MAX_BITS:
        raise CalculatorError(f"{_short(a)} << {_short(b)} would have more than {MAX_DIGITS} digits.")
    return operator.lshift(a, b)  # type: ignore[call-overload]


_BINARY: dict[type[ast.operator], Callable[[Any, Any], Number]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: _mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: _pow, ast.LShift: _lshift,
    ast.RShift: operator.rshift,
}  # fmt: skip
_UNARY: dict[type[ast.unaryop], Callable[[Any], Number]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}


_NOTATION: list[tuple[re.Pattern[str], str]] = [
    (re.compile(pattern, re.IGNORECASE), operator_text)
    for pattern, operator_text in [
        (r"[×✕✖·⋅∗]", " * "),
        (r"(?<=[\d).])(?:(?<!\b0)\s*|\s+)[xX]\s*(?=[\d(.])", " * "),  # 6 x 7, not 0x1F; a lone x is a name
        (r"[÷∕]", " / "),
        (r"[−–]", "-"),
        (r"\^", " ** "),
        (r"\s*(?:%|\bpercent\b)\s*of\b", " / 100 * "),
        (r"\s*(?:%(?=\s*(?:$|[),]))|\bpercent\b)", " / 100"),
        (r"\b(?:to the power of|to the power|raised to the power of|raised to)\b", " ** "),
        (r"\bsquared\b", " ** 2"),
        (r"\bcubed\b", " ** 3"),
        (r"\b(?:multiplied by|times)\b", " * "),
        (r"\bdivided by\b", " / "),
        (r"\bplus\b", " + "),
        (r"\bminus\b", " - "),
    ]
]


def normalize(expression: str) -> str:
    """Python's spelling of arithmetic as people write it: `7 × 8` → `7 * 8`, `20% of 50` → `20 / 100 * 50`."""
    for pattern, replacement in _NOTATION:
        expression = pattern.sub(replacement, expression)
    return " ".join(expression.split())


class CalculatorError(ToolError):
    """An expression the calculator refuses or cannot compute; the message says what to change."""


def evaluate(expression: str) -> Number:
    """The value of an arithmetic expression; CalculatorError for anything else or anything too big."""
    tree = _parse(expression)
    value = _eval(tree.body)
    if isinstance(value, int) and value.bit_length() > _MAX_BITS:
        raise CalculatorError(f"the result would have more than {MAX_DIGITS} digits.")
    return value


def _parse(expression: str) -> ast.Expression:
    """Parse after the size checks; count nodes and depth without recursion."""
    if len(expression) > MAX_CHARS:
        raise CalculatorError(f"the expression has {len(expression)} characters; the limit is {MAX_CHARS}.")
    try:
        tree = ast.parse(normalize(expression), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        raise CalculatorError(f"not a valid arithmetic expression: {getattr(error, 'msg', error)}") from None
    count = 0
    stack: list[tuple[ast.AST, int]] = [(tree.body, 1)]
    while stack:
        node, depth = stack.pop()
        count += 1
        if count > MAX_NODES or depth > MAX_DEPTH:
            raise CalculatorError(f"the expression is too large (limits: {MAX_NODES} parts, {MAX_DEPTH} levels deep).")
        stack.extend((child, depth + 1) for child in ast.iter_child_nodes(node))
    return tree


def _eval(node: ast.AST) -> Number:
    """Evaluate one whitelisted node (depth is already bounded by `_parse`)."""
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        if isinstance(node.value, int) and node.value.bit_length() > _MAX_BITS:
            raise CalculatorError(f"a number has more than {MAX_DIGITS} digits.")
        return node.value  # type: ignore[return-value]  # an int or float, checked above
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _compute(_BINARY[type(node.op)], _eval(node.left), _eval(node.right))
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.Name) and node.id in _CONSTANTS:
        return _CONSTANTS[node.id]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS:
        if node.keywords:
            raise CalculatorError(f"{node.func.id}() takes positional arguments only.")
        return _compute(_FUNCTIONS[node.func.id], *(_eval(arg) for arg in node.args))
    raise CalculatorError(_refusal(node))


def _compute(function: Callable[..., Number], *args: Number) -> Number:
    """Apply, turning Python's arithmetic errors into CalculatorError."""
    try:
        result = function(*args)
    except CalculatorError:
        raise
    except ZeroDivisionError:
        raise CalculatorError("division by zero.") from None
    except (OverflowError, ValueError, TypeError) as error:
        raise CalculatorError(f"{getattr(function, '__name__', 'operation')}: {error}.") from None
    if isinstance(result, bool) or not isinstance(result, (int, float)):
        raise CalculatorError("the result is not a real number.")
    return result


def _refusal(node: ast.AST) -> str:
    """Why a node is not allowed, naming what is."""
    if isinstance(node, ast.Name):
        what = f"the name {node.id!r}"
    elif isinstance(node, ast.Call):
        what = "calling that"
    elif isinstance(node, ast.Constant):
        what = f"the literal {_short(node.value)!s}"
    else:
        what = f"'{type(node).__name__}' syntax"
    return (
        f"{what} is not allowed: use numbers, + - * / // % ** << >> (or × ÷ ^, 20% of 50), parentheses, the "
        f"constants {', '.join(_CONSTANTS)} and the functions {', '.join(_FUNCTIONS)}."
    )


def _short(value: Any) -> str:
    text = repr(value) if not isinstance(value, int) or value.bit_length() < 200 else f"<{value.bit_length()}-bit int>"
    return text if len(text) <= 40 else f"{text[:37]}..."


def _calculator(expression: str) -> str:
    """Evaluate an arithmetic expression, such as "2 * (3 + 4) ** 2" or "sqrt(2) * pi".

    Args:
        expression: The question's arithmetic, written with numbers, + - * / ^ (power: 2^3; 5 squared is 5^2)
            and % (20% of 50; 20 percent of 50 is 20% of 50), parentheses, and functions like sqrt, log, sin,
            round, max.
    """
    return f"{expression.strip()} = {display(evaluate(expression))}"


def display(value: Number) -> str:
    """A result as a calculator shows it: 12 for 12.0, 0.3 for 0.30000000000000004 (15 significant digits)."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return format(value, ".15g") if isinstance(value, float) else str(value)


def _with_expression_pattern(base: Tool) -> Tool:
    """The schema also says which characters an expression may have, so a masked model cannot write prose, and
    how long it may be: at most 200 characters, so that even one token per character fits a call's token budget
    (`stream.CALL_MAX_TOKENS`, 256) and a model that loops inside the string still closes it."""
    expression = {**base.parameters["properties"]["expression"], "pattern": _PATTERN, "minLength": 1, "maxLength": 200}
    properties = {**base.parameters["properties"], "expression": expression}
    return dataclasses.replace(base, parameters={**base.parameters, "properties": properties})


_CHARS = r"0-9a-z_+\-*/%()., <>^×÷·−"
_PATTERN = rf"^[0-9a-z_(+\-. −][{_CHARS}]*[a-z+\-*/%(<>^×÷·−][{_CHARS}]*$"
"""Characters an expression may have, and an operation somewhere after its start (an operator, a function, a
word such as "of" or "squared"): a bare number computes nothing, and a masked model unsure of the operation
closed the string after the first number (`"144"` for 144 ÷ 16)."""
calculator: Tool = _with_expression_pattern(tool(name="calculator", timeout_s=5.0)(_calculator))
"""The built-in calculator tool."""
