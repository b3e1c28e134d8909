# Key hashing and the per-choice hash functions every strategy derives from one key hash.
from skewgroup._routing._types cimport hash_t, worker_t
from libc.stdint cimport uint32_t, uint64_t

cdef extern from "xxhash_inline.h" nogil:
    uint64_t XXH3_64bits_withSeed(const void* data, size_t length, uint64_t seed)

cdef inline hash_t mix64(hash_t x) noexcept nogil:
    # SplitMix64's finaliser (Stafford variant 13): a bijection with full avalanche.
    x ^= x >> 30
    x *= <hash_t>0xBF58476D1CE4E5B9ULL
    x ^= x >> 27
    x *= <hash_t>0x94D049BB133111EBULL
    x ^= x >> 31
    return x

cdef inline worker_t reduce_range(hash_t x, uint32_t n) noexcept nogil:
    # Lemire's multiply-shift: maps 32 random bits onto [0, n) without the division of "mod n".
    return <worker_t>(((x & 0xFFFFFFFFULL) * <hash_t>n) >> 32)

cdef inline worker_t choice(hash_t h, uint32_t i, uint32_t n) noexcept nogil:
    # h_{i+1}(k) = mix(hash(k), i) reduced to [0, n) by reduce_range (docs/algorithms.md#hashing).
    # Choices 0 and 1 (key grouping's and PKG's two) are the high and low halves of one mix, so
    # PKG pays for one mix per tuple; choice i >= 2 mixes again with its own constant.
    cdef hash_t x
    if i < 2:
        x = mix64(h + <hash_t>0x9E3779B97F4A7C15ULL)
        return reduce_range(x >> 32 if i == 0 else x, n)
    return reduce_range(mix64(h + (i + 1) * <hash_t>0x9E3779B97F4A7C15ULL) >> 32, n)
