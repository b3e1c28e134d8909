"""Structure-aware fuzzing of saved router states, shared by tests/test_state_fuzz.py
(a few hundred examples in the default run) and bench/fuzz_states.py (the long run).

A case takes a real state (``Partitioner.to_bytes()`` after some seeded Zipf keys), unpacks it
with ``skewgroup._routing._serial.unpack``, changes one to three things the way damage or an
attacker would (array values set to -1, n, huge, another element's value or past-the-end indices;
arrays truncated, extended, reshaped or retyped; fields dropped or added; metadata changed),
repacks it with ``_serial.pack`` (a valid archive) and loads and routes it. The contract:
``from_bytes`` raises ``ValueError``, or the partitioner routes every key to [0, n) and saves
again. Anything else fails the case; a crash kills the process that runs it (faulthandler
prints where), which fails the run as well.
"""
import functools
import json

import numpy as np

import skewgroup
from skewgroup._routing import _serial

# Per strategy: (workers, params) of the base states. The defaults, plus small parameters whose
# periodic steps (epochs, segments, prunings, promotions, d updates) the routed keys cross, and
# n > 64 where bit sets of workers take two words.
VARIANTS = {
    "kg": [(16, {}), (1, {}), (70, {})],
    "sg": [(16, {}), (1, {}), (5, {})],
    "pkg": [(16, {}), (2, {}), (70, {})],
    "dchoices": [(16, {}), (5, {"capacity": 12, "update_every": 7}),
                 (70, {"update_every": 50, "theta": 0.002})],
    "wchoices": [(16, {}), (3, {"capacity": 8})],
    "roundrobin": [(16, {}), (5, {"capacity": 10})],
    "pdstream": [(16, {}), (5, {"window": 4}), (70, {"window": 12})],
    "fish": [(16, {"epoch": 300}), (5, {"k_max": 8, "epoch": 50, "interval": 30}),
             (70, {"k_max": 16, "epoch": 100})],
    "flexd": [(16, {"segment": 2000, "threshold": 0.002, "prune_every": 4000,
                    "prune_keep": 20, "capacity": 64}), (16, {})],
    "dkg": [(16, {}), (8, {"expected_keys": 10, "promote_every": 300,
                           "promote_every_old": 700, "warmup": 50})],
    "adaptive": [(16, {}), (5, {"theta": 0.05, "epoch": 300, "slack": 0}),
                 (16, {"slack": 2, "burst": 0}), (16, {"hold": 12}),
                 (5, {"theta": 0.05, "epoch": 300, "slack": 1, "burst": 3, "hold": 5,
                      "doorkeeper": 7}), (16, {"doorkeeper": 0}),
                 (70, {"theta": 0.002, "epoch": 700})],
}
ROUTED_BEFORE = 20_000   # keys routed into a base state
ROUTED_AFTER = 3_000     # keys a loaded state routes


@functools.lru_cache(maxsize=None)
def keys(seed):
    return skewgroup.streams.zipf(1.4, ROUTED_BEFORE + ROUTED_AFTER, universe=10_000, seed=seed)


@functools.lru_cache(maxsize=None)
def base_state(name, variant):
    """(saved bytes, the keys to route after loading) of a real state."""
    workers, params = VARIANTS[name][variant]
    p = skewgroup.partitioner(name, workers, seed=variant, **params)
    stream = keys(variant)
    p.route(stream[:ROUTED_BEFORE])
    # After the stream: its keys again, and fresh ones never seen.
    after = np.concatenate([stream[ROUTED_BEFORE:], np.arange(10**9, 10**9 + 500)])
    return p.to_bytes(), skewgroup.hash_keys(after, seed=variant)


# --- mutations -----------------------------------------------------------------------------------


def _leaves(node, path=()):
    """(path, value) of every value in a nested state (dicts and tuples)."""
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _leaves(value, path + (key,))
    elif isinstance(node, tuple):
        for i, value in enumerate(node):
            yield from _leaves(value, path + (i,))
    else:
        yield path, node


def _groups(node, path=()):
    """Paths of every dict in a nested state, the root included."""
    if isinstance(node, dict):
        yield path
        for key, value in node.items():
            yield from _groups(value, path + (key,))


def _replace(node, path, value, delete=False):
    """A copy of ``node`` with the value at ``path`` replaced (or deleted)."""
    head, rest = path[0], path[1:]
    items = list(node) if isinstance(node, tuple) else dict(node)
    if rest:
        items[head] = _replace(items[head], rest, value, delete)
    elif delete:
        del items[head]
    else:
        items[head] = value
    return tuple(items) if isinstance(node, tuple) else items


def _special_values(value, n, rng):
    """Values that break an assumption: signs, n, lengths, widths' limits, neighbours."""
    length = value.size if isinstance(value, np.ndarray) else 1
    specials = [-1, -2, 0, 1, n - 1, n, n + 1, length - 1, length, length + 1, 2 * length,
                2**31 - 1, 2**31, 2**32, 2**32 + 1, 2**40, 2**43, 2**61, 2**62, 2**63 - 1,
                -(2**63), 2**64 - 1, int(rng.integers(-(2**63), 2**63 - 1))]
    if isinstance(value, np.ndarray) and value.size:
        other = int(value.reshape(-1)[rng.integers(value.size)]) if value.dtype.kind in "iub" \
            else 0
        specials += [other, other + 1, other - 1]  # duplicates and off-by-ones
    elif isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        specials += [int(value) + 1, int(value) - 1, -int(value)]
    return specials


def _cast(number, dtype):
    """``number`` in ``dtype``, wrapping like a C cast."""
    if dtype.kind == "f":
        return np.array(float(number)).astype(dtype)
    wrapped = number % (1 << 64)
    return np.array(wrapped, dtype=np.uint64).astype(dtype)


def _mutate_array(value, n, rng):
    if value.ndim == 0:  # an earlier mutation made it a scalar
        return _mutate_scalar(value.item(), n, rng)
    kind = rng.choice(["poke", "poke", "poke", "poke", "swap", "truncate", "extend", "dtype",
                       "reshape", "scalar", "shuffle", "empty"])
    if kind in ("poke", "swap", "shuffle") and value.size == 0:
        kind = "extend"
    if kind == "poke":
        out = value.copy()
        flat = out.reshape(-1)
        specials = _special_values(value, n, rng)
        poked = []
        for _ in range(int(rng.integers(1, 4))):
            at, number = int(rng.integers(flat.size)), specials[rng.integers(len(specials))]
            flat[at] = _cast(number, out.dtype)
            poked.append(f"[{at}] = {number}")
        return out, "poke " + ", ".join(poked)
    if kind == "swap":
        out = value.copy()
        flat = out.reshape(-1)
        i, j = rng.integers(flat.size, size=2)
        flat[i], flat[j] = flat[j], flat[i]
        return out, "swap two elements"
    if kind == "shuffle":
        return rng.permutation(value), "shuffle along axis 0"
    if kind == "truncate":
        cut = int(rng.integers(1, max(2, value.shape[0] + 1)))
        return (value[cut:] if rng.random() < 0.5 else value[:-cut]), f"truncate by {cut}"
    if kind == "extend":
        extra = np.zeros((int(rng.integers(1, 5)),) + value.shape[1:], dtype=value.dtype)
        return np.concatenate([value, extra]), f"extend by {extra.shape[0]}"
    if kind == "dtype":
        choices = [t for t in ("int8", "int32", "int64", "uint32", "uint64", "float64", "bool",
                               ">i8", ">u8") if np.dtype(t) != value.dtype]
        dtype = choices[rng.integers(len(choices))]
        with np.errstate(invalid="ignore", over="ignore"):  # lossy on purpose
            return value.astype(dtype), f"dtype {dtype}"
    if kind == "reshape":
        return (value.reshape(-1) if value.ndim > 1 else value.reshape(1, -1)), "reshape"
    if kind == "scalar":
        return np.asarray(_special_values(value, n, rng)[0]), "array to scalar"
    return value[:0], "empty"


def _mutate_scalar(value, n, rng):
    choice = rng.integers(4)
    if choice == 0:
        specials = _special_values(value, n, rng)
        number = specials[rng.integers(len(specials))]
        return (number if -(2**63) <= number < 2**63 else np.uint64(number % (1 << 64))), "set"
    if choice == 1:
        return float(value) + 0.5 if isinstance(value, (int, float)) else 0.5, "to float"
    if choice == 2:
        return np.zeros(int(rng.integers(0, 3)), dtype=np.int64), "to array"
    return True, "to bool"


def _mutate_meta(meta, rng):
    meta = json.loads(json.dumps(meta))
    field = ["strategy", "workers", "seed", "params", "drop", "add"][rng.integers(6)]
    # Earlier mutations may have dropped or retyped a field.
    workers = meta.get("workers") if type(meta.get("workers")) is int else 16
    seed = meta.get("seed") if type(meta.get("seed")) is int else 0
    if field == "strategy":
        meta["strategy"] = [*skewgroup.STRATEGIES, "nope", 5, None][
            rng.integers(len(skewgroup.STRATEGIES) + 3)]
    elif field == "workers":
        meta["workers"] = [workers - 1, workers + 1, 2 * workers, 0, -1, 2**20, 2**20 + 1,
                           2**31, str(workers), workers + 0.5, True, None][rng.integers(12)]
    elif field == "seed":
        meta["seed"] = [-1, 2**64, 2**64 - 1, 1.5, "0", None, seed + 1][rng.integers(7)]
    elif field == "params":
        params = meta.get("params") if isinstance(meta.get("params"), dict) else {}
        meta["params"] = params
        if params and rng.random() < 0.6:
            name = list(params)[rng.integers(len(params))]
            params[name] = [-1, 0, 1, 2**31, 2**24, 1e-9, 0.5, 1.5, None, "x", [1, 2], True][
                rng.integers(12)]
        elif params and rng.random() < 0.5:
            del params[list(params)[rng.integers(len(params))]]
        else:
            params["bogus"] = 1
        if rng.random() < 0.05:
            meta["params"] = [1, 2]
    elif field == "drop":
        meta.pop(["strategy", "workers", "seed", "params"][rng.integers(4)], None)
    else:
        meta["extra"] = 1
    return meta, f"meta {field}"


def mutate(data, seed, workers):
    """(mutated bytes, what was changed) for ``data``, deterministic in ``seed``."""
    rng = np.random.default_rng(seed)
    meta, state = _serial.unpack(data)
    meta = {k: v for k, v in meta.items() if k != "format"}
    done = []
    for _ in range(int(rng.integers(1, 4))):
        roll = rng.random()
        if not list(_leaves(state)):  # earlier drops left nothing to change: add a field
            roll = 0.2
        if roll < 0.1:
            meta, what = _mutate_meta(meta, rng)
        elif roll < 0.17:
            leaves = [p for p, _ in _leaves(state)]
            groups = [p for p in _groups(state) if p]
            targets = leaves + groups
            path = targets[rng.integers(len(targets))]
            state, what = _replace(state, path, None, delete=True), f"drop {path}"
        elif roll < 0.22:
            groups = list(_groups(state))
            path = groups[rng.integers(len(groups))] + ("extra",)
            state, what = _replace(state, path, np.zeros(3, dtype=np.int64)), f"add {path}"
        else:
            leaves = list(_leaves(state))
            path, value = leaves[rng.integers(len(leaves))]
            if isinstance(value, np.ndarray):
                value, what = _mutate_array(value, workers, rng)
            else:
                value, what = _mutate_scalar(value, workers, rng)
            state, what = _replace(state, path, value), f"{what} at {path}"
        done.append(what)
    return _serial.pack(meta, state), "; ".join(done)


# --- the contract --------------------------------------------------------------------------------


def run_case(data, hashes):
    """'rejected' if from_bytes raises ValueError, else 'accepted' once the loaded partitioner
    has routed ``hashes`` within [0, n) and saved its state again."""
    try:
        p = skewgroup.Partitioner.from_bytes(data)
    except ValueError:
        return "rejected"
    ids = p.route_hashes(hashes)
    n = p.workers
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= n):
        raise AssertionError(f"routed to {int(ids.min())} .. {int(ids.max())} with n = {n}")
    # Saving and loading again reads every table back (a crash there counts too); the reload
    # may refuse a clock that the routing just pushed past its limit.
    try:
        skewgroup.Partitioner.from_bytes(p.to_bytes())
    except ValueError:
        pass
    return "accepted"


def fuzz_one(name, variant, seed):
    """Mutate a base state of ``name`` with ``seed`` and check the contract; returns
    (outcome, what was changed)."""
    data, hashes = base_state(name, variant)
    mutated, what = mutate(data, seed, VARIANTS[name][variant][0])
    try:
        return run_case(mutated, hashes), what
    except Exception as error:
        raise AssertionError(f"{name} variant {variant} seed {seed} ({what}): {error!r}") \
            from error
