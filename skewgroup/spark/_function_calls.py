"""A Spark aggregate Column read as its aggregate calls and the scalar expression around them.

A stream whose ``skew_group`` call has Python code in it merges every aggregate of the call in
one stateful Python step (``_stream_merge.merge_packed``), so a Spark function there must be
known by name and inputs (``_aggregation.spark_functions`` then keeps its state with Spark's
semantics). PySpark's public API gives a Column only as its text, as Spark prints it
(``repr(F.count_if(F.col("v") > 1))`` is ``Column<'count_if(>(v, 1))'>``), and that text drops
things (a ``count_distinct`` prints as ``count(x)``). So the text is only a guess:
:func:`read_aggregation` parses it into a tree (calls, ``CASE WHEN``, casts, literals, column
names), builds that tree again with ``F.call_function`` (an operator such as ``>`` is a
function of Spark's registry under that name), and keeps it only if Spark finds the two
aggregations the same (``DataFrame.sameSemantics``, on the analyzed plans). Where the rebuilt
``count`` or ``sum`` is not the same, the same call with DISTINCT is tried: PySpark prints
``count_distinct`` and ``sum_distinct`` without it, and only the analysis tells them apart.
Anything else is refused with what to write instead. No internal API is read, so the reading
works the same on Spark Connect, whose Columns print the same text.

The tree's aggregate calls (named in :data:`AGGREGATES`) are the calls the stateful step
merges; what is around them (``hll_sketch_estimate(...)``, ``round(..., 2)``, ``/(sum(x),
count(y))``) is applied in Spark after the merge, to the merged values.
"""
import re
from dataclasses import dataclass
from typing import Callable, Optional

from pyspark.errors import PySparkException
from pyspark.sql import functions as F

_COLUMN_TEXT = re.compile(r"^Column<'(.*)'>$", re.S)
_ALIAS = re.compile(r" AS (?:`(?:[^`]|``)*`|[^`()]*)$")
_PART = r"(?:`(?:[^`]|``)+`|[A-Za-z_][A-Za-z0-9_]*)"
_NAME = re.compile(rf"^{_PART}(?:\.{_PART})*$")
_CALLED = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*|[-+*/%<>=!&|^~]+)\(")
_INTEGER = re.compile(r"^-?\d+$")
_LONG = re.compile(r"^-?\d+L$")
_DECIMAL = re.compile(r"^-?\d+\.\d*(?:E-?\d+)?$")
_CAST = re.compile(r"^(CAST|TRY_CAST)\((.*) AS ([^()]*(?:\([\d, ]*\))?[^()]*)\)$", re.S)

# Spark's aggregate functions by the names it prints (an alias such as "std" is its own name):
# a call of one of these is an aggregate the stateful step merges; any other call is scalar,
# applied after the merge. A name missing here makes an aggregate read as scalar, which the
# check of the rebuilt aggregation then refuses; it never changes a result.
AGGREGATES = frozenset("""
any any_value approx_count_distinct approx_percentile array_agg avg bit_and bit_or bit_xor
bitmap_construct_agg bitmap_or_agg bool_and bool_or collect_list collect_set corr count
count_if count_min_sketch covar_pop covar_samp every first first_value histogram_numeric
hll_sketch_agg hll_union_agg kll_merge_agg_bigint kll_merge_agg_double kll_merge_agg_float
kll_sketch_agg_bigint kll_sketch_agg_double kll_sketch_agg_float kurtosis last last_value
listagg max max_by mean median min min_by mode percentile percentile_approx regr_avgx
regr_avgy regr_count regr_intercept regr_r2 regr_slope regr_sxx regr_sxy regr_syy skewness
some std stddev stddev_pop stddev_samp string_agg sum theta_intersection_agg
theta_sketch_agg theta_union_agg try_avg try_sum var_pop var_samp variance
""".split())
# The aggregates PySpark prints without their DISTINCT, and the public function with it.
_DISTINCT = {"count": F.count_distinct, "sum": F.sum_distinct}


@dataclass(frozen=True)
class FunctionCall:
    """``function(*inputs, *params)`` (with ``distinct``: over each key's distinct input
    values) as Spark's aggregation reads it."""

    function: str      # lower case, as Spark names it (an alias such as "std" kept)
    inputs: tuple      # the column arguments as Columns (a name, or an expression over them)
    input_texts: tuple  # their text, for messages
    params: tuple      # the literal arguments after them (int, float, bool, str)
    text: str          # the call's text
    distinct: bool = False

    @property
    def counts_rows(self):
        """``count(*)`` or ``count(1)``: the rows of a key."""
        return self.function == "count" and not self.inputs and not self.distinct

    def column(self):
        """The call as a Column, rebuilt from its parts."""
        if self.counts_rows:
            return F.count(F.lit(1))
        if self.distinct:
            return _DISTINCT[self.function](*self.inputs)
        return F.call_function(self.function, *self.inputs, *[F.lit(p) for p in self.params])


@dataclass(frozen=True)
class Aggregation:
    """An aggregate Column read: its aggregate calls, and the scalar expression around them
    (``around``: a Column per call -> the Column's value; None where the Column is one call)."""

    calls: tuple
    around: Optional[Callable]
    text: str

    def column(self, values=None):
        """The Column's value over ``values`` (a Column per call; default: the calls
        rebuilt)."""
        if values is None:
            values = [c.column() for c in self.calls]
        return values[0] if self.around is None else self.around(values)


class UnreadableCall(ValueError):
    """The Column is not aggregate calls over columns and literals, in scalar functions."""


def is_name(text):
    """Whether an argument's ``text`` is a column name (else an expression or a literal)."""
    return bool(_NAME.match(text)) and _literal(text) is _NOT_LITERAL


def column_text(column):
    """The Column's text as Spark prints it, e.g. ``stddev(x) AS s``."""
    match = _COLUMN_TEXT.match(repr(column))
    return match.group(1) if match else repr(column)


def read_aggregation(df, column):
    """The :class:`Aggregation` of the aggregate ``column`` over ``df``, or UnreadableCall
    saying why not."""
    text = column_text(column)
    while _ALIAS.search(text):                 # an alias, or an alias of an alias
        text = _ALIAS.sub("", text, count=1)
    tree = _parse(text, frozenset(df.columns))
    leaves = _aggregate_calls(tree)
    if not leaves:
        if tree[0] != "call":
            raise UnreadableCall(f"{text!r} is not one function call")
        leaves = [tree]            # a function the list does not name: read as one call
    calls = [_function_call(leaf) for leaf in leaves]
    around = None
    if leaves != [tree]:
        def around(values, tree=tree, leaves=leaves):
            return _build(tree, {id(leaf): v for leaf, v in zip(leaves, values)})
    read = Aggregation(tuple(calls), around, text)
    # Each count or sum may be a DISTINCT one its text does not show: the plain calls first.
    optional = [j for j, c in enumerate(calls)
                if c.function in _DISTINCT and c.inputs and not c.distinct]
    for mask in range(2 ** len(optional) if len(optional) <= 3 else 1):
        tried = list(calls)
        for bit, j in enumerate(optional):
            if mask >> bit & 1:
                tried[j] = _with_distinct(tried[j])
        candidate = Aggregation(tuple(tried), around, text)
        try:
            same = df.agg(column.alias("v")).sameSemantics(
                df.agg(candidate.column().alias("v")))
        except PySparkException as error:
            raise UnreadableCall(f"{text!r} read back as {_shown(read)} fails in Spark "
                                 f"({type(error).__name__})") from None
        if same:
            return candidate
    if any(c.function in _DISTINCT for c in calls):
        raise UnreadableCall(
            f"its text {text!r} does not say all it does (a DISTINCT with more than one input, "
            f"a FILTER or an option Spark does not print)")
    raise UnreadableCall(f"its text {text!r} does not say all it does (a DISTINCT, a FILTER "
                         f"or an option Spark does not print)")


def _with_distinct(call):
    return FunctionCall(call.function, call.inputs, call.input_texts, call.params,
                        call.text, distinct=True)


def _shown(read):
    return ", ".join(f"{c.function}(...)" for c in read.calls)


# --- the text as a tree: ("call", name, args, distinct, text), ("case", branches, otherwise, text),
# ("cast", how, child, type, text), ("literal", value, text), ("name", text), ("expr", text)

def _parse(text, names=frozenset()):
    """The tree of ``text``; ``names``: the DataFrame's columns, which Spark prints as they are
    (``max_by(日付, 日付)``, ``bit_xor( lead)``), so a name no identifier spells is found by
    itself and read back quoted."""
    if text in names and not _NAME.match(text) and _literal(text.strip()) is _NOT_LITERAL:
        return ("name", "`" + text.replace("`", "``") + "`")
    text = text.strip()
    literal = _literal(text)
    if literal is not _NOT_LITERAL:
        return ("literal", literal, text)
    if _NAME.match(text):
        return ("name", text)
    if text.startswith("CASE WHEN ") and text.endswith(" END"):
        parts = _top_level_words(text[len("CASE"):-len(" END")], ("WHEN", "THEN", "ELSE"))
        words = [w for w, _ in parts]
        pairs = len(words) - (words[-1:] == ["ELSE"])
        if pairs >= 2 and pairs % 2 == 0 and words[:pairs] == ["WHEN", "THEN"] * (pairs // 2):
            branches = [(_parse(parts[i][1], names), _parse(parts[i + 1][1], names))
                        for i in range(0, pairs, 2)]
            otherwise = _parse(parts[-1][1], names) if pairs < len(words) else None
            return ("case", tuple(branches), otherwise, text)
    cast = _CAST.match(text)
    if cast and _balanced(cast.group(2)):
        return ("cast", cast.group(1), _parse(cast.group(2), names), cast.group(3), text)
    called = _CALLED.match(text)
    if called and text.endswith(")") and _balanced(text[called.end():-1]):
        inside = text[called.end():-1]
        distinct = inside.startswith("DISTINCT ")     # F.expr("count(DISTINCT x)")'s text
        args = tuple(_parse(a, names) for a in _split_arguments(
            inside[len("DISTINCT "):] if distinct else inside))
        return ("call", called.group(1).lower(), args, distinct, text)
    return ("expr", text)        # e.g. F.expr's own text ("v + 1"): Spark's parser reads it


def _aggregate_calls(node):
    """The outermost aggregate calls of ``node``, in order."""
    if node[0] == "call" and node[1] in AGGREGATES:
        return [node]
    children = []
    if node[0] == "call":
        children = node[2]
    elif node[0] == "case":
        children = [n for branch in node[1] for n in branch] + ([node[2]] if node[2] else [])
    elif node[0] == "cast":
        children = [node[2]]
    return [leaf for child in children for leaf in _aggregate_calls(child)]


def _function_call(node):
    """The :class:`FunctionCall` of an aggregate call ``node``."""
    _, function, args, distinct, text = node
    inputs, input_texts, params = [], [], []
    for arg in args:
        if arg[0] == "literal":
            params.append(arg[1])
            continue
        if params:
            raise UnreadableCall(f"a column argument ({arg[-1]}) follows a literal in {text!r}")
        if _aggregate_calls(arg):
            raise UnreadableCall(f"{text!r} has an aggregate inside an aggregate")
        inputs.append(_build(arg, {}))
        input_texts.append(arg[-1])
    if function == "count" and not inputs:    # count(*), count(1): the rows
        params = []
    if distinct and (function not in _DISTINCT or not inputs or params):
        raise UnreadableCall(f"{text!r} is a DISTINCT aggregate other than count(DISTINCT ...) "
                             f"or sum(DISTINCT ...)")
    return FunctionCall(function, tuple(inputs), tuple(input_texts), tuple(params), text,
                        distinct)


def _build(node, replaced):
    """``node`` as a Column, each node in ``replaced`` (by id) replaced by its Column."""
    if id(node) in replaced:
        return replaced[id(node)]
    kind = node[0]
    try:
        if kind == "literal":
            return F.lit(node[1])
        if kind == "name":
            return F.col(node[1])
        if kind == "case":
            (condition, value), *rest = node[1]
            built = F.when(_build(condition, replaced), _build(value, replaced))
            for condition, value in rest:
                built = built.when(_build(condition, replaced), _build(value, replaced))
            return built if node[2] is None else built.otherwise(_build(node[2], replaced))
        if kind == "cast":
            child = _build(node[2], replaced)
            return child.cast(node[3]) if node[1] == "CAST" else child.try_cast(node[3])
        if kind == "call" and not node[3]:
            # A name in backquotes: an operator (">", "*") is a function of Spark's registry.
            return F.call_function(f"`{node[1]}`",
                                   *[_build(arg, replaced) for arg in node[2]])
        return F.expr(node[-1])
    except PySparkException:
        raise UnreadableCall(f"{node[-1]!r} is no expression Spark reads back") from None


_NOT_LITERAL = object()
_FLOATS = ("NaN", "Infinity", "-Infinity")     # F.lit(float("nan")) prints NaN


def _literal(argument):
    """A literal argument's Python value, or ``_NOT_LITERAL``."""
    if argument == "*":
        return 1
    if argument == "NULL":
        return None
    if argument in _FLOATS:
        return float(argument)
    if _INTEGER.match(argument):
        return int(argument)
    if _LONG.match(argument) and abs(int(argument[:-1])) >= 2 ** 31:
        return int(argument[:-1])        # F.lit of an int past 32 bits is a long
    if _DECIMAL.match(argument):
        return float(argument)
    if argument in ("true", "false"):
        return argument == "true"
    if len(argument) >= 2 and argument[0] == argument[-1] == "'":
        body = argument[1:-1]
        if re.fullmatch(r"(?:[^'\\]|\\.)*", body, re.S):
            return re.sub(r"\\(.)", r"\1", body, flags=re.S)
    return _NOT_LITERAL


def _scan(text):
    """(index, character, depth) of each character of ``text`` outside quotes, backquotes and
    string literals (a backslash escapes inside a string)."""
    depth, quote, escaped = 0, None, False
    for i, ch in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\" and quote == "'":
                escaped = True
            elif ch == quote:
                quote = None
            continue
        if ch in "`'\"":
            quote = ch
        elif ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        yield i, ch, depth


def _balanced(text):
    depth = 0
    for _, _, depth in _scan(text):
        if depth < 0:
            return False
    return depth == 0


def _split_arguments(text):
    """The top-level comma-separated arguments of ``text`` (parentheses, backquotes and quoted
    strings respected), each as Spark printed it: without the space Spark puts after a comma,
    but with a name's own spaces."""
    if not text.strip():
        return []
    parts, start = [], 0
    for i, ch, depth in _scan(text):
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 2 if text[i + 1:i + 2] == " " else i + 1
    parts.append(text[start:])
    return parts


def _top_level_words(text, words):
    """``text`` cut at each of ``words`` standing alone at the top level (outside parentheses,
    strings and a nested CASE ... END): [(word, the text after it), ...]."""
    cuts, nested = [], 0
    outside = {i for i, _, depth in _scan(text) if depth == 0}
    for match in re.finditer(r"(?<![\w`])(CASE|END|WHEN|THEN|ELSE)(?![\w`])", text):
        if match.start() not in outside:
            continue
        word = match.group(1)
        if word == "CASE":
            nested += 1
        elif word == "END":
            nested -= 1
        elif nested == 0 and word in words:
            cuts.append((word, match.start(), match.end()))
    return [(word, text[end:cuts[k + 1][1] if k + 1 < len(cuts) else len(text)].strip())
            for k, (word, _, end) in enumerate(cuts)]
