# An open-addressing hash map from a key's 64-bit hash to an int64 value.
#
# Every per-key table of the strategies (SpaceSaving's index, Pd-Stream's window counts and
# routing table, FlexD's and DKG's tables) is one of these, so the memory is plain C arrays that
# serialize as they are. Linear probing with backward-shift deletion: no tombstones, so a table
# that sees 10^7 distinct keys through a bounded window stays bounded and fast.
from skewgroup._types cimport hash_t

cdef struct KeyMap:
    hash_t* keys        # EMPTY_KEY marks a free slot
    long long* values
    long long capacity  # a power of two
    long long size

# A real hash equal to EMPTY_KEY is stored as REMAPPED_KEY (a 2^-64 collision, documented).
cdef enum:
    EMPTY_KEY = 0

cdef int keymap_init(KeyMap* m, long long min_capacity) except -1
cdef void keymap_free(KeyMap* m) noexcept nogil
cdef void keymap_clear(KeyMap* m) noexcept nogil
# Value for key, or `missing` if absent.
cdef long long keymap_get(const KeyMap* m, hash_t key, long long missing) noexcept nogil
# Pointer to the value slot of key, inserting it with `initial` if absent; NULL only when the
# table could not grow (out of memory). The pointer is valid until the next insertion.
cdef long long* keymap_upsert(KeyMap* m, hash_t key, long long initial) noexcept nogil
# Remove key; returns 1 if it was present.
cdef int keymap_delete(KeyMap* m, hash_t key) noexcept nogil
# State as (keys, values) numpy arrays of the full capacity, and back; a restored map probes
# identically.
cdef object keymap_get_state(const KeyMap* m)
cdef int keymap_set_state(KeyMap* m, object keys, object values) except -1
