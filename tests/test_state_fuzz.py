"""Crafted or damaged router states never crash a worker.

Each example mutates a real saved state (tests/_state_fuzz.py): ``from_bytes`` must raise
ValueError, or the loaded partitioner must route every key to [0, n). A memory error in the
native code would kill this process (pytest's faulthandler prints where). The default run is a
few hundred deterministic examples; ``SKEWGROUP_FUZZ_EXAMPLES=2000`` raises the count per
strategy (bench/fuzz_states.py is the long run without hypothesis' overhead).
"""
import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import skewgroup
from skewgroup._routing import _serial
from _state_fuzz import VARIANTS, base_state, fuzz_one, run_case
from skewgroup._routing._validation import check_chains

EXAMPLES = int(os.environ.get("SKEWGROUP_FUZZ_EXAMPLES", "30"))


@pytest.mark.parametrize("name", sorted(VARIANTS))
@settings(derandomize=True, max_examples=EXAMPLES, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_a_mutated_state_is_refused_or_routes_in_range(name, data):
    variant = data.draw(st.integers(0, len(VARIANTS[name]) - 1), label="variant")
    seed = data.draw(st.integers(0, 2**32 - 1), label="seed")
    fuzz_one(name, variant, seed)


@pytest.mark.parametrize("name", sorted(VARIANTS))
def test_every_base_state_loads_and_routes(name):
    for variant in range(len(VARIANTS[name])):
        data, hashes = base_state(name, variant)
        assert run_case(data, hashes) == "accepted"


def _repacked(name, change):
    data, _ = base_state(name, 0)
    meta, state = _serial.unpack(data)
    meta.pop("format")
    change(meta, state)
    return _serial.pack(meta, state)


def _set_count(meta, state):
    state["summary"]["counts"][3] = -1


def _pool_past_the_end(meta, state):
    state["pool"][np.argmax(state["pool_size"] > 0), 0] = meta["workers"]


def _sg_position(meta, state):
    state["next_worker"] = 20_016


def _index_past_the_end(meta, state):
    keys, values = state["window_map"]
    values[np.argmax(keys != 0)] = (10_000 << 32) | 1


def _drop_meta(meta, state):
    del meta["seed"]


@pytest.mark.parametrize("name, change, words", [
    ("wchoices", _set_count, ["summary/counts", "-1"]),
    ("pdstream", _pool_past_the_end, ["pool", "16"]),
    ("pdstream", _index_past_the_end, ["window_map#1"]),
    ("sg", _sg_position, ["next_worker", "20016"]),
    ("kg", _drop_meta, ["seed", "missing"]),
])
def test_the_error_names_the_field(name, change, words):
    _assert_refused_naming(name, change, words)


def _assert_refused_naming(name, change, words):
    """The state changed by ``change`` fails to load with an error containing ``words``."""
    with pytest.raises(ValueError) as error:
        skewgroup.Partitioner.from_bytes(_repacked(name, change))
    assert all(word in str(error.value) for word in words), str(error.value)


@pytest.mark.parametrize("data", [
    _serial.MAGIC + b"not a zip",
    _serial.MAGIC + b"PK\x03\x04" + bytes(40),
])
def test_a_broken_archive_is_a_value_error(data):
    with pytest.raises(ValueError, match="not a valid skewgroup state archive"):
        skewgroup.Partitioner.from_bytes(data)


# --- one rule of each structure, on purpose (the fuzzer finds most by chance) --------------------


def test_a_linked_list_cycle_no_head_reaches_is_refused():
    following = np.array([1, 0, -1])  # 0 <-> 1 is a cycle; the list is the head 2 alone
    with pytest.raises(ValueError, match="cycle"):
        check_chains("link", following, np.ones(3, dtype=bool), np.array([2]))


def _unreachable_key(meta, state):
    keys, values = state["items"]
    capacity = keys.shape[0]
    at = int(np.argmax(keys != 0))
    home = int(((keys[at:at + 1] * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(20))[0]
               & np.uint64(capacity - 1))
    # Put the key just before its home slot, behind an empty one: probing never gets there.
    target, empty = (home - 1) % capacity, (home - 2) % capacity
    key, value = keys[at], values[at]
    keys[at] = 0
    keys[target], values[target], keys[empty] = key, value, 0


def _free_bucket_in_use(meta, state):
    summary = state["summary"]
    summary["free_bucket"] = summary["min_bucket"]


def _set_lists_a_worker_twice(meta, state):
    sets, sizes = state["sets"], state["set_size"]
    row = int(np.argmax(sizes >= 2))
    sets[row, 1] = sets[row, 0]


def _every_item_old(meta, state):
    keys, values = state["items"]
    values[keys != 0] = (values[keys != 0] & ((1 << 61) - 1)) | (2 << 61)


def _set_bit_past_the_workers(meta, state):
    state["set_bits"][0, 0] |= np.uint64(1 << meta["workers"])


def _slot_of_another_key(meta, state):
    keys = state["slot_key"]
    keys[0], keys[1] = keys[1], keys[0]


@pytest.mark.parametrize("name, change, words", [
    ("adaptive", _set_bit_past_the_workers, ["set_bits", ">= 16"]),
    ("adaptive", _slot_of_another_key, ["slot_key", "table maps"]),
    ("dkg", _unreachable_key, ["items#0", "probe sequence"]),
    ("wchoices", _free_bucket_in_use, ["summary/free_bucket"]),
    ("flexd", _set_lists_a_worker_twice, ["sets", "twice"]),
    ("dkg", _every_item_old, ["items#1", "Old"]),
])
def test_a_structure_that_disagrees_with_itself_is_refused(name, change, words):
    _assert_refused_naming(name, change, words)


def test_a_summary_saved_with_the_older_smaller_index_still_loads():
    # Checkpoints written before a summary's index had 8 slots per counter hold 2 per counter;
    # they restore and route as the original does.
    from skewgroup._routing._keymap import _KeyMapForTests

    data, hashes = base_state("wchoices", 0)
    meta, state = _serial.unpack(data)
    meta.pop("format")
    summary = state["summary"]
    index = _KeyMapForTests(2 * summary["capacity"])
    for counter, key in enumerate(summary["keys"][:summary["size"]]):
        index.set(int(key), counter)
    assert index.capacity < len(summary["index"][0])
    summary["index"] = index.state()
    old = skewgroup.Partitioner.from_bytes(_serial.pack(meta, state))
    current = skewgroup.Partitioner.from_bytes(data)
    assert np.array_equal(old.route_hashes(hashes), current.route_hashes(hashes))
