/*
 * set_internal.h - what the exact sets' sources (strset.c, digestset.c,
 * u64set.c, set.c) share; not public API (that is dedup/set.h).
 */
#ifndef DEDUP_SET_INTERNAL_H
#define DEDUP_SET_INTERNAL_H

#include "dedup/set.h"

#include "internal.h"

/* The least table any set starts with. */
#define MIN_SLOTS 64u

#if defined(__GNUC__)
#pragma GCC visibility push(hidden)
#endif

/* Slots for 'capacity' keys at a load of num/den (at least MIN_SLOTS), plus
 * one: a table always keeps an empty slot (set.c). */
uint64_t ddi_set_slots_for(uint64_t capacity, unsigned num, unsigned den);

#if defined(__GNUC__)
#pragma GCC visibility pop
#endif

#endif
