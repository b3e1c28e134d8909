"""Base class of all strategies: the batch entry point, loads and state plumbing."""
import numpy as np

from skewgroup._types cimport hash_t, count_t, worker_t


cdef class Router:
    """A native router for ``n`` workers (one source's state).

    Subclasses implement ``route_many``; ``get_state``/``set_state`` return and take a dict of
    numpy arrays and ints that restores the router exactly (see skewgroup._serial).
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

    def state_bytes(self):
        """Bytes of native state held (loads plus subclass tables)."""
        return self._load_array.nbytes
