"""A Spark aggregate Column read as one call: its function, its inputs and its literal parameters.

A stream whose ``skew_group`` call has Python code in it merges every aggregate of the call in
one stateful Python step (``_python_merge.merge_stream``), so a Spark function there must be
known by name and inputs (``_aggregation.spark_functions`` then keeps its state with Spark's
semantics). PySpark's public API gives a Column's text, as Spark prints it
(``repr(F.stddev("x"))`` is ``Column<'stddev(x)'>``), and that text drops things (a
``count_distinct`` prints as ``count(x)``). So the text is only a guess: :func:`read_call` builds
the call it reads again with ``F.call_function`` and keeps it only if Spark finds the two
aggregations the same (``DataFrame.sameSemantics``, on the analyzed plans); anything else is
refused with what to write instead.
"""
import re
from dataclasses import dataclass

from pyspark.errors import PySparkException
from pyspark.sql import functions as F

_COLUMN_TEXT = re.compile(r"^Column<'(.*)'>$", re.S)
_ALIAS = re.compile(r" AS (?:`(?:[^`]|``)*`|[^`()]*)$")
_PART = r"(?:`(?:[^`]|``)+`|[A-Za-z_][A-Za-z0-9_]*)"
_NAME = re.compile(rf"^{_PART}(?:\.{_PART})*$")
_INTEGER = re.compile(r"^-?\d+$")
_DECIMAL = re.compile(r"^-?\d+\.\d*(?:E-?\d+)?$")


@dataclass(frozen=True)
class FunctionCall:
    """``function(*inputs, *params)`` as Spark's aggregation reads it."""

    function: str      # lower case, as Spark names it (an alias such as "std" kept)
    inputs: tuple      # the column arguments as Columns (``F.col`` or ``F.expr``)
    input_texts: tuple  # their text, for messages
    params: tuple      # the literal arguments after them (int, float, bool, str)
    text: str          # the Column's text without its alias

    @property
    def counts_rows(self):
        """``count(*)`` or ``count(1)``: the rows of a key."""
        return self.function == "count" and not self.inputs


class UnreadableCall(ValueError):
    """The Column is not one aggregate function over columns and literals."""


def column_text(column):
    """The Column's text as Spark prints it, e.g. ``stddev(x) AS s``."""
    match = _COLUMN_TEXT.match(repr(column))
    return match.group(1) if match else repr(column)


def read_call(df, column):
    """The :class:`FunctionCall` of the aggregate ``column`` over ``df``, or UnreadableCall
    saying why not."""
    text = column_text(column)
    while _ALIAS.search(text):                 # an alias, or an alias of an alias
        text = _ALIAS.sub("", text, count=1)
    open_at = text.find("(")
    if open_at <= 0 or not text.endswith(")") or not re.match(r"^[A-Za-z_]\w*$",
                                                               text[:open_at]):
        raise UnreadableCall(f"{text!r} is not one function call")
    function = text[:open_at].lower()
    arguments = _split_arguments(text[open_at + 1:-1])
    inputs, input_texts, params = [], [], []
    for argument in arguments:
        literal = _literal(argument)
        if literal is not _NOT_LITERAL:
            params.append(literal)
            continue
        if params:
            raise UnreadableCall(f"a column argument ({argument}) follows a literal in {text!r}")
        try:
            inputs.append(F.col(argument) if _NAME.match(argument) else F.expr(argument))
        except PySparkException:
            raise UnreadableCall(f"its argument {argument!r} is no column Spark reads "
                                 f"back") from None
        input_texts.append(argument)
    if function == "count" and not inputs:    # count(*), count(1): the rows
        params = []
    call = FunctionCall(function, tuple(inputs), tuple(input_texts), tuple(params), text)
    rebuilt = (F.count(F.lit(1)) if call.counts_rows else
               F.call_function(function, *inputs, *[F.lit(p) for p in params]))
    try:
        same = df.agg(column.alias("v")).sameSemantics(df.agg(rebuilt.alias("v")))
    except PySparkException as error:
        raise UnreadableCall(f"{text!r} read back as {function}(...) fails in Spark "
                             f"({type(error).__name__})") from None
    if not same:
        raise UnreadableCall(f"its text {text!r} does not say all it does (a DISTINCT, a "
                             f"FILTER or an option Spark does not print)")
    return call


_NOT_LITERAL = object()


def _literal(argument):
    """A literal argument's Python value, or ``_NOT_LITERAL``."""
    if argument in ("*",):
        return 1
    if _INTEGER.match(argument):
        return int(argument)
    if _DECIMAL.match(argument):
        return float(argument)
    if argument in ("true", "false"):
        return argument == "true"
    if len(argument) >= 2 and argument[0] == argument[-1] == "'" and "'" not in argument[1:-1]:
        return argument[1:-1]
    return _NOT_LITERAL


def _split_arguments(text):
    """The top-level comma-separated arguments of ``text`` (parentheses, backquotes and quoted
    strings respected)."""
    if not text.strip():
        return []
    parts, depth, start, quote = [], 0, 0, None
    for i, ch in enumerate(text):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "`'\"":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts
