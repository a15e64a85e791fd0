/*
 * window_persist.c - saving and loading a time window (exact or
 * approximate) in the container of dedup/format.h; docs/FORMAT.md, "Time
 * window", is the normative description.
 */
#include "window_internal.h"

#include <stdlib.h>

#define WIN_PARAMS_LEN 136u        /* exact */
#define WIN_PARAMS_LEN_APPROX 176u /* approximate: + table geometry and state */
#define GEN_HEADER_LEN 16u         /* id, count */
#define FLAG_HAS_T 1u
#define FLAG_HAS_W 2u
#define OPT_REFRESH 1u /* window options (offset 132): refresh on duplicate */

/* Generations with at least one kept record (the only ones saved: an empty
 * one is left behind only by an allocation failure). */
static uint32_t saved_gens(const dedup_window *w)
{
    uint32_t n = 0;
    for (size_t i = 0; i < w->gn; i++)
        n += w->gv[i].count != 0;
    return n;
}

static void put_params(const dedup_window *w, unsigned char *b)
{
    memset(b, 0, WIN_PARAMS_LEN_APPROX);
    dedup_put_u32(b + 0, (uint32_t)w->p.type);
    dedup_put_u32(b + 4, (uint32_t)w->p.mode);
    dedup_put_u64(b + 8, w->p.duration);
    dedup_put_u64(b + 16, w->p.lateness);
    dedup_put_u32(b + 24, w->p.generations);
    dedup_put_u32(b + 28, (w->has_T ? FLAG_HAS_T : 0) | (w->has_W ? FLAG_HAS_W : 0));
    dedup_put_u64(b + 32, w->p.capacity);
    dedup_put_f64(b + 40, w->p.fpr);
    dedup_put_u64(b + 48, (uint64_t)(w->has_T ? w->T : 0));
    dedup_put_u64(b + 56, (uint64_t)(w->has_W ? w->W : 0));
    dedup_put_u64(b + 64, w->counter);
    dedup_put_u64(b + 72, w->records);
    dedup_put_u64(b + 80, w->kept);
    dedup_put_u64(b + 88, w->duplicates);
    dedup_put_u64(b + 96, w->late);
    dedup_put_u64(b + 104, (uint64_t)w->late_max_behind);
    dedup_put_u64(b + 112, w->peak_live);
    dedup_put_u64(b + 120, w->expired);
    dedup_put_u32(b + 128, saved_gens(w));
    dedup_put_u32(b + 132, w->p.refresh ? OPT_REFRESH : 0); /* 0 before refresh existed */
    if (w->p.mode == DEDUP_WINDOW_APPROX) {
        dedup_put_u32(b + 136, w->fbits);
        dedup_put_u32(b + 140, w->tbits);
        dedup_put_u64(b + 144, w->nb);
        dedup_put_u64(b + 152, w->st_live);
        dedup_put_u64(b + 160, w->rng);
        dedup_put_u64(b + 168, w->kick_fail_live);
    }
}

static uint64_t payload_len(const dedup_window *w)
{
    uint64_t n = 0;
    for (size_t i = 0; i < w->gn; i++) {
        const wgen *g = &w->gv[i];
        if (g->count)
            n += GEN_HEADER_LEN +
                 (w->p.mode == DEDUP_WINDOW_EXACT ? g->count * sizeof(wentry) : 0);
    }
    if (w->p.mode == DEDUP_WINDOW_APPROX)
        n += w->tab_bytes + w->st_live * sizeof(sentry);
    return n;
}

static uint32_t params_len(const dedup_window *w)
{
    return w->p.mode == DEDUP_WINDOW_APPROX ? WIN_PARAMS_LEN_APPROX : WIN_PARAMS_LEN;
}

uint64_t dedup_window_serialized_size(const dedup_window *w)
{
    return DEDUP_HEADER_SIZE + params_len(w) + payload_len(w) + DEDUP_TRAILER_SIZE;
}

/* Writes the table as saved: its packed slots with the entries of dead
 * generations cleared, in pieces of 8 * CHUNK slots (whole bytes); then the
 * stash's live entries. */
#define CHUNK 128u
static dedup_status save_approx(const dedup_window *w, dedup_encoder *e)
{
    unsigned char buf[CHUNK * 64 + TAB_SLACK];
    uint64_t n = w->nb * SLOTS_PER_BUCKET;
    dedup_status s = DEDUP_OK;
    for (uint64_t i0 = 0; !s && i0 < n; i0 += 8 * CHUNK) {
        uint64_t i1 = n - i0 < 8 * CHUNK ? n : i0 + 8 * CHUNK;
        size_t bytes = (size_t)(((i1 - i0) * w->sbits + 7) / 8);
        if (ddi_encoder_can_skip(e, bytes)) {
            s = ddi_encoder_skip(e, bytes);
            continue;
        }
        memset(buf, 0, bytes + TAB_SLACK);
        for (uint64_t i = i0; i < i1; i++) {
            uint64_t v = slot_get(w, w->tab, i);
            if (slot_live(w, v))
                slot_set(w, buf, i - i0, v);
        }
        s = dedup_encoder_write(e, buf, bytes);
    }
    if (s || !w->st_live)
        return s;
    /* The stash sorted by (bucket, entry): one canonical order. */
    sentry *tmp = ddi_malloc(&w->alloc, (size_t)w->st_live * sizeof(sentry));
    if (!tmp)
        return DEDUP_ERR_NOMEM;
    size_t m = 0;
    for (uint64_t i = 0; i < w->st_cap; i++)
        if (w->st[i].v)
            tmp[m++] = w->st[i];
    qsort(tmp, m, sizeof(sentry), ddi_win_sentry_cmp);
    for (size_t i = 0; !s && i < m; i++) {
        uint64_t x[2] = {tmp[i].b, tmp[i].v};
        s = dedup_encoder_write_u64s(e, x, 2);
    }
    ddi_free(&w->alloc, tmp);
    return s;
}

dedup_status dedup_window_save(const dedup_window *w, dedup_sink *sink)
{
    if (!w || !sink || !sink->write)
        return DEDUP_ERR_INVALID_ARG;
    if (w->gn > UINT32_MAX)
        return DEDUP_ERR_LIMIT;
    unsigned char params[WIN_PARAMS_LEN_APPROX];
    put_params(w, params);
    dedup_encoder e;
    dedup_status s = dedup_encoder_begin(&e, *sink, DEDUP_TYPE_WINDOW, w->p.seed, params,
                                         params_len(w), payload_len(w));
    for (size_t i = 0; !s && i < w->gn; i++) {
        const wgen *g = &w->gv[i];
        if (!g->count)
            continue;
        if (w->p.mode == DEDUP_WINDOW_EXACT &&
            ddi_encoder_can_skip(&e, GEN_HEADER_LEN + g->count * sizeof(wentry))) {
            s = ddi_encoder_skip(&e, GEN_HEADER_LEN + g->count * sizeof(wentry));
            continue;
        }
        uint64_t h[2] = {(uint64_t)g->id, g->count};
        s = dedup_encoder_write_u64s(&e, h, 2);
        if (w->p.mode == DEDUP_WINDOW_EXACT) {
            uint64_t buf[3 * 256];
            size_t nb = 0;
            for (uint64_t k = 0; !s && g->slots && k < g->len; k++) {
                const wentry *x = &g->slots[k];
                if (ent_empty(x))
                    continue;
                buf[nb++] = x->lo;
                buf[nb++] = x->hi;
                buf[nb++] = (uint64_t)x->t;
                if (nb == sizeof buf / sizeof buf[0]) {
                    s = dedup_encoder_write_u64s(&e, buf, nb);
                    nb = 0;
                }
            }
            if (!s && nb)
                s = dedup_encoder_write_u64s(&e, buf, nb);
        }
    }
    if (!s && w->p.mode == DEDUP_WINDOW_APPROX)
        s = save_approx(w, &e);
    if (!s)
        s = dedup_encoder_end(&e);
    return s;
}

/* Reads and validates one exact generation's entries into g. */
static dedup_status load_exact_gen(dedup_window *w, dedup_decoder *d, wgen *g)
{
    int64_t t_lo, t_hi; /* the times this generation may hold */
    t_lo = g->id * w->s;
    t_hi = t_lo + (w->s - 1);
    if (t_hi > w->T)
        t_hi = w->T;
    uint64_t cnt = g->count;
    g->count = 0;
    if (!cnt)
        return DEDUP_ERR_CORRUPT; /* empty generations are never saved */
    size_t bytes;
    if (!ddi_mul_size((size_t)cnt, sizeof(wentry), &bytes))
        return DEDUP_ERR_CORRUPT;
    wentry *tmp = ddi_malloc(&w->alloc, bytes);
    if (!tmp)
        return DEDUP_ERR_NOMEM;
    dedup_status s = dedup_decoder_read_u64s(d, (uint64_t *)(void *)tmp, (size_t)cnt * 3);
    for (uint64_t k = 0; !s && k < cnt; k++) {
        const wentry *x = &tmp[k];
        if (ent_empty(x) || x->t < t_lo || x->t > t_hi)
            s = DEDUP_ERR_CORRUPT;
        else if (k && ent_cmp(x->lo, x->hi, &tmp[k - 1]) <= 0)
            s = DEDUP_ERR_CORRUPT;
    }
    if (!s) {
        wentry *t;
        uint64_t len, cap = ddi_win_cap_for(cnt);
        if (ddi_win_tab_build(w, tmp, cnt, cap, &t, &len)) {
            g->slots = t;
            g->cap = cap;
            g->len = len;
            g->count = cnt;
            w->slot_bytes += (size_t)len * sizeof(wentry);
        } else {
            s = DEDUP_ERR_NOMEM;
        }
    }
    ddi_free(&w->alloc, tmp);
    return s;
}

/* Reads the approximate table and stash (the generations are loaded and
 * their tags live): every entry must carry a non-zero fingerprint and the tag
 * of a saved generation, the bits after the last slot must be zero, a stash
 * entry must name the smaller bucket of a pair, and each generation must own
 * exactly its count of entries. */
static dedup_status load_approx(dedup_window *w, dedup_decoder *d, uint64_t sn)
{
    uint64_t n = w->nb * SLOTS_PER_BUCKET;
    if (!ddi_win_tab_alloc(w))
        return DEDUP_ERR_NOMEM;
    dedup_status s = dedup_decoder_read(d, w->tab, w->tab_bytes);
    if (s)
        return s;
    uint32_t tail = (uint32_t)(n * w->sbits % 8);
    if (tail && (w->tab[w->tab_bytes - 1] >> tail))
        return DEDUP_ERR_CORRUPT;
    uint64_t *cnt = ddi_calloc(&w->alloc, w->ntags, sizeof(uint64_t));
    if (!cnt)
        return DEDUP_ERR_NOMEM;
    for (uint64_t i = 0; !s && i < n; i++) {
        uint64_t v = slot_get(w, w->tab, i);
        if (!v)
            continue;
        if (!slot_live(w, v))
            s = DEDUP_ERR_CORRUPT;
        else
            w->tag_n[v >> w->fbits]++;
    }
    w->tab_live = 0;
    for (uint32_t g = 0; g < w->ntags; g++) {
        cnt[g] = w->tag_n[g];
        w->tab_live += w->tag_n[g];
    }
    if (!s && sn && !ddi_win_st_rebuild(w, sn))
        s = DEDUP_ERR_NOMEM;
    uint64_t pb = 0, pv = 0;
    for (uint64_t k = 0; !s && k < sn; k++) {
        uint64_t x[2];
        s = dedup_decoder_read_u64s(d, x, 2);
        if (s)
            break;
        uint64_t fp = x[1] & w->fmask;
        if (x[0] >= w->nb || !slot_live(w, x[1] & ((UINT64_C(1) << w->sbits) - 1)) ||
            alt_bucket(w, x[0], fp) < x[0] ||
            (k && (x[0] < pb || (x[0] == pb && x[1] <= pv)))) {
            s = DEDUP_ERR_CORRUPT;
            break;
        }
        pb = x[0];
        pv = x[1];
        cnt[st_tag(w, x[1])]++;
        ddi_win_st_place(w, x[0], x[1]);
    }
    for (size_t i = 0; !s && i < w->gn; i++)
        if (cnt[gen_tag(w, w->gv[i].id)] != w->gv[i].count)
            s = DEDUP_ERR_CORRUPT;
    ddi_free(&w->alloc, cnt);
    return s;
}

dedup_status dedup_window_load(dedup_source src, const dedup_allocator *alloc,
                               dedup_window **out)
{
    if (!out || !src.read)
        return DEDUP_ERR_INVALID_ARG;
    *out = NULL;
    dedup_allocator a;
    ddi_allocator_resolve(&a, alloc);
    dedup_decoder dec, *d = &dec; /* ~5 KB, 64-byte aligned: on the stack as bloom.c does */
    dedup_window *w = NULL;
    dedup_status s = dedup_decoder_begin(d, src, DEDUP_TYPE_WINDOW);
    if (s)
        goto done;
    const unsigned char *b = d->params;
    uint32_t plen = d->header.params_len;
    if (plen < WIN_PARAMS_LEN) {
        s = DEDUP_ERR_CORRUPT;
        goto done;
    }
    dedup_window_params p;
    dedup_window_params_init(&p);
    uint32_t type = dedup_get_u32(b), mode = dedup_get_u32(b + 4);
    uint32_t flags = dedup_get_u32(b + 28);
    if (mode == DEDUP_WINDOW_APPROX && plen == WIN_PARAMS_LEN) {
        /* An approximate window of the Bloom-generation layout (before the
         * tagged fingerprint table): not readable any more. */
        s = DEDUP_ERR_VERSION;
        goto done;
    }
    if (plen != (mode == DEDUP_WINDOW_APPROX ? WIN_PARAMS_LEN_APPROX : WIN_PARAMS_LEN)) {
        s = DEDUP_ERR_CORRUPT;
        goto done;
    }
    p.duration = dedup_get_u64(b + 8);
    p.lateness = dedup_get_u64(b + 16);
    p.generations = dedup_get_u32(b + 24);
    p.capacity = dedup_get_u64(b + 32);
    p.fpr = dedup_get_f64(b + 40);
    p.seed = d->header.seed;
    uint32_t opts = dedup_get_u32(b + 132); /* files from before refresh hold 0 */
    p.refresh = opts & OPT_REFRESH;
    if (type > DEDUP_WINDOW_COUNT || mode > DEDUP_WINDOW_APPROX || (flags & ~3u) ||
        (opts & ~OPT_REFRESH) || p.generations == 0) {
        s = DEDUP_ERR_CORRUPT;
        goto done;
    }
    p.type = (dedup_window_type)type;
    p.mode = (dedup_window_mode)mode;
    s = ddi_win_alloc_window(&p, &a, true, &w);
    if (s) {
        if (s != DEDUP_ERR_NOMEM)
            s = s == DEDUP_ERR_LIMIT ? DEDUP_ERR_LIMIT : DEDUP_ERR_CORRUPT;
        goto done;
    }
    /* The params must be exactly what setup() normalises them to. */
    if (w->p.generations != p.generations || w->p.lateness != p.lateness ||
        w->p.fpr != p.fpr) {
        s = DEDUP_ERR_CORRUPT;
        goto done;
    }
    uint64_t sn = 0;
    if (p.mode == DEDUP_WINDOW_APPROX) {
        /* The geometry must be what these params create. */
        sn = dedup_get_u64(b + 152);
        w->rng = dedup_get_u64(b + 160);
        w->kick_fail_live = dedup_get_u64(b + 168);
        if (dedup_get_u32(b + 136) != w->fbits || dedup_get_u32(b + 140) != w->tbits ||
            dedup_get_u64(b + 144) != w->nb || !w->rng) {
            s = DEDUP_ERR_CORRUPT;
            goto done;
        }
    }
    w->has_T = flags & FLAG_HAS_T;
    w->has_W = flags & FLAG_HAS_W;
    w->T = w->has_T ? (int64_t)dedup_get_u64(b + 48) : 0;
    w->W = w->has_W ? (int64_t)dedup_get_u64(b + 56) : 0;
    w->counter = dedup_get_u64(b + 64);
    w->records = dedup_get_u64(b + 72);
    w->kept = dedup_get_u64(b + 80);
    w->duplicates = dedup_get_u64(b + 88);
    w->late = dedup_get_u64(b + 96);
    w->late_max_behind = (int64_t)dedup_get_u64(b + 104);
    w->peak_live = dedup_get_u64(b + 112);
    w->expired = dedup_get_u64(b + 120);
    uint32_t ng = dedup_get_u32(b + 128);
    if ((b[48] | b[49] | b[50] | b[51] | b[52] | b[53] | b[54] | b[55]) && !w->has_T)
        s = DEDUP_ERR_CORRUPT;
    if ((b[56] | b[57] | b[58] | b[59] | b[60] | b[61] | b[62] | b[63]) && !w->has_W)
        s = DEDUP_ERR_CORRUPT;
    if ((w->has_T && !time_ok(w->T)) || (w->has_W && !time_ok(w->W))) {
        s = DEDUP_ERR_CORRUPT; /* checked before any arithmetic on them */
        goto done;
    }
    /* The watermark is never below T - L once there is a T. */
    if (w->has_T && (!w->has_W || (w->W < w->T - w->L && w->W != DEDUP_WINDOW_MIN_TIME)))
        s = DEDUP_ERR_CORRUPT;
    if (w->late_max_behind < 0 || (w->late == 0 && w->late_max_behind != 0))
        s = DEDUP_ERR_CORRUPT;
    if (w->kept > w->records || w->duplicates > w->records - w->kept ||
        w->late != w->records - w->kept - w->duplicates || w->expired > w->kept)
        s = DEDUP_ERR_CORRUPT;
    if (p.type == DEDUP_WINDOW_COUNT) {
        if (w->late || w->has_W != w->has_T || w->counter != w->records ||
            (w->has_T ? (uint64_t)w->T + 1 != w->counter : w->counter != 0))
            s = DEDUP_ERR_CORRUPT;
    } else if (w->counter != 0) {
        s = DEDUP_ERR_CORRUPT;
    }
    if (ng && !w->has_T)
        s = DEDUP_ERR_CORRUPT; /* nothing is kept before a first record */
    if (s)
        goto done;
    if (p.mode == DEDUP_WINDOW_APPROX) {
        /* The payload length is implied by the params: check it before
         * allocating anything. */
        uint64_t want = (uint64_t)ng * GEN_HEADER_LEN + w->tab_bytes; /* < 2^38 */
        if (d->header.payload_len < want ||
            (d->header.payload_len - want) / sizeof(sentry) != sn ||
            (d->header.payload_len - want) % sizeof(sentry) != 0) {
            s = DEDUP_ERR_CORRUPT;
            goto done;
        }
    } else if ((uint64_t)ng > d->header.payload_len / GEN_HEADER_LEN) {
        /* Every generation is at least its header long: refuse counts the
         * payload cannot hold before allocating the array. */
        s = DEDUP_ERR_CORRUPT;
        goto done;
    }
    if (ng) {
        w->gv = ddi_calloc(&w->alloc, ng, sizeof(wgen));
        if (!w->gv) {
            s = DEDUP_ERR_NOMEM;
            goto done;
        }
        w->gcap = ng;
    }
    int64_t floor_id = w->has_W ? ddi_win_gen_floor(w, w->W) : INT64_MIN;
    int64_t top_id = w->has_T ? fdiv(w->T, w->s) : INT64_MIN;
    uint64_t live = 0;
    for (uint32_t i = 0; i < ng; i++) {
        uint64_t h[2];
        s = dedup_decoder_read_u64s(d, h, 2);
        if (s)
            goto done;
        int64_t id = (int64_t)h[0];
        uint64_t cnt = h[1];
        if (id < floor_id || id > top_id || (i && id <= w->gv[i - 1].id) || cnt == 0 ||
            cnt > w->kept - live) {
            s = DEDUP_ERR_CORRUPT;
            goto done;
        }
        uint64_t left = d->header.payload_len - d->consumed;
        wgen *g = &w->gv[i];
        g->id = id;
        g->count = cnt;
        w->gn = i + 1;
        if (p.mode == DEDUP_WINDOW_EXACT) {
            if (cnt > left / sizeof(wentry)) {
                s = DEDUP_ERR_CORRUPT;
                goto done;
            }
            s = load_exact_gen(w, d, g);
            if (s)
                goto done;
        } else {
            /* Ids between floor and top are fewer than 2^t: distinct tags. */
            if (w->tag_state[gen_tag(w, id)] != TAG_FREE) {
                s = DEDUP_ERR_CORRUPT;
                goto done;
            }
            w->tag_state[gen_tag(w, id)] = TAG_LIVE;
            w->tag_id[gen_tag(w, id)] = id;
        }
        live += cnt;
    }
    if (p.mode == DEDUP_WINDOW_APPROX) {
        s = load_approx(w, d, sn);
        if (s)
            goto done;
    }
    if (live != w->kept - w->expired || w->peak_live < live || w->peak_live > w->kept) {
        s = DEDUP_ERR_CORRUPT;
        goto done;
    }
    w->live = live;
    s = dedup_decoder_end(d);
    if (!s && w->gn && p.mode == DEDUP_WINDOW_EXACT) {
        uint64_t c = w->gv[w->gn - 1].count;
        if (c > w->hint)
            w->hint = c;
    }
done:
    if (s) {
        dedup_window_free(w);
        return s;
    }
    *out = w;
    return DEDUP_OK;
}

static dedup_status save_cb(const void *obj, dedup_sink *sink)
{
    return dedup_window_save(obj, sink);
}

dedup_status dedup_window_save_file(const dedup_window *w, const char *path)
{
    if (!w || !path)
        return DEDUP_ERR_INVALID_ARG;
    return dedup_save_file(path, save_cb, w);
}

static dedup_status load_any(dedup_source src, const dedup_allocator *alloc, void **out)
{
    dedup_window *x = NULL;
    dedup_status s = dedup_window_load(src, alloc, &x);
    *out = x;
    return s;
}

static void free_any(void *obj) { dedup_window_free(obj); }

dedup_status dedup_window_load_file(const char *path, const dedup_allocator *alloc,
                                dedup_window **out)
{
    if (!out)
        return DEDUP_ERR_INVALID_ARG;
    void *obj = NULL;
    dedup_status s = ddi_load_file(path, alloc, load_any, free_any, &obj);
    *out = obj;
    return s;
}
