/*
 * seen_internal.h - how libdedup's own kinds implement dedup/seen.h.
 *
 * Every local kind is one ddi_seen_class: the public operations table of
 * dedup/seen.h (dedup_seen_ops) plus what only local kinds have (create
 * from a spec, load from a file, merge, the watermark, the structure
 * behind it).  The classes are listed once, in DDI_SEEN_CLASS_LIST
 * (seen.c); adding a kind is one file defining `ddi_seen_class_NAME` plus
 * one X(NAME) line there.  A NULL entry answers DEDUP_ERR_UNSUPPORTED (or
 * does nothing), exactly as for an outside implementation.
 */
#ifndef DEDUP_SEEN_INTERNAL_H
#define DEDUP_SEEN_INTERNAL_H

#include "dedup/seen.h"
#include "internal.h"

typedef struct ddi_seen_class {
    dedup_seen_ops ops;       /* ops.kind is the class's kind */
    uint16_t file_types[2];   /* the structure types it loads (0 = none) */
    /* Creates the implementation from a validated spec. */
    dedup_status (*create)(const dedup_seen_spec *spec, const dedup_allocator *alloc, void **impl);
    /* Loads it from a source positioned at the container's first byte;
     * 'seed' is the one the header holds (for structures that keep it
     * without telling it). */
    dedup_status (*load)(dedup_source src, const dedup_allocator *alloc, uint64_t seed,
                         void **impl);
    dedup_status (*merge)(void *dst, const void *src, char *why, size_t whycap);
    dedup_status (*advance)(void *impl, int64_t watermark);
    bool (*spilled)(const void *impl);
    void *(*structure)(const void *impl);
    /* Cheap answers that info (which may scan a filter) also gives. */
    uint64_t (*seed)(const void *impl);
    size_t (*memory)(const void *impl);
    const struct dedup_extsort *(*engine)(const void *impl);
    /* Fixed-size filters: what to do past capacity from now on (WARN, FAIL). */
    dedup_status (*set_on_full)(void *impl, dedup_on_full on_full);
    /* Records every key without deciding (dedup_seen_add); NULL: the kind
     * holds a set, and adding is deciding with the verdicts dropped. */
    dedup_status (*add)(void *impl, const dedup_batch *b, size_t *done);
    /* Two threads deciding one batch, one part each (dedup_seen_parts()). */
    unsigned (*parts)(const void *impl);
    dedup_status (*decide_part)(void *impl, const dedup_batch *b, unsigned part,
                                dedup_verdict *out);
    /* Filter kinds: dedup_seen_get_filter_info / dedup_seen_get_link_info. */
    void (*filter_info)(const void *impl, dedup_seen_filter_info *out);
    dedup_status (*link_info)(const void *impl, uint32_t link, dedup_seen_link_info *out);
} ddi_seen_class;

/* EXACT_SPILL (seen_spill.c) takes the keys of an EXACT set's strset
 * ('src_seed' its seed), for dedup_seen_merge(). */
struct dedup_strset;
dedup_status ddi_spill_take(void *dst, const struct dedup_strset *src, uint64_t src_seed,
                            char *why, size_t whycap);

/* Writes a sentence into why[whycap] (may be NULL/0). */
void ddi_seen_why(char *why, size_t whycap, const char *msg);

#endif
