"""Validation of a router state read back from bytes (``Partitioner.from_bytes``), before any C
code reads it.

Router state comes back from Spark checkpoints: untrusted bytes. The C routers index arrays
with the values they hold (worker ids, counter and bucket ids, table slots) and walk linked
lists and probe sequences until they end, so a state that is well formed but inconsistent
could read or write out of bounds or loop forever. Every check here is one such assumption
of the C code (named next to the check), done with vectorised numpy on the whole state before a
router is built; a state that fails raises ``ValueError`` naming the field and what is wrong.

The checks of the shared structures sit beside them in the core (the key map's in ``_keymap``,
SpaceSaving's in ``_spacesaving``, fields and linked chains in ``_validation``); this module
checks the load vector and each strategy's state with them (``STATE_CHECKS``).
"""
from dataclasses import fields

import numpy as np

from skewgroup._config import KEYMAP_SLOT_BYTES, STRATEGIES, make_config
from skewgroup._keymap import check_keymap, stored_keys
from skewgroup._spacesaving import check_spacesaving
from skewgroup._validation import (MAX_CLOCK, bad, check_array, check_distinct, check_field_int,
                                   check_fields, check_values)

MAX_WORKERS = 1 << 20   # workers of a partitioner (the (load, worker) packing's 21 bits)
# The (load, worker) packing of _router.pxd is exact while a load is below 2**43.
MAX_LOAD = 1 << 43
META_FIELDS = {"format", "strategy", "workers", "seed", "params"}


# --- structures ----------------------------------------------------------------------------------


def check_loads(state, workers, resizable=False):
    """The load vector every router keeps (_router.pyx), and the tuple count."""
    loads = check_array("load", state["load"], np.int64, (workers,))
    check_values("load", loads, 0, MAX_LOAD - 1, "loads")
    routed = check_field_int("routed", state["routed"], 0, MAX_CLOCK)
    # Each routed tuple added one to one load; a resize (FISH) forgets the removed workers'.
    total = int(loads.sum())
    if total > routed or (total != routed and not resizable):
        raise bad("load", f"sums to {total}, but {routed} tuples were routed")
    return loads, routed


def check_ring_workers(field, value, workers):
    """FISH's ring over workers 0 .. n-1 (_ring.pyx): its state is the live worker ids."""
    live = check_array(field, value, np.int32, (workers,))
    if not np.array_equal(live, np.arange(workers)):
        raise bad(field, f"must list the live workers 0 .. {workers - 1}")


# --- strategies ----------------------------------------------------------------------------------

BASE_FIELDS = ("load", "routed")


def _basic(fields=()):
    def check(config, workers, state):
        check_fields("", state, BASE_FIELDS + fields)
        check_loads(state, workers)
        if "next_worker" in fields:
            check_field_int("next_worker", state["next_worker"], 0, workers - 1)
    return check


def _head_tail(extra=()):
    """D-Choices, W-Choices and Round-Robin (_heavy.pyx)."""
    def check(config, workers, state):
        check_fields("", state, BASE_FIELDS + ("summary", "head_tuples") + extra)
        _, routed = check_loads(state, workers)
        _, capacity = config._resolved(workers)
        check_spacesaving("summary", state["summary"], capacity)
        check_field_int("head_tuples", state["head_tuples"], 0, routed)
        if "next_worker" in extra:
            check_field_int("next_worker", state["next_worker"], 0, workers - 1)
        if "d" in extra:
            # _greedy_d runs d choices per head tuple; FINDOPTIMALCHOICES gives 2 .. n, or n
            # when that is below 2 (n = 1); d starts at 2.
            check_field_int("d", state["d"], 1, max(2, workers))
            check_field_int("next_update", state["next_update"], 0, routed + config.update_every)
    return check


def check_pdstream(config, workers, state):
    """Pd-Stream (_pdstream.pyx): the window, its key map and the routing-table pool."""
    check_fields("", state, BASE_FIELDS + (
        "window_keys", "ring_pos", "ring_fill", "window_map", "pool", "pool_size",
        "free_slots", "pool_bits", "free_top"))
    check_loads(state, workers)
    window = config.window_length(workers)
    words = (workers + 63) // 64
    ring = check_array("window_keys", state["window_keys"], np.uint64, (window,))
    fill = check_field_int("ring_fill", state["ring_fill"], 0, window)
    # The ring fills from slot 0, so while it is not full the next slot is the fill.
    position = check_field_int("ring_pos", state["ring_pos"], 0, window - 1)
    if fill < window and position != fill:
        raise bad("ring_pos", f"is {position}; while the window fills it must equal "
                              f"ring_fill ({fill})")
    occupied, keys, values = check_keymap("window_map", state["window_map"],
                                          config.state_bound(workers) // KEYMAP_SLOT_BYTES)
    # The map holds each key in the window with its occurrences (low 32 bits): a leaving key
    # is found and decremented, and n_k indexes the n̂ table of N + 1 entries.
    in_window, occurrences = np.unique(stored_keys(ring[:fill]), return_counts=True)
    order = np.argsort(keys[occupied])
    held, entries = keys[occupied][order], values[occupied][order]
    if not np.array_equal(held, in_window):
        raise bad("window_map", "does not hold exactly the keys in the window")
    check_values("window_map#1", entries, 0, (window << 32) | window, "entries")
    if not np.array_equal(entries & 0xFFFFFFFF, occurrences):
        raise bad("window_map#1", "does not count each key's occurrences in the window")
    # Routing-table slots (high 32 bits, slot + 1): in use by one key each, the others on the
    # free stack, so a new entry always finds a free slot.
    slots = (entries >> 32) - 1
    check_values("window_map#1", slots, -1, window - 1, "routing-table slots (high bits - 1)")
    used = slots[slots >= 0]
    check_distinct("window_map#1", used, "routing-table slot")
    free_top = check_field_int("free_top", state["free_top"], 0, window)
    free_slots = check_array("free_slots", state["free_slots"], np.int32, (window,))[:free_top]
    check_values("free_slots", free_slots, 0, window - 1, "free routing-table slots")
    check_distinct("free_slots", free_slots, "the free slot")
    if np.isin(free_slots, used).any() or used.size + free_top != window:
        raise bad("free_slots", f"with free_top {free_top} must hold exactly the "
                                f"{window - used.size} routing-table slots not in use")
    # The entries in use: |C| distinct workers in [0, n), and the bit set of exactly them
    # (levels_least_in walks the set bits as worker ids).
    pool = check_array("pool", state["pool"], np.int32, (window, workers))[used]
    sizes = check_array("pool_size", state["pool_size"], np.int32, (window,))[used]
    bits = check_array("pool_bits", state["pool_bits"], np.uint64, (window, words))[used]
    check_values("pool_size", sizes, 1, workers, "sizes of the entries in use")
    in_entry = np.arange(workers)[None, :] < sizes[:, None]
    check_values("pool", pool[in_entry], 0, workers - 1, "candidate worker ids")
    rows, columns = np.nonzero(in_entry)
    members = pool[rows, columns]
    pairs = rows.astype(np.int64) * workers + members
    if np.unique(pairs).size != pairs.size:
        raise bad("pool", "lists a worker twice in one entry")
    expected = np.zeros_like(bits)
    np.bitwise_or.at(expected, (rows, members >> 6),
                     np.left_shift(np.uint64(1), (members & 63).astype(np.uint64)))
    if not np.array_equal(expected, bits):
        raise bad("pool_bits", "does not hold exactly the workers of each entry in use")


def check_fish(config, workers, state):
    """FISH (_fish.pyx): decayed counters, M_k, waits and the ring."""
    check_fields("", state, BASE_FIELDS + ("summary", "top_count", "top_key", "chosen", "wait",
                                           "ring_workers"))
    check_loads(state, workers, resizable=True)
    summary = state["summary"]
    check_spacesaving("summary", summary, config.k_max)
    check_field_int("top_count", state["top_count"], 0, summary["total"])
    check_field_int("top_key", state["top_key"], 0, (1 << 64) - 1)
    occupied, _, m_k = check_keymap("chosen", state["chosen"],
                                    config.state_bound(workers) // KEYMAP_SLOT_BYTES)
    # M_k (low 32 bits; rows are not state): at least one worker, at most any n ever had.
    check_values("chosen#1", m_k[occupied], 1, MAX_WORKERS, "M_k values")
    waits = check_array("wait", state["wait"], np.float64, (workers,))
    if not np.isfinite(waits).all() or (waits < 0).any():
        raise bad("wait", "must hold finite waits >= 0")
    check_ring_workers("ring_workers", state["ring_workers"], workers)


def check_flexd(config, workers, state):
    """FlexD (_flexd.pyx): per-segment counters, key -> slot map, the slots' worker sets."""
    from skewgroup._flexd import flexd_limits

    check_fields("", state, BASE_FIELDS + ("summary", "table", "sets", "set_size", "last_use"))
    _, routed = check_loads(state, workers)
    capacity = config._capacity()
    max_set, max_entries, _ = flexd_limits(workers, config.delta, config.segment,
                                           config.threshold, capacity, config.prune_every,
                                           config.prune_keep)
    check_spacesaving("summary", state["summary"], capacity)
    sizes = check_array("set_size", state["set_size"], np.intc, (None,))
    entries = sizes.shape[0]
    if entries > max_entries:
        raise bad("set_size", f"has {entries} entries; at most {max_entries} keys hold one")
    sets = check_array("sets", state["sets"], np.int32, (entries, max_set))
    last_use = check_array("last_use", state["last_use"], np.int64, (entries,))
    # The slots are dense: each key maps to its own slot 0 .. entries-1.
    occupied, _, slots = check_keymap("table", state["table"],
                                      config.state_bound(workers) // KEYMAP_SLOT_BYTES)
    if int(occupied.sum()) != entries:
        raise bad("table", f"holds {int(occupied.sum())} keys for {entries} slots")
    check_values("table#1", slots[occupied], 0, entries - 1, "slots")
    check_distinct("table#1", slots[occupied], "the slot")
    # A set has 1 .. max_set distinct workers in [0, n) (_least_unused needs one worker left
    # outside a set that may still grow) and -1 past its size.
    check_values("set_size", sizes, 1, max_set, "set sizes")
    in_set = np.arange(max_set)[None, :] < sizes[:, None]
    check_values("sets", sets[in_set], 0, workers - 1, "worker ids in a set")
    if (sets[~in_set] != -1).any():
        raise bad("sets", "must hold -1 past each set's size")
    ordered = np.sort(sets, axis=1)
    if ((ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] >= 0)).any():
        raise bad("sets", "lists a worker twice in one set")
    check_values("last_use", last_use, 0, max(0, routed - 1), "last uses (tuple indexes)")
    check_distinct("last_use", last_use, "the last use")


def check_dkg(config, workers, state):
    """DKG (_dkg.pyx): one Key Item per tracked key."""
    from skewgroup._dkg import dkg_limits, dkg_table

    check_fields("", state, BASE_FIELDS + ("items",))
    check_loads(state, workers)
    occupied, _, items = check_keymap("items", state["items"],
                                      config.state_bound(workers) // KEYMAP_SLOT_BYTES)
    items = items[occupied]
    # Item = occurrences (40 bits) | N_m (21 bits) << 40 | space << 61 (Baby, Teenage, Old).
    check_values("items#1", items, 0, (3 << 61) - 1, "Key Items (space must be 0, 1 or 2)")
    check_values("items#1", items & ((1 << 40) - 1), 1, (1 << 40) - 1, "occurrences")
    max_machines = max(dkg_table(workers)[2], 2 if workers >= 2 else 1)
    # N_m: the scan of index .. index + N_m - 1 stays within the n loads.
    check_values("items#1", (items >> 40) & ((1 << 21) - 1), 0, max_machines, "machines N_m")
    (old, teenage, _), _ = dkg_limits(config.expected_keys, config.promote_every)
    space = items >> 61
    # The promotions copy each space into a workspace of that space's size.
    for name, code, limit in (("Old", 2, old), ("Teenage", 1, teenage)):
        if int((space == code).sum()) > limit:
            raise bad("items#1", f"holds {int((space == code).sum())} {name} items; the space "
                                 f"holds at most {limit}")


def check_adaptive(config, workers, state):
    """Adaptive (_adaptive.pyx): decayed counters, key -> slot map, the slots' worker sets."""
    from skewgroup._adaptive import adaptive_limits

    check_fields("", state, BASE_FIELDS + ("summary", "table", "hot_mass", "slot_key",
                                           "set_bits", "set_size", "set_cap", "born", "seen",
                                           "door"))
    _, routed = check_loads(state, workers)
    theta, epoch, capacity = config._resolved(workers)
    max_entries, _ = adaptive_limits(workers, theta, epoch, capacity)
    summary = state["summary"]
    check_spacesaving("summary", summary, capacity)
    # Decayed like the summary's total and never above it: one per hot tuple, the total one
    # per tuple (a larger value only widens the caps, but it has no meaning).
    check_field_int("hot_mass", state["hot_mass"], 0, summary["total"])
    # The doorkeeper holds any hashes (0 is an empty slot); only its size is the config's.
    check_array("door", state["door"], np.uint64, (config._door(workers),))
    keys = check_array("slot_key", state["slot_key"], np.uint64, (None,))
    entries = keys.shape[0]
    if entries > max_entries:
        raise bad("slot_key", f"has {entries} entries; at most {max_entries} keys hold one")
    words = (workers + 63) // 64
    bits = check_array("set_bits", state["set_bits"], np.uint64, (entries, words))
    sizes = check_array("set_size", state["set_size"], np.intc, (entries,))
    caps = check_array("set_cap", state["set_cap"], np.intc, (entries,))
    born = check_array("born", state["born"], np.int64, (entries,))
    seen = check_array("seen", state["seen"], np.int64, (entries,))
    # The slots are dense: each key maps to its own slot 0 .. entries-1, whose key it is.
    occupied, map_keys, slots = check_keymap("table", state["table"],
                                             config.state_bound(workers) // KEYMAP_SLOT_BYTES)
    if int(occupied.sum()) != entries:
        raise bad("table", f"holds {int(occupied.sum())} keys for {entries} slots")
    check_values("table#1", slots[occupied], 0, entries - 1, "slots")
    check_distinct("table#1", slots[occupied], "the slot")
    if not np.array_equal(stored_keys(keys[slots[occupied]]), map_keys[occupied]):
        raise bad("slot_key", "does not hold the key the table maps to each slot")
    # levels_least_in turns set bits into worker ids: no bit at n or above, and at least one
    # (a set is never empty); |S_k| is the bit count, within [1, n] (a burst may take a set
    # past its cap), and cap within [1, n].
    if words and workers % 64:
        spare = ~np.uint64((1 << (workers % 64)) - 1)
        if (bits[:, -1] & spare).any():
            raise bad("set_bits", f"names a worker >= {workers}")
    counts = np.unpackbits(bits.view(np.uint8), axis=1).sum(axis=1) if entries else sizes
    if not np.array_equal(counts, sizes):
        raise bad("set_size", "does not count the workers of each set")
    check_values("set_size", sizes, 1, workers, "set sizes")
    check_values("set_cap", caps, 1, workers, "set caps")
    check_values("born", born, 0, routed, "entry births (tuple indexes)")
    check_values("seen", seen, 0, routed, "hot tuples per entry")


STATE_CHECKS = {
    "kg": _basic(),
    "sg": _basic(("next_worker",)),
    "pkg": _basic(),
    "wchoices": _head_tail(),
    "roundrobin": _head_tail(("next_worker",)),
    "dchoices": _head_tail(("d", "next_update")),
    "pdstream": check_pdstream,
    "fish": check_fish,
    "flexd": check_flexd,
    "dkg": check_dkg,
    "adaptive": check_adaptive,
}


# --- the archive's metadata ----------------------------------------------------------------------


def check_meta(meta):
    """(config, workers, seed) from the archive's metadata, or ValueError naming the field."""
    if not isinstance(meta, dict):
        raise ValueError(f"Partitioner state metadata must be a JSON object; got "
                         f"{type(meta).__name__}")
    missing = sorted(META_FIELDS - set(meta))
    if missing:
        raise ValueError(f"Partitioner state metadata field {missing[0]!r} is missing")
    unknown = sorted(set(meta) - META_FIELDS)
    if unknown:
        raise ValueError(f"Partitioner state metadata field {unknown[0]!r} is unknown")
    strategy = meta["strategy"]
    if not isinstance(strategy, str) or strategy not in STRATEGIES:
        raise ValueError(f"Partitioner state metadata field 'strategy' is {strategy!r}; it must "
                         f"be one of {sorted(STRATEGIES)}")
    workers = _meta_int("workers", meta["workers"], 1, MAX_WORKERS)
    seed = _meta_int("seed", meta["seed"], 0, (1 << 64) - 1)
    params = meta["params"]
    allowed = {f.name for f in fields(STRATEGIES[strategy])}
    if not isinstance(params, dict) or set(params) != allowed:
        raise ValueError(f"Partitioner state metadata field 'params' must give exactly "
                         f"{sorted(allowed)} for {strategy!r}; got {params!r}")
    params = dict(params)
    if isinstance(params.get("capacities"), list):
        params["capacities"] = tuple(params["capacities"])
    try:
        config = make_config(strategy, params)
        if params.get("capacities") is not None and len(params["capacities"]) != workers:
            raise ValueError(f"'capacities' gives {len(params['capacities'])} values for "
                             f"{workers} workers")
    except (TypeError, ValueError) as error:
        raise ValueError(f"Partitioner state metadata field 'params' is invalid: {error}") \
            from error
    return config, workers, seed


def _meta_int(name, value, low, high):
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ValueError(f"Partitioner state metadata field {name!r} is {value!r}; it must be "
                         f"an int in [{low}, {high}]")
    return value


def check_state(config, workers, state):
    """Raise ValueError naming the field unless ``state`` is a whole, consistent state of
    ``config``'s router over ``workers`` workers."""
    try:
        STATE_CHECKS[config.name](config, workers, state)
    except ValueError as error:
        raise ValueError(f"Partitioner state {error}") from None
