"""Validation of a router state read back from bytes (``Partitioner.from_bytes``), before any C
code reads it.

Router state comes back from Spark checkpoints: untrusted bytes. The C routers index arrays
with the values they hold (worker ids, counter and bucket ids, table slots) and walk linked
lists and probe sequences until they end, so a state that is well formed but inconsistent
could read or write out of bounds or loop forever. Every check here is one such assumption
of the C code (named next to the check), done with vectorised numpy on the whole state before a
router is built; a state that fails raises ``ValueError`` naming the field and what is wrong.

One validator per structure (load vector, key map, SpaceSaving summary, ring, linked chains),
reused by the strategies' validators at the bottom (``STATE_CHECKS``).
"""
import numbers
from dataclasses import fields

import numpy as np

from skewgroup._config import KEYMAP_SLOT_BYTES, STRATEGIES, make_config

MAX_WORKERS = 1 << 20   # workers of a partitioner (the (load, worker) packing's 21 bits)
# The (load, worker) packing of _router.pxd is exact while a load is below 2**43.
MAX_LOAD = 1 << 43
# Tuple clocks (routed, a summary's total) keep counting after a load: far from int64's end so
# that they never wrap (2**62 tuples at 10**9 per second is 146 years).
MAX_CLOCK = 1 << 62
# A key map's free slot (_keymap.pxd EMPTY_KEY), and the golden-ratio constant that both
# spreads a key to its home slot and stands in for a hash equal to EMPTY_KEY.
EMPTY_KEY = 0
GOLDEN = np.uint64(0x9E3779B97F4A7C15)
META_FIELDS = {"format", "strategy", "workers", "seed", "params"}


def bad(field, problem):
    return ValueError(f"Partitioner state field {field!r} {problem}")


def join(path, name):
    return f"{path}/{name}" if path else name


# --- fields, scalars and arrays ----------------------------------------------------------------


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


def check_int(field, value, low, high):
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


# --- structures ----------------------------------------------------------------------------------


def check_loads(state, workers, resizable=False):
    """The load vector every router keeps (_router.pyx), and the tuple count."""
    loads = check_array("load", state["load"], np.int64, (workers,))
    check_values("load", loads, 0, MAX_LOAD - 1, "loads")
    routed = check_int("routed", state["routed"], 0, MAX_CLOCK)
    # Each routed tuple added one to one load; a resize (FISH) forgets the removed workers'.
    total = int(loads.sum())
    if total > routed or (total != routed and not resizable):
        raise bad("load", f"sums to {total}, but {routed} tuples were routed")
    return loads, routed


def _home(keys, capacity):
    # _keymap.pxd _home: a multiply (wrapping mod 2**64) spreads the hash once more.
    return ((keys * GOLDEN) >> np.uint64(20)).astype(np.int64) & (capacity - 1)


def check_keymap(field, value, max_capacity, min_capacity=16):
    """A KeyMap as (keys, values): returns (occupied mask, keys, values).

    C's probes stop on the key or on an empty slot and C deletes by backward shift, so: a
    power-of-two capacity, load <= 1/2 as every insertion keeps it (so probes end), every key
    once, and every key reachable from its home slot by a run of occupied slots.
    """
    if not isinstance(value, tuple) or len(value) != 2:
        raise bad(field, "must be a key map: a pair (keys, values)")
    keys = check_array(f"{field}#0", value[0], np.uint64, (None,))
    values = check_array(f"{field}#1", value[1], np.int64, keys.shape)
    capacity = keys.shape[0]
    if capacity & (capacity - 1) or not min_capacity <= capacity <= max(min_capacity,
                                                                        max_capacity):
        raise bad(f"{field}#0", f"has {capacity} slots; a key map has a power of two of slots "
                                f"in [{min_capacity}, {max(min_capacity, max_capacity)}]")
    occupied = keys != EMPTY_KEY
    size = int(occupied.sum())
    if 2 * size > capacity:
        raise bad(f"{field}#0", f"holds {size} keys in {capacity} slots; at most half may be used")
    check_distinct(f"{field}#0", keys[occupied], "the key")
    slots = np.arange(capacity)
    # The run of occupied slots just before each slot: slot - (last empty slot before it) - 1,
    # cyclically (there is at least one empty slot).
    last_empty = np.maximum.accumulate(np.where(occupied, -1, slots))
    last_empty = np.where(last_empty < 0, slots[~occupied][-1] - capacity, last_empty)
    run = slots - last_empty - 1
    distance = (slots - _home(keys, capacity)) & (capacity - 1)
    unreachable = occupied & (distance > run)
    if unreachable.any():
        raise bad(f"{field}#0", f"holds key {keys[np.argmax(unreachable)]} at slot "
                                f"{int(np.argmax(unreachable))}, which its probe sequence "
                                "never reaches")
    return occupied, keys, values


def stored_keys(hashes):
    """The keys a KeyMap stores for ``hashes`` (_keymap.pxd _stored)."""
    return np.where(hashes == EMPTY_KEY, GOLDEN, hashes)


def _power_of_two_slots(slots):
    return max(16, 1 << (slots - 1).bit_length())  # keymap_init's rounding


def spacesaving_index_slots(capacity):
    """(fewest, most) slots a summary's index may have (_spacesaving.pyx). ss_init gives it
    up to 8 per counter; summaries saved before that have 2 per counter, and restore (the
    update path only needs >= 2 per counter: it never grows the index)."""
    slots = 8 * capacity
    if slots > 16384:
        slots = max(16384, 2 * capacity)
    return _power_of_two_slots(2 * capacity), _power_of_two_slots(slots)


SPACESAVING_FIELDS = ("capacity", "size", "total", "min_bucket", "free_bucket", "keys", "counts",
                      "errors", "link", "bucket_value", "bucket_head", "bucket_next",
                      "bucket_prev", "index")


def check_spacesaving(path, state, capacity=None):
    """A SpaceSaving stream summary (_spacesaving.pyx) of ``capacity`` counters (None: any,
    as a standalone SpaceSaving saves it).

    Counters 0 .. size-1 are in use; each is in the bucket of its count; the buckets in use
    form one list by increasing value from min_bucket (bucket_next / bucket_prev), each bucket's
    counters one list from its head (link next / prev); the other bucket ids form the free
    list; the index maps each monitored key to its counter. Unused counters are not read.
    """
    check_fields(path, state, SPACESAVING_FIELDS)
    def f(name):  # a field's full name
        return join(path, name)

    k = check_int(f("capacity"), state["capacity"], 1, (1 << 31) - 1) if capacity is None \
        else check_int(f("capacity"), state["capacity"], capacity, capacity)
    size = check_int(f("size"), state["size"], 0, k)
    total = check_int(f("total"), state["total"], 0, MAX_CLOCK)
    min_bucket = check_int(f("min_bucket"), state["min_bucket"], -1, k - 1)
    free_bucket = check_int(f("free_bucket"), state["free_bucket"], -1, k - 1)
    keys = check_array(f("keys"), state["keys"], np.uint64, (k,))
    counts = check_array(f("counts"), state["counts"], np.int64, (k,))[:size]
    errors = check_array(f("errors"), state["errors"], np.int64, (k,))[:size]
    link = check_array(f("link"), state["link"], np.intc, (k, 3))[:size]
    bucket_value = check_array(f("bucket_value"), state["bucket_value"], np.int64, (k,))
    bucket_head = check_array(f("bucket_head"), state["bucket_head"], np.intc, (k,))
    bucket_next = check_array(f("bucket_next"), state["bucket_next"], np.intc, (k,))
    bucket_prev = check_array(f("bucket_prev"), state["bucket_prev"], np.intc, (k,))
    check_values(f("counts"), counts, 0, total, "counts of the counters in use")
    check_values(f("errors"), errors, 0, np.iinfo(np.int64).max, "errors")
    if (errors > counts).any():
        c = int(np.argmax(errors > counts))
        raise bad(f("errors"), f"is {errors[c]} at counter {c}, above its count {counts[c]}")
    bucket, prev, nxt = link[:, 0], link[:, 1], link[:, 2]
    check_values(f("link"), bucket, 0, k - 1, "bucket ids (column 0)")
    check_values(f("link"), link[:, 1:], -1, size - 1, "counter links (columns 1, 2)")
    # The bucket list: the buckets in use by increasing value, linked both ways.
    used = np.unique(bucket)
    order = used[np.argsort(bucket_value[used], kind="stable")]
    values = bucket_value[order]
    if (values < 0).any() or (np.diff(values) <= 0).any():
        raise bad(f("bucket_value"), "must be >= 0 and differ between the buckets in use")
    if not np.array_equal(counts, bucket_value[bucket]):
        c = int(np.argmax(counts != bucket_value[bucket]))
        raise bad(f("counts"), f"is {counts[c]} at counter {c}, not its bucket's value "
                               f"{bucket_value[bucket[c]]}")
    if min_bucket != (int(order[0]) if size else -1):
        raise bad(f("min_bucket"), f"is {min_bucket}, not the least bucket in use")
    if size and (not np.array_equal(bucket_next[order[:-1]], order[1:])
                 or bucket_next[order[-1]] != -1):
        raise bad(f("bucket_next"), "does not link the buckets in use by increasing value")
    if size and (not np.array_equal(bucket_prev[order[1:]], order[:-1])
                 or bucket_prev[order[0]] != -1):
        raise bad(f("bucket_prev"), "does not link the buckets in use by decreasing value")
    # Each bucket's counters: one list from its head, every link in the same bucket.
    heads = bucket_head[used].astype(np.int64)
    check_values(f("bucket_head"), heads, 0, size - 1, "heads of the buckets in use")
    if not np.array_equal(bucket[heads], used) or (prev[heads] != -1).any():
        raise bad(f("bucket_head"), "names a counter that does not head that bucket")
    check_chains(f("link"), nxt.astype(np.int64), np.ones(size, dtype=bool), heads,
                 heads_field=f("bucket_head"))
    linked = np.flatnonzero(nxt >= 0)
    if (bucket[nxt[linked]] != bucket[linked]).any() or (prev[nxt[linked]] != linked).any():
        raise bad(f("link"), "links counters of different buckets, or prev and next disagree")
    # The free list: exactly the bucket ids not in use (_new_bucket never finds it empty).
    free = np.ones(k, dtype=bool)
    free[used] = False
    free_heads = np.array([free_bucket] if free_bucket >= 0 else [], dtype=np.int64)
    if free.any() != (free_bucket >= 0):
        raise bad(f("free_bucket"), f"is {free_bucket}; the free bucket list must hold "
                                    f"exactly the {int(free.sum())} buckets not in use")
    check_chains(f("bucket_next"), bucket_next.astype(np.int64), free, free_heads,
                 heads_field=f("free_bucket"))
    # The index: each monitored key once, to its counter, in a table the update path never
    # has to grow.
    fewest, most = spacesaving_index_slots(k)
    occupied, index_keys, index_values = check_keymap(f("index"), state["index"], most,
                                                      min_capacity=fewest)
    if int(occupied.sum()) != size:
        raise bad(f("index"), f"holds {int(occupied.sum())} keys for {size} counters in use")
    targets = index_values[occupied]
    check_values(f"{f('index')}#1", targets, 0, size - 1, "counters of the monitored keys")
    if not np.array_equal(stored_keys(keys[targets]), index_keys[occupied]):
        raise bad(f("index"), "maps a key to a counter that holds another key")


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
            check_int("next_worker", state["next_worker"], 0, workers - 1)
    return check


def _head_tail(extra=()):
    """D-Choices, W-Choices and Round-Robin (_heavy.pyx)."""
    def check(config, workers, state):
        check_fields("", state, BASE_FIELDS + ("summary", "head_tuples") + extra)
        _, routed = check_loads(state, workers)
        _, capacity = config._resolved(workers)
        check_spacesaving("summary", state["summary"], capacity)
        check_int("head_tuples", state["head_tuples"], 0, routed)
        if "next_worker" in extra:
            check_int("next_worker", state["next_worker"], 0, workers - 1)
        if "d" in extra:
            # _greedy_d runs d choices per head tuple; FINDOPTIMALCHOICES gives 2 .. n, or n
            # when that is below 2 (n = 1); d starts at 2.
            check_int("d", state["d"], 1, max(2, workers))
            check_int("next_update", state["next_update"], 0, routed + config.update_every)
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
    fill = check_int("ring_fill", state["ring_fill"], 0, window)
    # The ring fills from slot 0, so while it is not full the next slot is the fill.
    position = check_int("ring_pos", state["ring_pos"], 0, window - 1)
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
    free_top = check_int("free_top", state["free_top"], 0, window)
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
    check_int("top_count", state["top_count"], 0, summary["total"])
    check_int("top_key", state["top_key"], 0, (1 << 64) - 1)
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
    check_int("hot_mass", state["hot_mass"], 0, summary["total"])
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
    STATE_CHECKS[config.name](config, workers, state)
