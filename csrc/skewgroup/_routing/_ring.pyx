"""Consistent-hash ring with virtual nodes (FISH §5, Fig. 8 (c)-(d)); see _ring.pxd.

Point v of worker w sits at mix64(seed + mix64(w << 20 | v)) and a key at ring_key_position(hash),
so a point never moves while its worker stays on the ring: adding a worker only inserts its
points, removing one only deletes them, and a key changes owner only if one of those points now
lies between it and its old owner (§5, "monotonicity"). The ring of a set of live workers is the
same whichever order they were added or removed in: points are kept in one total order
(position, then worker).

The paper maps keys and workers onto 2^32 buckets (§5, footnote 3); we use the whole 64-bit
space, which only makes point collisions rarer. Lookup: the paper's clockwise search is a binary
search over the sorted points; a table of 2^b >= 2 * points buckets holding the first point of
each bucket narrows it to the bucket's own points (at most two in 90 % of buckets), so a lookup is
O(1) expected and touches two or three cache lines (ring_locate in the .pxd).
"""
from libc.stdlib cimport malloc, calloc, realloc, free, qsort
from libc.string cimport memset

import numpy as np

from skewgroup._routing._validation import bad, check_array

from skewgroup._routing._types cimport hash_t, worker_t
from skewgroup._routing._hash cimport mix64

# Point positions encode the worker in 20 bits above the vnode (MAX_WORKERS = 2^20) and the vnode
# below them; the bucket index is uint32.
cdef enum:
    WORKER_LIMIT = 1 << 20
    VNODE_LIMIT = 1 << 20

cdef long long POINT_LIMIT = 0x7FFFFFFF


cdef int _by_position(const void* a, const void* b) noexcept nogil:
    cdef const RingPoint* x = <const RingPoint*>a
    cdef const RingPoint* y = <const RingPoint*>b
    if x.position != y.position:
        return -1 if x.position < y.position else 1
    return (x.owner > y.owner) - (x.owner < y.owner)


cdef inline bint _before(const RingPoint* a, const RingPoint* b) noexcept nogil:
    return a.position < b.position or (a.position == b.position and a.owner < b.owner)


cdef inline hash_t _point_position(hash_t seed, worker_t w, int v) noexcept nogil:
    return mix64(seed + mix64((<hash_t>w << 20) | <hash_t>v))


cdef int _check_worker(worker_t w) except -1:
    if w < 0 or w >= WORKER_LIMIT:
        raise ValueError(f"The 'worker' parameter must be an int in [0, {WORKER_LIMIT}). Got {w}.")
    return 0


cdef RingPoint* _alloc_points(long long points) except NULL:
    # One extra record for the lookup sentinel.
    cdef RingPoint* point = <RingPoint*>malloc((points + 1) * sizeof(RingPoint))
    if point == NULL:
        raise MemoryError()
    return point


cdef int _reserve_ids(HashRing* ring, int id_capacity) except -1:
    # Grow the per-worker arrays (alive flags, walk stamps) to hold ids 0 .. id_capacity-1.
    cdef uint8_t* alive
    cdef int* stamp
    if id_capacity <= ring.id_capacity:
        return 0
    alive = <uint8_t*>realloc(ring.alive, id_capacity * sizeof(uint8_t))
    if alive == NULL:
        raise MemoryError()
    ring.alive = alive
    stamp = <int*>realloc(ring.stamp, id_capacity * sizeof(int))
    if stamp == NULL:
        raise MemoryError()
    ring.stamp = stamp
    memset(ring.alive + ring.id_capacity, 0, (id_capacity - ring.id_capacity) * sizeof(uint8_t))
    memset(ring.stamp + ring.id_capacity, 0, (id_capacity - ring.id_capacity) * sizeof(int))
    ring.id_capacity = id_capacity
    return 0


cdef int _install(HashRing* ring, RingPoint* point, long long points) except -1:
    # Take ownership of sorted points (position and owner set): derive every point's second
    # distinct worker, the sentinel and the bucket table.
    cdef int bits = 1
    cdef long long buckets, i, j, k, nxt
    cdef uint32_t* index
    while (1LL << bits) < 2 * points and bits < 31:
        bits += 1
    buckets = 1LL << bits
    index = <uint32_t*>malloc((buckets + 1) * sizeof(uint32_t))
    if index == NULL:
        free(point)
        raise MemoryError()
    with nogil:
        # second[i] = owner[i+1] if it differs, else second[i+1]: two backward passes around the
        # ring settle the run that wraps past point 0 (one run of a single owner only if live = 1).
        for i in range(points):
            point[i].second = -1
        for k in range(2 * points - 1, -1, -1):
            i = k % points
            nxt = i + 1 if i + 1 < points else 0
            if point[nxt].owner != point[i].owner:
                point[i].second = point[nxt].owner
            elif point[nxt].second >= 0:
                point[i].second = point[nxt].second
        for i in range(points):
            if point[i].second < 0:  # a single live worker: both choices are it
                point[i].second = point[i].owner
        point[points].position = <hash_t>0xFFFFFFFFFFFFFFFFULL
        point[points].owner = point[0].owner
        point[points].second = point[0].second
        j = 0
        for i in range(buckets):
            while j < points and (point[j].position >> (64 - bits)) < <hash_t>i:
                j += 1
            index[i] = <uint32_t>j
        index[buckets] = <uint32_t>points
    free(ring.point)
    free(ring.index)
    ring.point = point
    ring.points = points
    ring.index = index
    ring.index_bits = bits
    return 0


cdef int ring_init(HashRing* ring, int workers, int vnodes, hash_t seed) except -1:
    if workers < 1:
        raise ValueError(f"The 'workers' parameter must be an int in [1, {WORKER_LIMIT}]. "
                         f"Got {workers}.")
    return ring_init_with(ring, range(workers), vnodes, seed)


cdef int ring_init_with(HashRing* ring, object workers, int vnodes, hash_t seed) except -1:
    # Every pointer is NULL before anything can raise, so ring_free is always safe afterwards.
    ring.point = NULL
    ring.index = NULL
    ring.alive = NULL
    ring.stamp = NULL
    ring.id_capacity = 0
    ring.live = 0
    ring.points = 0
    ring.stamp_value = 0
    ring.index_bits = 1
    cdef long long points, i
    cdef int v, k, live
    cdef RingPoint* point
    if vnodes < 1 or vnodes > VNODE_LIMIT:
        raise ValueError(f"The 'vnodes' parameter must be an int in [1, {VNODE_LIMIT}]. "
                         f"Got {vnodes}.")
    requested = np.asarray(workers, dtype=np.int64).reshape(-1)
    unique = np.unique(requested)
    if unique.size < 1 or unique.size != requested.size:
        raise ValueError(f"The 'workers' parameter must hold at least one distinct worker id. "
                         f"Got {requested.tolist()!r}.")
    lowest, highest = int(unique.min()), int(unique.max())
    if lowest < 0 or highest >= WORKER_LIMIT:
        raise ValueError(f"Worker ids must be ints in [0, {WORKER_LIMIT}). "
                         f"Got {lowest if lowest < 0 else highest}.")
    cdef worker_t[::1] ids = unique.astype(np.int32)
    live = ids.shape[0]
    points = <long long>live * vnodes
    if points > POINT_LIMIT:
        raise ValueError(f"A ring holds at most {POINT_LIMIT} points; {live} workers x {vnodes} "
                         f"virtual nodes is {points}.")
    ring.vnodes = vnodes
    ring.seed = seed
    _reserve_ids(ring, highest + 1)
    point = _alloc_points(points)
    with nogil:
        i = 0
        for k in range(live):
            ring.alive[ids[k]] = 1
            for v in range(vnodes):
                point[i].position = _point_position(seed, ids[k], v)
                point[i].owner = ids[k]
                i += 1
        qsort(point, points, sizeof(RingPoint), _by_position)
    ring.live = live
    return _install(ring, point, points)


cdef void ring_free(HashRing* ring) noexcept nogil:
    free(ring.point)
    free(ring.index)
    free(ring.alive)
    free(ring.stamp)
    ring.point = NULL
    ring.index = NULL
    ring.alive = NULL
    ring.stamp = NULL
    ring.id_capacity = 0
    ring.live = 0
    ring.points = 0


cdef int ring_add_worker(HashRing* ring, worker_t w) except -1:
    # Fig. 8 (c): the new worker's points go in, every other point stays where it is. A merge of
    # its vnodes (sorted) into the ring keeps this O(points).
    cdef long long old_points = ring.points
    cdef long long points = old_points + ring.vnodes
    cdef long long i = 0, j = 0, k = 0
    cdef int v
    cdef RingPoint* mine
    cdef RingPoint* point
    _check_worker(w)
    if w < ring.id_capacity and ring.alive[w]:
        raise ValueError(f"Worker {w} is already on the ring.")
    if points > POINT_LIMIT:
        raise ValueError(f"A ring holds at most {POINT_LIMIT} points; adding worker {w} "
                         f"would make {points}.")
    _reserve_ids(ring, w + 1)
    mine = _alloc_points(ring.vnodes)
    try:
        point = _alloc_points(points)
    except MemoryError:
        free(mine)
        raise
    with nogil:
        for v in range(ring.vnodes):
            mine[v].position = _point_position(ring.seed, w, v)
            mine[v].owner = w
        qsort(mine, ring.vnodes, sizeof(RingPoint), _by_position)
        while k < points:
            if j >= ring.vnodes or (i < old_points and _before(&ring.point[i], &mine[j])):
                point[k] = ring.point[i]
                i += 1
            else:
                point[k] = mine[j]
                j += 1
            k += 1
    free(mine)
    _install(ring, point, points)
    ring.alive[w] = 1
    ring.live += 1
    return 0


cdef int ring_remove_worker(HashRing* ring, worker_t w) except -1:
    # Fig. 8 (b): the worker's points leave; the keys of its arcs fall to the next point clockwise.
    cdef long long points = ring.points - ring.vnodes
    cdef long long i, k = 0
    cdef RingPoint* point
    if w < 0 or w >= ring.id_capacity or not ring.alive[w]:
        raise ValueError(f"Worker {w} is not on the ring.")
    if ring.live == 1:
        raise ValueError(f"Worker {w} is the last one on the ring; a ring needs one worker.")
    point = _alloc_points(points)
    with nogil:
        for i in range(ring.points):
            if ring.point[i].owner != w:
                point[k] = ring.point[i]
                k += 1
    _install(ring, point, points)
    ring.alive[w] = 0
    ring.live -= 1
    return 0


cdef int ring_candidates(HashRing* ring, hash_t key, int d, worker_t* out) noexcept nogil:
    cdef long long i = ring_locate(ring, key)
    cdef int found = 0
    cdef worker_t w
    if d > ring.live:
        d = ring.live
    # A fresh stamp per walk marks the workers already taken without clearing an array.
    ring.stamp_value += 1
    if ring.stamp_value == 0x7FFFFFFF:
        memset(ring.stamp, 0, ring.id_capacity * sizeof(int))
        ring.stamp_value = 1
    while found < d:
        w = ring.point[i].owner
        if ring.stamp[w] != ring.stamp_value:
            ring.stamp[w] = ring.stamp_value
            out[found] = w
            found += 1
        i = i + 1 if i + 1 < ring.points else 0
    return found


cdef object ring_live_workers(const HashRing* ring):
    out = np.empty(ring.live, dtype=np.int32)
    cdef worker_t[::1] o = out
    cdef int w, k = 0
    for w in range(ring.id_capacity):
        if ring.alive[w]:
            o[k] = w
            k += 1
    return out


def check_ring_workers(field, value, int workers):
    """A ring over workers 0 .. n-1 read back from bytes: its state is the live worker ids."""
    live = check_array(field, value, np.int32, (workers,))
    if not np.array_equal(live, np.arange(workers)):
        raise bad(field, f"must list the live workers 0 .. {workers - 1}")


cdef Py_ssize_t ring_nbytes(const HashRing* ring) noexcept nogil:
    return ((ring.points + 1) * sizeof(RingPoint)
            + ((1LL << ring.index_bits) + 1) * sizeof(uint32_t)
            + ring.id_capacity * (sizeof(uint8_t) + sizeof(int)))


cdef class Ring:
    """A Python handle on a HashRing (tests and tools).

    Parameters
    ----------
    workers : int
        Live workers 0 .. workers-1 to start with.
    vnodes : int, default 100
        Points per worker (FISH's default).
    seed : int, default 0
        Places the points.

    Examples
    --------
    >>> ring = Ring(8, 100, seed=1)
    >>> c = ring.candidates(12345, 3)
    >>> len(c), len(set(c.tolist())), bool(c.max() < 8)
    (3, 3, True)
    >>> ring.add_worker(8); ring.remove_worker(0); ring.live_workers.tolist()
    [1, 2, 3, 4, 5, 6, 7, 8]
    """
    cdef HashRing ring

    def __cinit__(self, int workers, int vnodes=100, hash_t seed=0):
        ring_init(&self.ring, workers, vnodes, seed)

    def __dealloc__(self):
        ring_free(&self.ring)

    @property
    def workers(self):
        """Number of live workers."""
        return self.ring.live

    @property
    def live_workers(self):
        return ring_live_workers(&self.ring)

    @property
    def points(self):
        return self.ring.points

    def add_worker(self, worker_t worker):
        ring_add_worker(&self.ring, worker)

    def remove_worker(self, worker_t worker):
        ring_remove_worker(&self.ring, worker)

    def candidates(self, hash_t key, int d):
        """The first ``d`` distinct live workers clockwise from ``key`` (ring order)."""
        if d < 1:
            raise ValueError(f"The 'd' parameter must be an int in [1, inf). Got {d}.")
        out = np.empty(min(d, self.ring.live), dtype=np.int32)
        cdef worker_t[::1] o = out
        ring_candidates(&self.ring, key, d, &o[0])
        return out

    def candidates_many(self, const hash_t[::1] keys, int d):
        """``candidates`` of every key as an (m, min(d, live)) int32 array."""
        if d < 1:
            raise ValueError(f"The 'd' parameter must be an int in [1, inf). Got {d}.")
        d = min(d, self.ring.live)
        out = np.empty((keys.shape[0], d), dtype=np.int32)
        cdef worker_t[:, ::1] o = out
        cdef Py_ssize_t i
        with nogil:
            for i in range(keys.shape[0]):
                ring_candidates(&self.ring, keys[i], d, &o[i, 0])
        return out

    def first_candidates(self, const hash_t[::1] keys):
        """The owner (first candidate) of every key."""
        out = np.empty(keys.shape[0], dtype=np.int32)
        cdef worker_t[::1] o = out
        cdef Py_ssize_t i
        with nogil:
            for i in range(keys.shape[0]):
                o[i] = self.ring.point[ring_locate(&self.ring, keys[i])].owner
        return out

    def pairs(self, const hash_t[::1] keys):
        """The two candidates a non-hot key gets (owner, next distinct worker), (m, 2) int32."""
        out = np.empty((keys.shape[0], 2), dtype=np.int32)
        cdef worker_t[:, ::1] o = out
        cdef Py_ssize_t i
        cdef long long p
        with nogil:
            for i in range(keys.shape[0]):
                p = ring_locate(&self.ring, keys[i])
                o[i, 0] = self.ring.point[p].owner
                o[i, 1] = self.ring.point[p].second
        return out

    def get_state(self):
        return {"vnodes": self.ring.vnodes, "seed": self.ring.seed,
                "workers": ring_live_workers(&self.ring)}

    def set_state(self, state):
        cdef HashRing fresh
        try:
            ring_init_with(&fresh, state["workers"], int(state["vnodes"]),
                           <hash_t>int(state["seed"]))
        except BaseException:
            ring_free(&fresh)
            raise
        ring_free(&self.ring)
        self.ring = fresh

    def nbytes(self):
        return ring_nbytes(&self.ring)
