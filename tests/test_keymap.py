import numpy as np
from hypothesis import given, settings, strategies as st

from skewgroup._routing._keymap import _KeyMapForTests


@settings(max_examples=60, derandomize=True, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["set", "del"]), st.integers(0, 40)), max_size=400))
def test_keymap_matches_a_dict(ops):
    m = _KeyMapForTests()
    ref = {}
    for i, (op, key) in enumerate(ops):
        key = key * 0x10001  # a few keys share home slots
        if op == "set":
            m.set(key, i)
            ref[key] = i
        else:
            assert m.delete(key) == (key in ref)
            ref.pop(key, None)
        assert len(m) == len(ref)
    for key in range(0, 41 * 0x10001, 0x10001):
        assert m.get(key) == ref.get(key, -1)


def test_keymap_bounded_by_live_keys_through_churn():
    m = _KeyMapForTests()
    for key in range(1, 200_000):
        m.set(key, key)
        if key > 100:
            m.delete(key - 100)
    assert len(m) == 100
    assert m.capacity <= 512
    assert m.get(0) == -1 and m.get(199_999) == 199_999
