"""Seeded 64-bit key hashing over whole arrays (XXH3, vendored).

Every key type is hashed from its canonical bytes, so the same key value hashes the same whichever
container it arrives in:

* integers of any width (and bool, date, time, timestamp, duration as their integer value) hash
  the 8 little-endian bytes of their int64 value; uint64 values above 2**63 hash their bit
  pattern, so uint64 ``2**64 - 1`` and int64 ``-1`` collide (one column has one type);
* floats are widened to float64, ``-0.0`` is hashed as ``0.0`` and every NaN as one NaN (Spark
  groups them that way);
* strings and binaries hash their UTF-8 / raw bytes straight from the Arrow buffers;
* nulls hash to ``null_hash(seed) = mix64(seed ^ 0x6E756C6C6B6579)`` ("nullkey"), one group as in
  Spark's groupBy.
"""
from libc.stdint cimport uint8_t, int32_t, int64_t, uint64_t
from libc.string cimport memcpy

from skewgroup._routing._types cimport hash_t
from skewgroup._routing._hash cimport mix64, choice, XXH3_64bits_withSeed

NULL_TAG = 0x6E756C6C6B6579


cpdef hash_t null_hash(hash_t seed) noexcept nogil:
    """The fixed hash every null key gets for a given seed."""
    return mix64(seed ^ <hash_t>0x6E756C6C6B6579ULL)


cdef inline bint _is_valid(const uint8_t* validity, Py_ssize_t i) noexcept nogil:
    return validity == NULL or ((validity[i >> 3] >> (i & 7)) & 1)


def hash_int64(const int64_t[::1] values, hash_t seed, hash_t[::1] out,
               const uint8_t[::1] validity=None, Py_ssize_t bit_offset=0):
    """Hash int64 values (any integer key widened to int64) into ``out``."""
    cdef Py_ssize_t i, m = values.shape[0]
    cdef const uint8_t* valid = &validity[0] if validity is not None and validity.shape[0] else NULL
    cdef hash_t nul = null_hash(seed)
    with nogil:
        for i in range(m):
            if _is_valid(valid, i + bit_offset):
                out[i] = XXH3_64bits_withSeed(&values[i], 8, seed)
            else:
                out[i] = nul


def hash_float64(const double[::1] values, hash_t seed, hash_t[::1] out,
                 const uint8_t[::1] validity=None, Py_ssize_t bit_offset=0):
    """Hash float64 values with -0.0 == 0.0 and a single NaN."""
    cdef Py_ssize_t i, m = values.shape[0]
    cdef const uint8_t* valid = &validity[0] if validity is not None and validity.shape[0] else NULL
    cdef hash_t nul = null_hash(seed)
    cdef double v
    cdef uint64_t canonical_nan = 0x7FF8000000000000ULL
    with nogil:
        for i in range(m):
            if not _is_valid(valid, i + bit_offset):
                out[i] = nul
                continue
            v = values[i]
            if v != v:
                out[i] = XXH3_64bits_withSeed(&canonical_nan, 8, seed)
            else:
                if v == 0.0:
                    v = 0.0  # folds -0.0 onto +0.0
                out[i] = XXH3_64bits_withSeed(&v, 8, seed)


ctypedef fused offset_t:
    int32_t     # string / binary
    int64_t     # large_string / large_binary


def hash_binary(const offset_t[::1] offsets, const uint8_t[::1] data, hash_t seed,
                hash_t[::1] out, const uint8_t[::1] validity=None, Py_ssize_t bit_offset=0):
    """Hash Arrow string/binary values (``len(out) + 1`` offsets, int32 or int64 for the large
    types)."""
    cdef Py_ssize_t i, m = out.shape[0]
    cdef const uint8_t* valid = &validity[0] if validity is not None and validity.shape[0] else NULL
    cdef const uint8_t* base = &data[0] if data.shape[0] else <const uint8_t*>""
    cdef hash_t nul = null_hash(seed)
    with nogil:
        for i in range(m):
            if _is_valid(valid, i + bit_offset):
                out[i] = XXH3_64bits_withSeed(base + offsets[i], offsets[i + 1] - offsets[i], seed)
            else:
                out[i] = nul


def fill_null(hash_t seed, hash_t[::1] out):
    """Every key null (an Arrow null-typed column)."""
    cdef Py_ssize_t i
    cdef hash_t nul = null_hash(seed)
    with nogil:
        for i in range(out.shape[0]):
            out[i] = nul


def take(const hash_t[::1] table, const int64_t[::1] indices, hash_t seed, hash_t[::1] out,
         const uint8_t[::1] validity=None, Py_ssize_t bit_offset=0):
    """out[i] = table[indices[i]]: hashes of a dictionary-encoded column, dictionary hashed once."""
    cdef Py_ssize_t i, m = out.shape[0]
    cdef const uint8_t* valid = &validity[0] if validity is not None and validity.shape[0] else NULL
    cdef hash_t nul = null_hash(seed)
    with nogil:
        for i in range(m):
            out[i] = table[indices[i]] if _is_valid(valid, i + bit_offset) else nul


def combine(hash_t[::1] acc, const hash_t[::1] other):
    """acc[i] = hash of the pair (acc[i], other[i]), for keys of several columns (order matters)."""
    cdef Py_ssize_t i
    with nogil:
        for i in range(acc.shape[0]):
            acc[i] = mix64(acc[i] * <hash_t>0x9E3779B97F4A7C15ULL + other[i])


def choices(const hash_t[::1] hashes, unsigned int i, unsigned int n):
    """h_{i+1}(k) for every hash, as int32: the strategies' i-th hash function (for tests)."""
    import numpy as np
    out = np.empty(hashes.shape[0], dtype=np.int32)
    cdef int32_t[::1] o = out
    cdef Py_ssize_t j
    with nogil:
        for j in range(hashes.shape[0]):
            o[j] = choice(hashes[j], i, n)
    return out
