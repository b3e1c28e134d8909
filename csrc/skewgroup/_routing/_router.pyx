"""Base class of all strategies: the batch entry point, loads and state plumbing.

Each router checks a state read back from bytes (``check_state``, untrusted: a checkpoint)
against its own parameters before ``set_state`` lets C code read it, and documents the bound
on its state bytes (``state_bound``, a function of its parameters beside its class, so the
config answers it without building a router).
"""
cimport cython

import numpy as np

from skewgroup._routing._validation import (MAX_CLOCK, bad, check_array, check_field_int,
                                            check_fields, check_values)

from skewgroup._routing._types cimport hash_t, count_t, worker_t

MAX_WORKERS = 1 << 20   # workers of a partitioner (the (load, worker) packing's 21 bits)
MAX_SEED = (1 << 64) - 1   # a seed of the key hash: any uint64
# The (load, worker) packing of _router.pxd is exact while a load is below 2**43.
MAX_LOAD = 1 << 43
LOAD_VECTOR_BYTES = 8   # one int64 load per worker
BASE_FIELDS = ("load", "routed")


def router_state_bound(int n):
    """Loads and the tuple count: the state of KG, SG and PKG, 8n + 64 bytes."""
    return LOAD_VECTOR_BYTES * n + 64


@cython.wraparound(True)
@cython.boundscheck(True)
def check_loads(state, int workers, bint resizable=False):
    """The load vector every router keeps, and the tuple count: (loads, routed)."""
    loads = check_array("load", state["load"], np.int64, (workers,))
    check_values("load", loads, 0, MAX_LOAD - 1, "loads")
    routed = check_field_int("routed", state["routed"], 0, MAX_CLOCK)
    # Each routed tuple added one to one load; a resize (FISH) forgets the removed workers'.
    total = int(loads.sum())
    if total > routed or (total != routed and not resizable):
        raise bad("load", f"sums to {total}, but {routed} tuples were routed")
    return loads, routed


cdef class Router:
    """A native router for ``n`` workers (one source's state).

    Subclasses implement ``route_many``; ``get_state``/``set_state`` return and take a dict of
    numpy arrays and ints that restores the router exactly (see skewgroup._routing._serial).
    """

    def __init__(self, int n, unsigned long long seed=0):
        self.n = n
        self.seed = seed
        self.routed = 0
        self._allocate_loads(n)

    cdef void _allocate_loads(self, int n):
        self._load_array = np.zeros(n, dtype=np.int64)
        cdef count_t[::1] view = self._load_array
        self.load = &view[0]
        self.n = n
        cursor_reset(&self.cursor, self.load, n)

    cdef void route_many(self, const hash_t* hashes, worker_t* out, Py_ssize_t m) noexcept nogil:
        pass

    def route(self, const hash_t[::1] hashes, worker_t[::1] out):
        """Route ``hashes`` into ``out`` (same length), updating the state tuple by tuple."""
        cdef Py_ssize_t m = hashes.shape[0]
        if out.shape[0] != m:
            raise ValueError(f"out has {out.shape[0]} slots for {m} hashes")
        if m == 0:
            return
        with nogil:
            self.route_many(&hashes[0], &out[0], m)
            self.routed += m

    @property
    def loads(self):
        """Tuples this router has sent to each worker (a copy)."""
        return self._load_array.copy()

    def get_state(self):
        return {"load": self._load_array.copy(), "routed": self.routed}

    def set_state(self, state):
        loads = np.ascontiguousarray(state["load"], dtype=np.int64)
        if loads.shape != (self.n,):
            raise ValueError(f"state holds loads for {loads.shape[0]} workers, router has {self.n}")
        self._load_array[:] = loads
        self.routed = int(state["routed"])
        cursor_reset(&self.cursor, self.load, self.n)

    def check_state(self, state):
        """Raise ValueError naming the field unless ``state`` is a whole, consistent state of
        this router (its fields, dtypes, shapes and every invariant its C code relies on)."""
        self.check_base(state, ())

    def check_base(self, state, fields, bint resizable=False):
        """The fields ``BASE_FIELDS + fields`` exactly, and the loads: returns ``routed``."""
        check_fields("", state, BASE_FIELDS + tuple(fields))
        return check_loads(state, self.n, resizable)[1]

    def state_bound(self):
        """Upper bound on this router's state bytes, whatever the number of distinct keys."""
        return router_state_bound(self.n)

    def state_bytes(self):
        """Bytes of native state held (loads plus subclass tables)."""
        return self._load_array.nbytes
