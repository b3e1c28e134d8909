"""Validation of a partitioner archive read back from bytes (``Partitioner.from_bytes``), before
any C code reads it.

The archive comes back from Spark checkpoints: untrusted bytes. Its metadata (strategy,
workers, seed, parameters) is checked here and builds a fresh router; the router then checks
the state against its own parameters (``check_state`` beside each router in csrc/, with the
shared structures' checks beside them: ``_keymap.check_keymap``,
``_spacesaving.check_spacesaving``, the load vector in ``_router``). A state that fails raises
``ValueError`` naming the field and what is wrong.
"""
from dataclasses import fields

from skewgroup._routing.config import STRATEGIES, make_config
from skewgroup._routing._router import MAX_SEED, MAX_WORKERS

META_FIELDS = {"format", "strategy", "workers", "seed", "params"}


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
    seed = _meta_int("seed", meta["seed"], 0, MAX_SEED)
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


def check_state(router, state):
    """Raise ValueError naming the field unless ``state`` is a whole, consistent state of
    ``router`` (a fresh router built from the archive's metadata)."""
    try:
        router.check_state(state)
    except ValueError as error:
        raise ValueError(f"Partitioner state {error}") from None
