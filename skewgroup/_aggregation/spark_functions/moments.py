"""Spark's central moments (stddev, variance, skewness, kurtosis and their forms) as reductions
over Arrow groups: Spark's CentralMomentAgg state, merged with its pairwise formulas.
"""
import numpy as np
import pyarrow as pa

from skewgroup._aggregation.arrow_columns import filled, single_array, to_numpy, valid_mask
from skewgroup._aggregation.spark_functions.arguments import UnsupportedFunction, expect


_MOMENTS = {"stddev": 2, "std": 2, "stddev_samp": 2, "stddev_pop": 2, "variance": 2,
            "var_samp": 2, "var_pop": 2, "skewness": 3, "kurtosis": 4}


class _Moments:
    """Spark's CentralMomentAgg: state (n, avg, m2[, m3[, m4]]), n a long here."""

    def __init__(self, function, arg_types, params, ansi):
        expect(function, arg_types, params, 1)
        t = arg_types[0]
        if not (pa.types.is_floating(t) or pa.types.is_integer(t)):
            raise UnsupportedFunction(f"{function} takes a number (Spark casts it to double); "
                                      f"got {t}.")
        self.function = function
        self.order = _MOMENTS[function]
        self.state_types = [pa.int64()] + [pa.float64()] * self.order
        self.result_type = pa.float64()

    def reduce(self, args, offsets):
        values = single_array(args[0])
        valid = valid_mask(values)
        x = filled(values.cast(pa.float64()) if values.type != pa.float64() else values,
                    valid, 0.0).astype(np.float64)
        # each row's state is what Spark's update makes of it from the zero state (an infinity's
        # m2 being inf * 0 = NaN); a null row's state is the zero state
        with np.errstate(invalid="ignore", over="ignore"):
            delta = x
            delta_n = x
            m2 = delta * (delta - delta_n)
            columns = [valid.astype(np.float64), x, m2]
            if self.order >= 3:
                delta2 = delta * delta
                m3 = -3.0 * delta_n * m2 + delta * (delta2 - delta_n * delta_n)
                columns.append(m3)
            if self.order >= 4:
                m4 = (-4.0 * delta_n * m3 - 6.0 * delta_n * delta_n * m2
                      + delta * (delta * delta2 - delta_n * delta_n * delta_n))
                columns.append(m4)
        for c in columns[1:]:
            c[~valid] = 0.0
        return self._fold(columns, offsets)

    def merge(self, state, offsets):
        columns = [to_numpy(state[0]).astype(np.float64)]
        columns += [to_numpy(s).astype(np.float64) for s in state[1:]]
        return self._fold(columns, offsets)

    def _fold(self, columns, offsets):
        folded = _tree_fold(columns, offsets, self._pair)
        return ([pa.array(folded[0].astype(np.int64), pa.int64())]
                + [pa.array(c, pa.float64()) for c in folded[1:]])

    def _pair(self, left, right):
        """Spark's merge of two moment states (CentralMomentAgg.mergeExpressions)."""
        n1, n2 = left[0], right[0]
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            n = n1 + n2
            delta = right[1] - left[1]
            delta_n = np.where(n == 0.0, 0.0, delta / np.where(n == 0.0, 1.0, n))
            avg = left[1] + delta_n * n2
            m2 = left[2] + right[2] + delta * delta_n * n1 * n2
            out = [n, avg, m2]
            if self.order >= 3:
                m3 = (left[3] + right[3] + delta_n * delta_n * delta * n1 * n2 * (n1 - n2)
                      + 3.0 * delta_n * (n1 * right[2] - n2 * left[2]))
                out.append(m3)
            if self.order >= 4:
                m4 = (left[4] + right[4]
                      + delta_n * delta_n * delta_n * delta * n1 * n2 * (n1 * n1 - n1 * n2 + n2 * n2)
                      + 6.0 * delta_n * delta_n * (n1 * n1 * right[2] + n2 * n2 * left[2])
                      + 4.0 * delta_n * (n1 * right[3] - n2 * left[3]))
                out.append(m4)
        return out

    def result(self, state):
        n = to_numpy(state[0]).astype(np.float64)
        m2 = to_numpy(state[2]).astype(np.float64)
        f = self.function
        null = n == 0.0
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            safe_n = np.where(null, 1.0, n)
            if f in ("stddev_pop", "var_pop"):
                value = m2 / safe_n
            elif f in ("skewness", "kurtosis"):
                null = null | (m2 == 0.0)
                safe_m2 = np.where(m2 == 0.0, 1.0, m2)
                if f == "skewness":
                    m3 = to_numpy(state[3]).astype(np.float64)
                    value = np.sqrt(safe_n) * m3 / np.sqrt(safe_m2 * safe_m2 * safe_m2)
                else:
                    m4 = to_numpy(state[4]).astype(np.float64)
                    value = safe_n * m4 / (safe_m2 * safe_m2) - 3.0
            else:   # the sample forms: one value gives null (Spark 4's non-legacy default)
                null = null | (n == 1.0)
                value = m2 / np.where(n <= 1.0, 1.0, n - 1.0)
            if f in ("stddev", "std", "stddev_samp", "stddev_pop"):
                value = np.sqrt(value)
        return pa.array(np.where(null, 0.0, value), pa.float64(), mask=null)


def _tree_fold(columns, offsets, pair):
    """Each group's columns folded into one row by ``pair(left, right)`` (lists of numpy arrays),
    neighbours first (a balanced tree), the earlier row always on the left."""
    columns = [np.asarray(c) for c in columns]
    offsets = np.asarray(offsets, dtype=np.int64)
    sizes = np.diff(offsets)
    while len(columns[0]) > len(sizes):
        rows = len(columns[0])
        starts = np.repeat(offsets[:-1], sizes)
        rank = np.arange(rows, dtype=np.int64) - starts
        size_of = np.repeat(sizes, sizes)
        is_left = (rank % 2 == 0) & (rank + 1 < size_of)
        keep = (rank % 2 == 0)
        left = np.flatnonzero(is_left)
        merged = pair([c[left] for c in columns], [c[left + 1] for c in columns])
        position = (np.cumsum(keep) - 1)[left]
        out = []
        for c, m in zip(columns, merged):
            kept = c[keep].copy()
            kept[position] = m
            out.append(kept)
        columns = out
        sizes = (sizes + 1) // 2
        offsets = np.concatenate([[0], np.cumsum(sizes)])
    return columns


FACTORIES = {f: _Moments for f in _MOMENTS}
