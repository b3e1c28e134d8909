# Domain types, named once for every compiled module (as preshed's typedefs).
from libc.stdint cimport uint64_t, int64_t, int32_t, uint32_t, uint8_t

ctypedef uint64_t hash_t     # a key's 64-bit seeded hash; routing never needs the key again
ctypedef int64_t count_t     # tuple counts and loads
ctypedef int32_t worker_t    # a downstream worker id, 0 .. n-1
