"""The baselines and PKG: key grouping, shuffle grouping, partial key grouping."""
from skewgroup._routing._types cimport hash_t, count_t, worker_t
from skewgroup._routing._hash cimport choice
from skewgroup._routing._router cimport Router, least_of_two

from skewgroup._routing._validation import check_field_int


cdef class KeyGrouping(Router):
    """KG: worker = h_1(k); all tuples of a key on one worker (Spark's own groupBy)."""

    cdef void route_many(self, const hash_t* hashes, worker_t* out, Py_ssize_t m) noexcept nogil:
        cdef Py_ssize_t i
        cdef worker_t w
        cdef count_t* load = self.load
        cdef unsigned int n = self.n
        for i in range(m):
            w = choice(hashes[i], 0, n)
            load[w] += 1
            out[i] = w


cdef class ShuffleGrouping(Router):
    """SG: round robin over the workers, per source, regardless of the key."""
    cdef long long next_worker

    def __init__(self, int n, unsigned long long seed=0):
        Router.__init__(self, n, seed)
        self.next_worker = 0

    cdef void route_many(self, const hash_t* hashes, worker_t* out, Py_ssize_t m) noexcept nogil:
        cdef Py_ssize_t i
        cdef worker_t w = <worker_t>self.next_worker
        for i in range(m):
            self.load[w] += 1
            out[i] = w
            w += 1
            if w == self.n:
                w = 0
        self.next_worker = w

    def get_state(self):
        state = Router.get_state(self)
        state["next_worker"] = self.next_worker
        return state

    def set_state(self, state):
        Router.set_state(self, state)
        self.next_worker = int(state["next_worker"])

    def check_state(self, state):
        self.check_base(state, ("next_worker",))
        check_field_int("next_worker", state["next_worker"], 0, self.n - 1)


cdef class PartialKeyGrouping(Router):
    """PKG (d-choices-w-choices §II): the less loaded of h_1(k), h_2(k) by local load."""

    cdef void route_many(self, const hash_t* hashes, worker_t* out, Py_ssize_t m) noexcept nogil:
        cdef Py_ssize_t i
        cdef worker_t w
        cdef hash_t h
        cdef count_t* load = self.load
        cdef unsigned int n = self.n
        for i in range(m):
            h = hashes[i]
            w = least_of_two(load, choice(h, 0, n), choice(h, 1, n))
            load[w] += 1
            out[i] = w
