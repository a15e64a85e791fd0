/* seen_spec.c - the command line's method options as a dedup_seen_spec (see seen_spec.h). */
#include "seen_spec.h"

#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "state_file.h"
#ifdef DEDUP_HAVE_ROARING
#include "dedup/roaring.h"
#endif
#include "tier_spec.h"
#include "dedup/scalable.h"
#include "dedup/window.h"

const char *const dd_mode_names[] = {"exact", "fingerprint", "bloom", "blocked", "cuckoo", "scalable", NULL};

dedup_seen_kind dd_mode_kind(const char *name)
{
    for (size_t i = 0; dd_mode_names[i]; i++)
        if (strcmp(name, dd_mode_names[i]) == 0)
            return dedup_seen_kind_from_name(name);
    return 0;
}

void dd_mode_unknown(char *buf, size_t cap, const char *name)
{
    if (!buf || !cap)
        return;
    int n = snprintf(buf, cap, "unknown --mode '%s' (choose", name);
    for (size_t i = 0; dd_mode_names[i] && n >= 0 && (size_t)n < cap; i++) {
        const char *sep = i == 0 ? " " : dd_mode_names[i + 1] ? ", " : " or ";
        n += snprintf(buf + n, cap - (size_t)n, "%s%s", sep, dd_mode_names[i]);
    }
    if (n >= 0 && (size_t)n < cap)
        snprintf(buf + n, cap - (size_t)n, ")");
}

void dd_seen_spec(const dd_seen_opts *o, dedup_seen_spec *sp)
{
    dedup_seen_spec_init(sp);
    sp->kind = o->kind;
    sp->items = o->items;
    bool exact = o->kind == DEDUP_SEEN_EXACT || o->kind == DEDUP_SEEN_FINGERPRINT;
    if (o->fpr > 0 && !exact) /* exact modes warn that -p has no effect */
        sp->fpr = o->fpr;
    sp->memory = o->memory; /* -m bounds a growing set: past it the run stops, never guesses */
    sp->seed = o->seed;
    /* Only the fixed-size filters have a capacity to pass. */
    if (o->kind == DEDUP_SEEN_BLOOM || o->kind == DEDUP_SEEN_BLOCKED ||
        o->kind == DEDUP_SEEN_CUCKOO || o->kind == DEDUP_SEEN_COUNTING)
        sp->on_full = o->on_full;
    sp->counts = o->counts;
    if (o->windowed) {
        /* --mode bloom|blocked makes the window approximate */
        sp->approximate = o->kind == DEDUP_SEEN_BLOOM || o->kind == DEDUP_SEEN_BLOCKED;
        sp->kind = DEDUP_SEEN_WINDOW;
        sp->window_type = o->window_type;
        sp->duration = o->duration;
        sp->lateness = o->lateness;
        sp->refresh_on_dup = o->refresh_on_dup;
        sp->memory = 0;
        return;
    }
    switch (o->kind) {
    case DEDUP_SEEN_EXACT:
        if (o->spill_budget && !o->memory) {
            sp->kind = DEDUP_SEEN_EXACT_SPILL;
            sp->memory = o->spill_budget;
            sp->tmpdir = o->tmpdir;
            sp->threads = o->threads;
            sp->emit = o->emit;
            sp->emit_ctx = o->emit_ctx;
            sp->emit_piece = o->emit_piece;
            sp->unique_only = o->unique_only;
            sp->engine_alloc = cli_allocator(); /* the growing one serves one object */
            sp->ref_base = o->ref_base;
            sp->ref_span = o->ref_span;
            sp->ref_term = o->ref_term;
            sp->ref_ends = o->ref_ends;
            sp->ref_nends = o->ref_nends;
            sp->ref_expected = o->ref_expected;
            sp->ref_keys = o->ref_keys;
        }
        break;
    case DEDUP_SEEN_CUCKOO:
        if (o->items) {
            /* Growth is only a safety net past -n: links of the same size
             * keep later deletes (dedup filter del on the state) exact. */
            sp->expansion = 1;
        } else if (!o->memory) {
            sp->items = 1u << 20; /* grows by doubling links as needed */
            sp->expansion = 2;
        }
        break;
    case DEDUP_SEEN_SCALABLE:
        sp->tightening = DEDUP_SCALABLE_DEFAULT_TIGHTENING;
        break;
    case DEDUP_SEEN_BITMAP:
        sp->range_lo = o->range_lo;
        sp->range_hi = o->range_hi;
        break;
    default:
        break;
    }
}

const dedup_allocator *dd_seen_allocator(dedup_seen_kind kind)
{
    if (kind == DEDUP_SEEN_WINDOW)
        return NULL;
    return kind == DEDUP_SEEN_EXACT || kind == DEDUP_SEEN_EXACT_SPILL ? cli_allocator_growing()
                                                                      : cli_allocator();
}

dedup_status dd_seen_create(const dd_seen_opts *o, dedup_seen **out, char *err, size_t errcap)
{
    if (o->tiers) {
        /* The stack (tier_spec.c), with the window of --window/--last on top;
         * the stores first: every tier takes their seed. */
        dedup_seen *top = NULL;
        uint64_t seed = o->seed;
        dedup_status sst = dd_tiers_open_stores(o->tiers, &seed, o->seed_given, err, errcap);
        if (sst)
            return sst;
        if (o->windowed) {
            dd_seen_opts w = *o;
            w.tiers = NULL;
            w.seed = seed;
            dedup_status st = dd_seen_create(&w, &top, err, errcap);
            if (st)
                return st;
        }
        return dd_tiers_create(o->tiers, top, seed, out, err, errcap);
    }
    dedup_seen_spec sp;
    dd_seen_spec(o, &sp);
    dedup_status st;
#ifdef DEDUP_HAVE_ROARING
    if (sp.kind == DEDUP_SEEN_ROARING) /* a component: created by its own call */
        st = dedup_roaring_seen_create(&sp, cli_allocator(), out);
    else
#endif
        st = dedup_seen_create(&sp, dd_seen_allocator(sp.kind), out);
    if (!st || !err || !errcap)
        return st;
    bool sized_filter = sp.kind == DEDUP_SEEN_BLOOM || sp.kind == DEDUP_SEEN_BLOCKED;
    if (st == DEDUP_ERR_INVALID_ARG && sp.fpr > 0.5)
        snprintf(err, errcap, "-p/--fpr must be at most 0.5 (50%%) for --mode %s (got %g)", o->mode,
                 sp.fpr);
    else if (sp.kind == DEDUP_SEEN_WINDOW)
        snprintf(err, errcap, "cannot create the window: %s%s", dedup_strerror(st),
                 st == DEDUP_ERR_LIMIT ? " (the lateness is too large for an approximate "
                                         "window of this duration)" : "");
    else if (sized_filter && st == DEDUP_ERR_LIMIT && o->items && o->memory)
        snprintf(err, errcap, "-n %llu at -p %g needs %llu bytes, more than -m/--memory %llu allows",
                 (unsigned long long)o->items, sp.fpr,
                 (unsigned long long)(dedup_seen_bytes_for(sp.kind, o->items, sp.fpr)),
                 (unsigned long long)o->memory);
    else if (sized_filter && st == DEDUP_ERR_INVALID_ARG && !o->items && o->memory)
        snprintf(err, errcap, "-m/--memory is too small for any key at this -p");
    else if (sized_filter && st == DEDUP_ERR_INVALID_ARG && !o->items)
        snprintf(err, errcap,
                 "--mode %s needs its size: -n/--items N (with -p/--fpr, default 0.01) "
                 "or -m/--memory SIZE", o->mode);
    else if (sp.kind == DEDUP_SEEN_CUCKOO && st == DEDUP_ERR_LIMIT && o->items && o->memory)
        snprintf(err, errcap, "-n %llu needs %llu bytes as a cuckoo filter, more than -m/--memory allows",
                 (unsigned long long)o->items,
                 (unsigned long long)dedup_seen_bytes_for(sp.kind, o->items, sp.fpr));
    else
        snprintf(err, errcap, "%s", dedup_strerror(st));
    return st;
}

dedup_status dd_seen_load(const dd_seen_opts *o, const char *path, dedup_seen **out,
                          bool *has_ident, char *ident, size_t identcap, char *err,
                          size_t errcap)
{
    *out = NULL;
    if (err && errcap)
        err[0] = '\0';
    dedup_header h;
    dedup_status st = dedup_state_peek(path, &h, has_ident, ident, identcap);
    if (st)
        goto fail;
    dedup_seen_kind want = o->windowed ? DEDUP_SEEN_WINDOW : o->kind;
    dedup_seen_kind have = dedup_seen_kind_of_file_type(h.type);
#ifdef DEDUP_HAVE_ROARING
    if (h.type == DEDUP_TYPE_ROARING)
        have = DEDUP_SEEN_ROARING;
#endif
    if (have != want) {
        if (!err || !errcap)
            return DEDUP_ERR_WRONG_TYPE;
        if (o->windowed)
            snprintf(err, errcap, "holds %s %s, not a window's state", cli_a(dedup_type_name(h.type)),
                     dedup_type_name(h.type));
        else {
            const char *held = dedup_type_name(h.type);
            const char *keeps = want == DEDUP_SEEN_ROARING ? "roaring"
                                                           : dedup_type_name(dedup_seen_file_type(want));
            snprintf(err, errcap,
                     "is %s '%s' state, but --mode %s keeps %s '%s' state (give the --mode it was made with)",
                     cli_a(held), held, o->mode, cli_a(keeps), keeps);
        }
        return DEDUP_ERR_WRONG_TYPE;
    }
    st = dd_state_load(path, want == DEDUP_SEEN_ROARING ? cli_allocator() : dd_seen_allocator(want),
                       out, has_ident, ident, identcap);
    if (!st && want == DEDUP_SEEN_BITMAP) {
        /* The file keeps its range: the run must ask for the same. */
        dedup_seen_info in;
        dedup_seen_get_info(*out, &in);
        if (o->range_lo != in.range_lo || o->range_hi != in.range_hi) {
            if (err && errcap)
                snprintf(err, errcap,
                         "the saved bitmap covers --range %llu..%llu, not the --range %llu..%llu given; "
                         "give --range %llu..%llu to resume it",
                         (unsigned long long)in.range_lo, (unsigned long long)in.range_hi,
                         (unsigned long long)o->range_lo, (unsigned long long)o->range_hi,
                         (unsigned long long)in.range_lo, (unsigned long long)in.range_hi);
            dedup_seen_free(*out);
            *out = NULL;
            return DEDUP_ERR_INCOMPATIBLE;
        }
    }
    if (!st)
        return DEDUP_OK;
fail:
    if (err && errcap && st != DEDUP_ERR_IO)
        snprintf(err, errcap, "%s", dedup_strerror(st));
    return st;
}
