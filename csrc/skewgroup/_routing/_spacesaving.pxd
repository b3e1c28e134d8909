# SpaceSaving (Metwally, Agrawal, El Abbadi 2005) with the stream-summary structure: O(1) per
# unit update, k counters, every estimate within count_true <= estimate <= count_true + m/k.
#
# This .pxd is the contract the strategies cimport (D-Choices/W-Choices/RR head detection, FISH's
# decayed top-K_max counters, FlexD's per-segment frequencies). The struct's fields past `total`
# are the implementation's own.
from skewgroup._routing._types cimport hash_t, count_t
from skewgroup._routing._keymap cimport KeyMap

# A counter's place in the stream-summary, kept together: an update reads all three at once.
cdef struct CounterLink:
    int bucket          # bucket id of the counter
    int prev            # the counters of a bucket form a doubly linked list; -1 ends it
    int next

cdef struct StreamSummary:
    int capacity        # k counters
    int size            # counters in use
    count_t total       # m: updates seen (scaled by decay like the counters)
    # --- implementation-defined below ---
    hash_t* keys        # [capacity] key of counter c
    count_t* counts     # [capacity] estimated count of counter c
    count_t* errors     # [capacity] over-estimation bound of counter c
    CounterLink* link   # [capacity] bucket of counter c and its neighbours there
    count_t* bucket_value   # [capacity] count shared by a bucket's counters
    int* bucket_head    # [capacity] first counter of bucket b
    int* bucket_next    # [capacity] next bucket (larger value), -1 at the end
    int* bucket_prev    # [capacity] previous bucket (smaller value), -1 at the start
    int min_bucket      # bucket with the smallest value, -1 when empty
    int free_bucket     # head of the free list of bucket ids, linked through bucket_next
    KeyMap index        # key -> counter

cdef int ss_init(StreamSummary* s, int capacity) except -1
cdef void ss_free(StreamSummary* s) noexcept nogil
cdef void ss_clear(StreamSummary* s) noexcept nogil
# +1 for key (ReplaceMin when full: the new key takes the min counter, count = min + 1,
# error = min). Returns the key's new estimated count. O(1).
cdef count_t ss_update(StreamSummary* s, hash_t key) noexcept nogil
# ss_update of keys[0 .. m) in order behind a doorkeeper of door_size hashes (0: none): once
# full, a key that is not monitored is counted only the second time in a row its door slot sees
# it. counts_out[i] = keys[i]'s estimate after its update (0 when the door turned it away).
cdef void ss_update_admit_many(StreamSummary* s, const hash_t* keys, Py_ssize_t m,
                               hash_t* door, long long door_size,
                               count_t* counts_out) noexcept nogil
# Estimated count of key, 0 if it is not monitored.
cdef count_t ss_estimate(const StreamSummary* s, hash_t key) noexcept nogil
# Smallest monitored count (0 while not full).
cdef count_t ss_min_count(const StreamSummary* s) noexcept nogil
# The k largest counters, by count descending then hash ascending; returns how many written.
cdef int ss_top(const StreamSummary* s, int k, hash_t* keys, count_t* counts) noexcept nogil
# Multiply every counter, error and the total by factor (0 < factor <= 1), rounding to nearest
# (FISH §4 epoch decay). O(k log k).
cdef int ss_decay(StreamSummary* s, double factor) except -1
# out = the merge of a and b (Agarwal et al., mergeable summaries), capacity out.capacity.
cdef int ss_merge(StreamSummary* out, const StreamSummary* a, const StreamSummary* b) except -1
cdef object ss_get_state(const StreamSummary* s)
cdef int ss_set_state(StreamSummary* s, object state) except -1
cdef Py_ssize_t ss_nbytes(const StreamSummary* s) noexcept nogil
