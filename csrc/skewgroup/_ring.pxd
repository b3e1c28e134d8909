# A consistent-hash ring with virtual nodes (FISH §5): each live worker owns `vnodes` points;
# a key's candidates are the first d distinct workers clockwise from its position, so adding
# or removing a worker only changes the keys of the arcs it gains or loses.
from skewgroup._types cimport hash_t, worker_t

cdef struct HashRing:
    int workers             # live workers are 0 .. workers-1
    int vnodes
    hash_t seed
    long long points        # workers * vnodes
    hash_t* position        # [points] sorted ring positions
    worker_t* owner         # [points] worker of each point
    worker_t* second        # [points] the next distinct worker clockwise (PKG-like 2 choices)
    int index_bits
    long long* index        # [2^index_bits] first point at or after each bucket start
    int* stamp              # [workers] scratch marks for the distinct-worker walk
    int stamp_value

cdef int ring_init(HashRing* ring, int workers, int vnodes, hash_t seed) except -1
cdef void ring_free(HashRing* ring) noexcept nogil
# The point a key hash lands on (first point clockwise at or after its ring position).
cdef long long ring_locate(const HashRing* ring, hash_t key) noexcept nogil
# The first d distinct workers clockwise from the key into out; returns how many (<= workers).
cdef int ring_candidates(HashRing* ring, hash_t key, int d, worker_t* out) noexcept nogil
