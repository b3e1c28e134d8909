# cython: wraparound=True, boundscheck=True
"""Checks with messages that name what is wrong, what is allowed and what was given.

* Parameters (user input), scikit-learn style: ``check_int``, ``check_real``.
* Fields of a state read back from bytes (untrusted: a checkpoint), before any C code reads
  them: ``check_fields``, ``check_field_int``, ``check_array``, ``check_values``,
  ``check_distinct``, ``check_chains``; each structure's own check sits beside it
  (``_keymap.check_keymap``, ``_spacesaving.check_spacesaving``) and a router's beside its
  class (``check_state``). A failed check raises ``ValueError("field 'f' ...")``; the
  reader says whose state it was.

Part of the compiled core: it imports nothing from skewgroup's Python layers.
"""
import numbers

import numpy as np

# Tuple clocks (routed, a summary's total) keep counting after a load: far from int64's end so
# that they never wrap (2**62 tuples at 10**9 per second is 146 years).
MAX_CLOCK = 1 << 62


def check_int(name, value, low=None, high=None):
    """Return ``value`` as int if it is an integer in [low, high]; else raise naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
            f"The {name!r} parameter must be an int in {_range(low, high, '[', ']')}. "
            f"Got {value!r} of type {type(value).__name__} instead."
        )
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(
            f"The {name!r} parameter must be an int in {_range(low, high, '[', ']')}. "
            f"Got {value!r} instead."
        )
    return int(value)


def check_real(name, value, low=None, high=None, closed="both"):
    """Return ``value`` as float if it is a real number in the interval; else raise."""
    left = "[" if closed in ("both", "left") else "("
    right = "]" if closed in ("both", "right") else ")"
    allowed = _range(low, high, left, right)
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(
            f"The {name!r} parameter must be a real number in {allowed}. "
            f"Got {value!r} of type {type(value).__name__} instead."
        )
    value = float(value)
    too_low = low is not None and (value < low or (value == low and left == "("))
    too_high = high is not None and (value > high or (value == high and right == ")"))
    if value != value or too_low or too_high:
        raise ValueError(
            f"The {name!r} parameter must be a real number in {allowed}. Got {value!r} instead."
        )
    return value


def _range(low, high, left, right):
    lo = "-inf" if low is None else repr(low)
    hi = "inf" if high is None else repr(high)
    return f"{'(' if low is None else left}{lo}, {hi}{')' if high is None else right}"


# --- fields of a state read back from bytes --------------------------------------------------


def bad(field, problem):
    return ValueError(f"field {field!r} {problem}")


def join(path, name):
    return f"{path}/{name}" if path else name


def check_fields(path, state, expected):
    """``state`` is a dict with exactly the ``expected`` fields."""
    if not isinstance(state, dict):
        raise bad(path or "<root>", f"must be a group of fields {sorted(expected)}; "
                                    f"got {type(state).__name__}")
    missing = sorted(set(expected) - set(state))
    if missing:
        raise bad(join(path, missing[0]), "is missing")
    unknown = sorted(set(state) - set(expected))
    if unknown:
        raise bad(join(path, unknown[0]), "is not a field of this strategy's state")


def check_field_int(field, value, low, high):
    """An integer scalar in [low, high]."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise bad(field, f"must be an integer; got {type(value).__name__} {value!r}")
    if not low <= value <= high:
        raise bad(field, f"is {value}; it must be in [{low}, {high}]")
    return int(value)


def check_array(field, value, dtype, shape):
    """A numpy array of exactly ``dtype`` and ``shape`` (None in ``shape``: any length)."""
    dtype = np.dtype(dtype)
    if not isinstance(value, np.ndarray):
        raise bad(field, f"must be an array of {dtype}; got {type(value).__name__}")
    if value.dtype != dtype:
        raise bad(field, f"has dtype {value.dtype}; it must be {dtype}")
    if value.ndim != len(shape) or any(want is not None and got != want
                                       for got, want in zip(value.shape, shape)):
        wanted = tuple("any" if want is None else want for want in shape)
        raise bad(field, f"has shape {value.shape}; it must be {wanted}")
    return np.ascontiguousarray(value)


def check_values(field, values, low, high, what):
    """Every element in [low, high]; the first one outside is reported with its index."""
    outside = (values < low) | (values > high)
    if outside.any():
        index = np.unravel_index(int(np.argmax(outside)), values.shape)
        index = index[0] if len(index) == 1 else index
        value = values[index]
        kind = "a negative value" if value < 0 <= low else "a value"
        raise bad(field, f"has {kind} ({value}) at index {index}; {what} must be in "
                         f"[{low}, {high}]")


def check_distinct(field, values, what):
    uniques, counts = np.unique(values, return_counts=True)
    if (counts > 1).any():
        raise bad(field, f"holds {what} {uniques[np.argmax(counts > 1)]} more than once")


def check_chains(field, following, members, heads, heads_field=None):
    """Following ``following`` from each of ``heads`` visits every member exactly once and ends
    at -1: the linked lists C walks (``while c >= 0: c = next[c]``) stay in bounds and end.

    ``following[i]`` is member i's successor (-1 ends a list); ``members`` a bool mask. An
    injective successor map without cycles is a set of disjoint paths; with as many ends as
    heads and no head anyone's successor, the heads are exactly the paths' starts. Errors about
    the heads name ``heads_field`` (default ``field``).
    """
    nodes = np.flatnonzero(members)
    after = following[nodes]
    linked = after[after >= 0]
    if ((after < -1) | (after >= following.shape[0])).any() or not members[linked].all():
        raise bad(field, "links to an element outside its list")
    if np.unique(linked).size != linked.size:
        raise bad(field, "links two elements to the same successor")
    if heads.size and (not members[heads].all() or np.unique(heads).size != heads.size
                       or np.isin(heads, linked).any()):
        raise bad(heads_field or field, "names a list head that is not the start of a list "
                                        "of its elements")
    if (after == -1).sum() != heads.size:
        raise bad(field, f"has {int((after == -1).sum())} list ends for {heads.size} lists")
    # Pointer doubling: after ceil(log2(len)) + 1 rounds every element of a path has jumped
    # past its end; an element still linked sits on a cycle no head reaches.
    jump = np.full(following.shape[0] + 1, -1, dtype=np.int64)  # slot -1 stays -1
    jump[nodes] = after
    for _ in range(int(nodes.size).bit_length() + 1):
        jump[:-1] = jump[jump[:-1]]
    if (jump[nodes] != -1).any():
        raise bad(field, "has a cycle")
