# An open-addressing hash map from a key's 64-bit hash to an int64 value.
#
# Every per-key table of the strategies (SpaceSaving's index, Pd-Stream's window counts and
# routing table, FlexD's and DKG's tables) is one of these, so the memory is plain C arrays that
# serialize as they are. Linear probing with backward-shift deletion: no tombstones, so a table
# that sees 10^7 distinct keys through a bounded window stays bounded and fast.
from skewgroup._routing._types cimport hash_t

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
# Double the capacity (rehash); 0 on success, -1 when out of memory.
cdef int keymap_grow(KeyMap* m) noexcept nogil


# The per-tuple operations are inline here, so every strategy module compiles them into its own
# loops instead of calling across modules.

cdef inline hash_t _stored(hash_t key) noexcept nogil:
    # A hash that happens to equal EMPTY_KEY is stored under the golden-ratio constant instead.
    return key if key != EMPTY_KEY else <hash_t>0x9E3779B97F4A7C15ULL


cdef inline long long _home(hash_t key, long long mask) noexcept nogil:
    # Keys are already well-mixed 64-bit hashes; a multiply spreads them once more.
    return <long long>((key * <hash_t>0x9E3779B97F4A7C15ULL) >> 20) & mask


# Slot of key, or the free slot that ends its probe run when key is absent (then
# keys[slot] == EMPTY_KEY and keymap_put_at(m, slot, ...) inserts it there).
cdef inline long long keymap_slot(const KeyMap* m, hash_t key) noexcept nogil:
    cdef hash_t k = _stored(key)
    cdef long long mask = m.capacity - 1
    cdef long long i = _home(k, mask)
    while m.keys[i] != k and m.keys[i] != EMPTY_KEY:
        i = (i + 1) & mask
    return i


# Value for key, or `missing` if absent.
cdef inline long long keymap_get(const KeyMap* m, hash_t key, long long missing) noexcept nogil:
    cdef long long i = keymap_slot(m, key)
    return m.values[i] if m.keys[i] != EMPTY_KEY else missing


# Insert key at the free slot keymap_slot found for it; the caller guarantees the map has not
# changed since and that it stays below full.
cdef inline void keymap_put_at(KeyMap* m, long long slot, hash_t key,
                               long long value) noexcept nogil:
    m.keys[slot] = _stored(key)
    m.values[slot] = value
    m.size += 1


# Pointer to the value slot of key, inserting it with `initial` if absent; NULL only when the
# table could not grow (out of memory). The pointer is valid until the next insertion.
cdef inline long long* keymap_upsert(KeyMap* m, hash_t key, long long initial) noexcept nogil:
    cdef hash_t k = _stored(key)
    cdef long long mask
    cdef long long i
    # Load factor <= 1/2 keeps linear probing short.
    if (m.size + 1) * 2 > m.capacity:
        if keymap_grow(m) != 0:
            return NULL
    mask = m.capacity - 1
    i = _home(k, mask)
    while True:
        if m.keys[i] == k:
            return &m.values[i]
        if m.keys[i] == EMPTY_KEY:
            m.keys[i] = k
            m.values[i] = initial
            m.size += 1
            return &m.values[i]
        i = (i + 1) & mask


# Remove key; returns 1 if it was present.
cdef inline int keymap_delete(KeyMap* m, hash_t key) noexcept nogil:
    cdef hash_t k = _stored(key)
    cdef long long mask = m.capacity - 1
    cdef long long i = _home(k, mask)
    cdef long long j, home
    while True:
        if m.keys[i] == EMPTY_KEY:
            return 0
        if m.keys[i] == k:
            break
        i = (i + 1) & mask
    # Backward-shift deletion (Knuth 6.4, Algorithm R): pull later members of the probe run
    # into the hole so lookups never need tombstones.
    j = i
    while True:
        j = (j + 1) & mask
        if m.keys[j] == EMPTY_KEY:
            break
        home = _home(m.keys[j], mask)
        # Move j into the hole i unless its home lies cyclically in (i, j].
        if (j > i and (home <= i or home > j)) or (j < i and (home <= i and home > j)):
            m.keys[i] = m.keys[j]
            m.values[i] = m.values[j]
            i = j
    m.keys[i] = EMPTY_KEY
    m.size -= 1
    return 1

# State as (keys, values) numpy arrays of the full capacity, and back; a restored map probes
# identically.
cdef object keymap_get_state(const KeyMap* m)
cdef int keymap_set_state(KeyMap* m, object keys, object values) except -1
