# A consistent-hash ring with virtual nodes (FISH §5, Fig. 8): every live worker owns `vnodes`
# points; a key's candidates are the first d distinct live workers clockwise from its position,
# so adding or removing a worker only changes the keys of the arcs it gains or loses.
from libc.stdint cimport uint8_t, uint32_t
from skewgroup._routing._types cimport hash_t, worker_t
from skewgroup._routing._hash cimport mix64

# One point of the ring: its position, its worker, and the next distinct worker clockwise from
# it, so a non-hot key's two candidates (FISH §4.2, "assign ... to d or 2 workers") come with the
# position compare in one 16-byte record.
cdef struct RingPoint:
    hash_t position
    worker_t owner
    worker_t second

cdef struct HashRing:
    int vnodes
    hash_t seed
    int id_capacity         # per-worker arrays hold ids 0 .. id_capacity-1
    int live                # live workers
    uint8_t* alive          # [id_capacity] 1 if the worker is on the ring
    long long points        # live * vnodes
    RingPoint* point        # [points + 1] ascending (position, owner), then a sentinel at
                            # position 2^64 - 1 so a lookup may read one past the last point
    int index_bits          # 2^index_bits buckets of the 64-bit ring, >= 2 * points
    uint32_t* index         # [2^index_bits + 1] first point at or after each bucket start
    int* stamp              # [id_capacity] scratch marks for the distinct-worker walk
    int stamp_value

# Live workers 0 .. workers-1.
cdef int ring_init(HashRing* ring, int workers, int vnodes, hash_t seed) except -1
# Live workers = the given ids (distinct, >= 0, at least one).
cdef int ring_init_with(HashRing* ring, object workers, int vnodes, hash_t seed) except -1
cdef void ring_free(HashRing* ring) noexcept nogil
# Put worker w's points on the ring (ValueError if it is already there).
cdef int ring_add_worker(HashRing* ring, worker_t w) except -1
# Take worker w's points off the ring (ValueError if absent or the last one).
cdef int ring_remove_worker(HashRing* ring, worker_t w) except -1
# A key's place on the ring: its hash re-mixed with a salt, so ring positions are independent
# of the choice hashes h_i(k) other strategies derive from the same hash.
cdef inline hash_t ring_key_position(hash_t key) noexcept nogil:
    return mix64(key ^ <hash_t>0xA0761D6478BD642FULL)

# The point a key hash lands on: the first point clockwise at or after the key's position.
# Inline because it is on every cold tuple's path (FISH): the bucket table gives the bucket's
# first point; points of other buckets are all below or above the key, so only this bucket's
# points need comparing. Buckets are >= 2x the points, so most hold at most two: two branch-free
# steps settle those, and the loop (almost never entered) the rest.
cdef inline long long ring_locate(const HashRing* ring, hash_t key) noexcept nogil:
    cdef hash_t position = ring_key_position(key)
    cdef hash_t bucket = position >> (64 - ring.index_bits)
    cdef long long i = ring.index[bucket]
    cdef long long end = ring.index[bucket + 1]
    i += (i < end) & (ring.point[i].position < position)
    i += (i < end) & (ring.point[i].position < position)
    while i < end and ring.point[i].position < position:
        i += 1
    return i if i < ring.points else 0  # past the last point: the first one, clockwise

# The first d distinct live workers clockwise from the key into out, in ring order; returns how
# many were written (min(d, live)).
cdef int ring_candidates(HashRing* ring, hash_t key, int d, worker_t* out) noexcept nogil
# Live worker ids ascending (int32 array): the whole state, since every point's position is a
# pure function of (seed, worker, vnode).
cdef object ring_live_workers(const HashRing* ring)
cdef Py_ssize_t ring_nbytes(const HashRing* ring) noexcept nogil
