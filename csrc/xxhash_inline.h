/* Compile xxHash (vendored, BSD-2-Clause, csrc/vendor/xxhash/LICENSE) inline into each module
 * that uses it, so there is no separate library to link. */
#ifndef SKEWGROUP_XXHASH_INLINE_H
#define SKEWGROUP_XXHASH_INLINE_H
#define XXH_INLINE_ALL
#include "xxhash.h"
#endif
