/*
 * set.c - what the exact hash sets for strings (strset.c), 128-bit digests
 * (digestset.c) and 64-bit integers (u64set.c) share: their parameters and
 * the initial table size.
 *
 * How it works.  All three are open-addressing tables with linear probing.
 * The digest set is the ordered variant that grows in place; its own "How
 * the digest set works" block in digestset.c describes it.  Integers use one
 * table whose home slot is dedup_reduce(hash, capacity), so capacity need
 * not be a power of two.
 *
 * Strings grow one segment at a time at load 3/4 (doubling below one
 * segment); integers double the table at load 4/5; digests grow in place by
 * 1/4 at load 17/20.  With a memory limit, an insert that would need more
 * memory (a split's segment and a doubled directory, a small-table or
 * integer rehash, during which old and new tables coexist, a digest-set
 * growth, or a new arena chunk) returns DEDUP_ERR_FULL and changes nothing.
 */
#include "set_internal.h"

void dedup_set_params_init(dedup_set_params *params)
{
    memset(params, 0, sizeof *params);
    params->seed = DEDUP_DEFAULT_SEED;
}

/* Slots for 'capacity' keys at a load of num/den (at least MIN_SLOTS), plus
 * one: a table always keeps an empty slot. */
uint64_t ddi_set_slots_for(uint64_t capacity, unsigned num, unsigned den)
{
    uint64_t s = capacity / num * den + (capacity % num * den + num - 1) / num;
    if (s < MIN_SLOTS)
        s = MIN_SLOTS;
    return s + 1; /* always at least one empty slot */
}
