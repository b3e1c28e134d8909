"""Spark's aggregate functions as reductions over Arrow groups, with Spark 4.3's semantics.

A stream whose call has a Python aggregator merges every aggregate of the call in one stateful
Python step, so each Spark aggregate the call names needs a Python twin: ``reduce`` (grouped input
rows to one state per group), ``merge`` (grouped states to one per group) and ``result`` (Spark's
value of each state). ``make_reduction`` gives that twin for a function as Spark prints its name.

The state crosses pandas between Spark and Python, so its columns follow ``reductions``'s rules:
a number column never holds a null (a filler, the validity in a count or flag column beside it),
strings and binary may be null, and a set or a sketch is one binary value per key (no list or
struct column).

Spark's semantics kept here, beyond ``reductions.Reduction``'s (count, sum, avg, min, max,
bool_and, bool_or, which this module wraps):

* stddev/std/stddev_samp, stddev_pop, variance/var_samp, var_pop, skewness, kurtosis: Spark's
  central-moment state (n, avg, m2[, m3[, m4]]), each row's state being what Spark's update makes
  of it from the empty state, states merged with Spark's pairwise formulas (Chan et al.; a tree of
  pairwise merges, so the last bits may differ from Spark's, whose order is a partition's).
  n == 0 gives null; a sample form of one value, and skewness/kurtosis with m2 == 0, give null
  (``spark.sql.legacy.statisticalAggregate`` false, Spark 4's default); NaN and infinities give
  NaN as Spark's do (an infinity's own m2 is inf * 0).
* count_if(boolean): the number of true values, never null.
* min_by(x, ord), max_by(x, ord): rows whose ord is null are skipped, x may be null, null where no
  ord is. Among rows tied on the extreme ord Spark keeps the LAST in input order (its update
  keeps the old value only when the old ord is strictly better), and so does this module
  (rows in group order, states in group order). Doubles order as Spark's: NaN above every
  number, NaN equal to NaN, -0.0 equal to 0.0; strings and binary by their bytes.
* bit_and, bit_or, bit_xor over byte, short, int, long: the input's type, null for a group of
  nulls.
* collect_set(x): the distinct non-null values (an empty array for a group of nulls), doubles
  and floats normalized as Spark's are (-0.0 as 0.0, one NaN).
* hll_sketch_agg, hll_union_agg, theta_sketch_agg, theta_union_agg, kll_sketch_agg_bigint /
  _float / _double, kll_merge_agg_bigint / _float / _double: the sketch bytes Spark's own
  functions read (hll_sketch_estimate, theta_sketch_estimate, kll_sketch_get_n_*, ...), each
  value hashed as Spark's sketch hashes it; a group of nulls gives Spark's empty sketch, byte
  for byte.

Refused (``UnsupportedFunction``), as their Spark semantics are not kept here: a nested
(array, struct, map) value in collect_set; binary input to hll_sketch_agg
and theta_sketch_agg, and theta's array input (Spark hashes raw bytes or int arrays, which
the datasketches package's update cannot take); any function not in ``FUNCTIONS``.

Each family lives in a module of its own (``folds``, ``moments``, ``extremum_by``,
``collect_set``, ``sketches``, ``percentile``) over the helpers of ``_aggregation.arrow_columns``;
each module's ``FACTORIES`` maps the names of the functions it keeps to their reduction's class.

>>> import numpy as np, pyarrow as pa
>>> sd = make_reduction("stddev_samp", [pa.float64()])
>>> state = sd.reduce([pa.array([1.0, 2.0, None, 4.0])], np.array([0, 2, 4]))
>>> sd.result(sd.merge(state, np.array([0, 2]))).to_pylist()
[1.5275252316519468]
"""
from skewgroup._aggregation.spark_functions import (collect_set, extremum_by, folds, moments,
                                                    percentile, sketches)
from skewgroup._aggregation.spark_functions.arguments import UnsupportedFunction

__all__ = ["FUNCTIONS", "UnsupportedFunction", "make_reduction"]


def make_reduction(function, arg_types, params=(), *, ansi=True, name=None):
    """The reduction of Spark's aggregate `function` (lower-case name as Spark prints it, e.g.
    "stddev_samp", "max_by", "kll_sketch_agg_double") over arguments of Arrow types `arg_types`
    (a list, one per column argument, in Spark's argument order), with literal `params` (a tuple
    of Python values: e.g. hll_sketch_agg's lgConfigK, kll's k). Raises UnsupportedFunction (a
    TypeError subclass) whose message says why: an unknown function, or an argument type whose
    Spark semantics this module cannot keep."""
    if not isinstance(function, str):
        raise UnsupportedFunction(f"The 'function' parameter must be a Spark aggregate's name "
                                  f"(a str). Got {function!r}.")
    key = function.lower()
    factory = _FACTORIES.get(key)
    if factory is None:
        raise UnsupportedFunction(
            f"Spark's aggregate {function!r} has no Python reduction here; supported: "
            f"{', '.join(FUNCTIONS)}.")
    arg_types = list(arg_types)
    params = tuple(params)
    reduction = factory(key, arg_types, params, ansi)
    reduction.kind = key
    reduction.name = name or key
    return reduction


_FACTORIES = {function: factory
              for family in (folds, moments, extremum_by, collect_set, sketches, percentile)
              for function, factory in family.FACTORIES.items()}

FUNCTIONS = tuple(sorted(_FACTORIES))
