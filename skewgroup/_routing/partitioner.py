"""The public router object: validated config + native router + key hashing."""
import numpy as np

from skewgroup._routing import _serial
from skewgroup._routing._router import MAX_SEED, MAX_WORKERS
from skewgroup._routing._validation import check_int
from skewgroup._routing.config import make_config
from skewgroup._routing.keys import hash_keys
from skewgroup._routing.state_checks import check_meta, check_state


def partitioner(name, workers, *, seed=0, **params):
    """Create a :class:`Partitioner` for strategy ``name`` over ``workers`` downstream workers.

    Parameters
    ----------
    name : str
        One of ``skewgroup.STRATEGIES``: ``adaptive`` (the default of the Spark layer), ``kg``,
        ``sg``, ``pkg``, ``dchoices``, ``wchoices``, ``roundrobin``, ``pdstream``, ``fish``,
        ``flexd``, ``dkg``.
    workers : int
        Number of downstream workers n, 1 <= n <= 2**20.
    seed : int, default 0
        Seed of the key hash (0 <= seed < 2**64); the same seed routes the same stream the same.
    **params
        The strategy's parameters; see its config class in ``skewgroup.STRATEGIES``.

    Examples
    --------
    >>> import skewgroup
    >>> p = skewgroup.partitioner("pkg", 4, seed=1)
    >>> ids = p.route(["a", "b", "a", "a"])
    >>> ids.dtype.name, len(ids), int(p.loads.sum())
    ('int32', 4, 4)
    """
    config = make_config(name, params)
    workers = check_int("workers", workers, 1, MAX_WORKERS)
    seed = check_int("seed", seed, 0, MAX_SEED)
    return Partitioner(config, workers, seed)


class Partitioner:
    """Routes keys to workers with one strategy; one instance is one source of the papers.

    Use :func:`partitioner` to make one. Routing is sequential per tuple, so a stream routed in
    one call or in any chunks gives the same ids.
    """

    def __init__(self, config, workers, seed, _router=None):
        self.config = config
        self.seed = seed
        self._router = _router if _router is not None else config.build(workers, seed)

    @property
    def strategy(self):
        return self.config.name

    @property
    def workers(self):
        return self._router.n

    @property
    def loads(self):
        """Tuples this partitioner has sent to each worker (int64 array, a copy)."""
        return self._router.loads

    def route(self, keys):
        """Worker id (int32, 0 .. workers-1) for every key, updating the routing state.

        ``keys``: a 1-D numpy array, a pyarrow Array/ChunkedArray, or a list of one type;
        nulls (``None``) are one key. An empty input returns an empty array.
        """
        return self.route_hashes(hash_keys(keys, self.seed))

    def route_hashes(self, hashes):
        """Like :meth:`route` for keys already hashed with ``skewgroup.hash_keys(keys, seed)``."""
        hashes = np.asarray(hashes)
        if hashes.dtype.kind not in "iu":
            raise TypeError(f"The 'hashes' parameter must hold 64-bit integer hashes (from "
                            f"skewgroup.hash_keys). Got dtype {hashes.dtype}.")
        hashes = np.ascontiguousarray(hashes).view(np.uint64) if hashes.dtype.itemsize == 8 \
            else np.ascontiguousarray(hashes, dtype=np.uint64)
        if hashes.ndim != 1:
            raise ValueError(f"The 'hashes' parameter must be 1-D. Got shape {hashes.shape}.")
        out = np.empty(hashes.shape[0], dtype=np.int32)
        self._router.route(hashes, out)
        return out

    def stats(self):
        """Sizes of the routing state: keys tracked, head keys, routing-table entries, bytes."""
        stats = {"strategy": self.strategy, "workers": self.workers,
                 "routed": int(self._router.routed)}
        stats.update(self._router.stats() if hasattr(self._router, "stats") else {})
        stats.setdefault("keys_tracked", 0)
        stats.setdefault("head_keys", 0)
        stats.setdefault("table_entries", 0)
        stats["state_bytes"] = int(self._router.state_bytes())
        return stats

    def resize(self, workers):
        """Change the number of workers, where the strategy supports it (FISH's ring).

        FISH adds or removes workers on its consistent-hash ring, so only the keys of the
        moved arcs change candidates. Other strategies raise ``ValueError``: their routing
        state is tied to n; make a new partitioner (routing is soft state, results stay exact).
        """
        workers = check_int("workers", workers, 1, MAX_WORKERS)
        if not self.config.supports_resize:
            raise ValueError(
                f"Strategy {self.strategy!r} cannot resize (only 'fish' can); "
                f"create a new partitioner with workers={workers}."
            )
        if self.config.params().get("capacities") is not None:
            raise ValueError("A FISH partitioner with explicit 'capacities' cannot resize; "
                             "create a new one with one capacity per worker.")
        self._router.resize(workers)

    # --- state ----------------------------------------------------------------------------
    def to_bytes(self):
        """The whole routing state; :meth:`from_bytes` restores a partitioner that continues
        routing exactly as this one would."""
        meta = {"strategy": self.strategy, "workers": self.workers, "seed": self.seed,
                "params": self.config.params()}
        return _serial.pack(meta, self._router.get_state())

    @classmethod
    def from_bytes(cls, data):
        """The partitioner saved by :meth:`to_bytes`.

        ``data`` may come from a checkpoint, i.e. be damaged or crafted: the metadata is
        validated before a router is built (``skewgroup._routing.state_checks``) and the whole state
        by that router (its ``check_state``) before any C code reads it, and
        anything that is not a state this version wrote raises ``ValueError`` naming the field.
        """
        meta, state = _serial.unpack(data)
        config, workers, seed = check_meta(meta)
        # A fresh router, returned only once its state is in: nothing is half loaded.
        try:
            router = config.build(workers, seed)
        except (OverflowError, TypeError) as error:  # a parameter the native router can't hold
            raise ValueError(f"Partitioner state metadata field 'params' is invalid: {error}") \
                from error
        check_state(router, state)
        router.set_state(state)
        return cls(config, workers, seed, _router=router)

    def __reduce__(self):
        return (Partitioner.from_bytes, (self.to_bytes(),))

    def __repr__(self):
        params = ", ".join(f"{k}={v!r}" for k, v in self.config.params().items())
        extra = f", {params}" if params else ""
        return f"partitioner({self.strategy!r}, {self.workers}, seed={self.seed}{extra})"


def state_bound(name, workers, **params):
    """The documented upper bound on a strategy's state bytes for ``workers`` workers.

    Routing state never grows with the number of distinct keys: every per-key table is a
    window, a fixed set of counters, or pruned (see each config's ``state_bound``).
    """
    return make_config(name, params).state_bound(check_int("workers", workers, 1, MAX_WORKERS))
