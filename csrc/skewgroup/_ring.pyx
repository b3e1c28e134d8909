"""Consistent-hash ring with virtual nodes (FISH §5, Fig. 8 (d)).

Point (w, v) sits at mix64(seed + mix64(w << 20 | v)); a key sits at mix64(hash ^ RING_SALT),
so ring positions are independent of the strategies' choice hashes. Lookups are O(1) on average:
a table of 2^b buckets (b = ceil(log2 points) + 1) gives the first point of each bucket, then a
short scan. Rebuilding for a new worker count keeps every other worker's points where they are,
which is what makes only the moved arcs' keys change owner.
"""
from libc.stdlib cimport malloc, calloc, free, qsort

import numpy as np

from skewgroup._types cimport hash_t, worker_t
from skewgroup._hash cimport mix64

cdef hash_t RING_SALT = 0xA0761D6478BD642FULL


cdef struct _Point:
    hash_t position
    worker_t owner


cdef int _by_position(const void* a, const void* b) noexcept nogil:
    cdef const _Point* x = <const _Point*>a
    cdef const _Point* y = <const _Point*>b
    if x.position != y.position:
        return -1 if x.position < y.position else 1
    return x.owner - y.owner


cdef inline hash_t _key_position(hash_t key) noexcept nogil:
    return mix64(key ^ RING_SALT)


cdef int ring_init(HashRing* ring, int workers, int vnodes, hash_t seed) except -1:
    cdef long long points = <long long>workers * vnodes
    cdef long long i, j, buckets
    cdef int w, v, bits = 1
    cdef _Point* sorted_points
    if workers < 1 or vnodes < 1:
        raise ValueError(f"a ring needs workers >= 1 and vnodes >= 1, got {workers}, {vnodes}")
    while (1LL << bits) < 2 * points and bits < 30:
        bits += 1
    buckets = 1LL << bits
    ring.workers = workers
    ring.vnodes = vnodes
    ring.seed = seed
    ring.points = points
    ring.index_bits = bits
    ring.position = <hash_t*>malloc(points * sizeof(hash_t))
    ring.owner = <worker_t*>malloc(points * sizeof(worker_t))
    ring.second = <worker_t*>malloc(points * sizeof(worker_t))
    ring.index = <long long*>malloc((buckets + 1) * sizeof(long long))
    ring.stamp = <int*>calloc(workers, sizeof(int))
    ring.stamp_value = 0
    sorted_points = <_Point*>malloc(points * sizeof(_Point))
    if (ring.position == NULL or ring.owner == NULL or ring.second == NULL or ring.index == NULL
            or ring.stamp == NULL or sorted_points == NULL):
        free(sorted_points)
        ring_free(ring)
        raise MemoryError()
    with nogil:
        i = 0
        for w in range(workers):
            for v in range(vnodes):
                sorted_points[i].position = mix64(seed + mix64((<hash_t>w << 20) | <hash_t>v))
                sorted_points[i].owner = w
                i += 1
        qsort(sorted_points, points, sizeof(_Point), _by_position)
        for i in range(points):
            ring.position[i] = sorted_points[i].position
            ring.owner[i] = sorted_points[i].owner
        # Bucket table: index[b] = first point whose top `bits` bits are >= b.
        j = 0
        for i in range(buckets):
            while j < points and (ring.position[j] >> (64 - bits)) < <hash_t>i:
                j += 1
            ring.index[i] = j
        ring.index[buckets] = points
        # The second distinct worker clockwise from every point (non-hot keys' 2 candidates).
        for i in range(points):
            ring.second[i] = ring.owner[i]
            j = i
            if workers > 1:
                while True:
                    j = j + 1 if j + 1 < points else 0
                    if ring.owner[j] != ring.owner[i]:
                        ring.second[i] = ring.owner[j]
                        break
    free(sorted_points)
    return 0


cdef void ring_free(HashRing* ring) noexcept nogil:
    free(ring.position); free(ring.owner); free(ring.second); free(ring.index); free(ring.stamp)
    ring.position = NULL; ring.owner = NULL; ring.second = NULL; ring.index = NULL
    ring.stamp = NULL


cdef long long ring_locate(const HashRing* ring, hash_t key) noexcept nogil:
    cdef hash_t position = _key_position(key)
    cdef long long i = ring.index[position >> (64 - ring.index_bits)]
    while i < ring.points and ring.position[i] < position:
        i += 1
    return i if i < ring.points else 0


cdef int ring_candidates(HashRing* ring, hash_t key, int d, worker_t* out) noexcept nogil:
    cdef long long start = ring_locate(ring, key)
    cdef long long i = start
    cdef int found = 0
    cdef worker_t w
    if d > ring.workers:
        d = ring.workers
    ring.stamp_value += 1
    if ring.stamp_value == 0x7FFFFFFF:  # wrap: clear the marks once in 2^31 walks
        for w in range(ring.workers):
            ring.stamp[w] = 0
        ring.stamp_value = 1
    while found < d:
        w = ring.owner[i]
        if ring.stamp[w] != ring.stamp_value:
            ring.stamp[w] = ring.stamp_value
            out[found] = w
            found += 1
        i = i + 1 if i + 1 < ring.points else 0
    return found


cdef class Ring:
    """A Python handle on a HashRing (tests and tools).

    >>> ring = Ring(8, 100, seed=1)
    >>> c = ring.candidates(12345, 3)
    >>> len(c), len(set(c.tolist())), bool(c.max() < 8)
    (3, 3, True)
    """
    cdef HashRing ring

    def __cinit__(self, int workers, int vnodes=100, hash_t seed=0):
        self.ring.position = NULL
        ring_init(&self.ring, workers, vnodes, seed)

    def __dealloc__(self):
        ring_free(&self.ring)

    @property
    def workers(self):
        return self.ring.workers

    def candidates(self, hash_t key, int d):
        out = np.empty(max(1, d), dtype=np.int32)
        cdef worker_t[::1] o = out
        cdef int got = ring_candidates(&self.ring, key, d, &o[0])
        return out[:got]

    def first_candidates(self, const hash_t[::1] keys):
        """The owner (first candidate) of every key."""
        out = np.empty(keys.shape[0], dtype=np.int32)
        cdef worker_t[::1] o = out
        cdef Py_ssize_t i
        with nogil:
            for i in range(keys.shape[0]):
                o[i] = self.ring.owner[ring_locate(&self.ring, keys[i])]
        return out
