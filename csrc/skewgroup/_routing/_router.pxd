# The one router interface every strategy implements, and the load vector it keeps.
#
# A Router is one *source* of the papers: it sees its own tuples only and keeps its own local
# load vector (tuples it has sent to each worker). Subclasses override `route_many`, a whole-array
# nogil loop; Python never touches a tuple.
from skewgroup._routing._types cimport hash_t, count_t, worker_t

# Argmin of the load vector with ties to the lowest id, O(1) amortised while loads only grow:
# every id below `pos` is known to be above `min_load`, so the scan resumes at `pos`; a full
# rescan happens once per rise of the minimum, i.e. once per n tuples in a balanced run.
cdef struct MinCursor:
    count_t min_load
    int pos

# The tuple-count clock of every periodic step (an epoch's decay, a window's end, a promotion or
# prune cycle): it ticks before tuples period, 2 period, ..., never before tuple 0, so one call
# or any chunks of the same tuples tick alike. The first tick at or after tuple t; a step that
# is due "before tuple t" has next_tick(t, period) == t.
cdef inline long long next_tick(long long t, long long period) noexcept nogil:
    cdef long long at = ((t + period - 1) // period) * period
    return at if at > 0 else period


cdef class Router:
    cdef readonly int n            # workers
    cdef readonly unsigned long long seed
    cdef count_t* load             # [n], local loads (view of _load_array)
    cdef object _load_array
    cdef readonly long long routed  # tuples routed so far (drives tuple-count clocks)
    cdef MinCursor cursor

    cdef void route_many(self, const hash_t* hashes, worker_t* out, Py_ssize_t m) noexcept nogil
    cdef void _allocate_loads(self, int n)


cdef inline void cursor_reset(MinCursor* c, const count_t* load, int n) noexcept nogil:
    cdef int w
    c.min_load = load[0]
    for w in range(1, n):
        if load[w] < c.min_load:
            c.min_load = load[w]
    c.pos = 0

cdef inline worker_t least_loaded_all(MinCursor* c, const count_t* load, int n) noexcept nogil:
    while True:
        while c.pos < n:
            if load[c.pos] == c.min_load:
                return c.pos
            c.pos += 1
        cursor_reset(c, load, n)

cdef inline worker_t least_of_two(const count_t* load, worker_t a, worker_t b) noexcept nogil:
    # Branch-free: the two choices are a coin flip for the branch predictor. Written as a mask,
    # not `b if take_b else a`: GCC -O3 compiled that conditional into two branches, which
    # mispredicted on about half the tuples and cost PKG ~2/3 of its time.
    cdef count_t la = load[a]
    cdef count_t lb = load[b]
    cdef worker_t take_b = -<worker_t>((lb < la) | ((lb == la) & (b < a)))
    return a ^ ((a ^ b) & take_b)

# A (load, worker) pair packed into one unsigned integer whose order is "less loaded, then
# lower id": the minimum over candidates is then a branch-free min reduction. Exact while
# workers < 2**20 (MAX_WORKERS) and a source's per-worker load < 2**43 (8.8e12 tuples).
cdef enum:
    WORKER_BITS = 21

cdef inline unsigned long long _packed(const count_t* load, worker_t w) noexcept nogil:
    return ((<unsigned long long>load[w]) << WORKER_BITS) | <unsigned long long>w

cdef inline unsigned long long _umin(unsigned long long a, unsigned long long b) noexcept nogil:
    return a if a < b else b

cdef inline worker_t least_of(const count_t* load, const worker_t* candidates, int d) noexcept nogil:
    # Four independent accumulators break the dependency chain of the reduction.
    cdef unsigned long long b0 = _packed(load, candidates[0])
    cdef unsigned long long b1 = b0, b2 = b0, b3 = b0
    cdef int i = 1
    while i + 4 <= d:
        b0 = _umin(b0, _packed(load, candidates[i]))
        b1 = _umin(b1, _packed(load, candidates[i + 1]))
        b2 = _umin(b2, _packed(load, candidates[i + 2]))
        b3 = _umin(b3, _packed(load, candidates[i + 3]))
        i += 4
    while i < d:
        b0 = _umin(b0, _packed(load, candidates[i]))
        i += 1
    return <worker_t>(_umin(_umin(b0, b1), _umin(b2, b3)) & ((1ULL << WORKER_BITS) - 1))
