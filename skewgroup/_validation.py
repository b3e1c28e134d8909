"""Parameter checks with scikit-learn style messages: name, allowed range, value received."""
import numbers


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
