/*
 * rm_mem.c - the server-wide memory guard: no single allocation of the
 * module takes Redis past its maxmemory (or, without one, past the
 * machine's physical memory).
 *
 * Redis checks maxmemory before a deny-oom command runs, never inside it,
 * so one command that allocates a large table (a reserve with a huge
 * capacity, a growth by a huge expansion, an exact table's rehash) could
 * take the server far past it, or get it killed.  Every allocation of the
 * module goes through hook_malloc(), which asks rmf_mem_allow() first:
 * allocations under RM_MEM_SMALL pass unchecked (the deny-oom check before
 * the command bounds them), larger ones are refused when the server's
 * used_memory plus the request would pass the limit.  The refusal is an
 * allocation failure for the caller (a clear error reply, the key
 * unchanged), and rmf_err_nomem() names the limit in that reply.
 *
 * The server is asked through a probe module.c sets (rmf_mem_set_probe());
 * without one (the unit tests and fuzzers, which build the values without
 * Redis) every request passes.
 *
 * Loading (RDB, RESTORE) turns the guard off: Redis itself loads a dataset
 * past maxmemory, and refusing there would lose a saved key.  So does
 * saving (RDB, AOF rewrite): a save's temporary buffers must not fail
 * because the server is near its limit.
 */
#define _DEFAULT_SOURCE
#include "rm_filter.h"

#include <stdio.h>
#include <unistd.h>

#define RM_MEM_SMALL ((size_t)1 << 20)

static unsigned guard_off;     /* loads in progress */
static uint64_t refused_bytes; /* the last refused request, 0 if none */
static uint64_t refused_used, refused_limit;
static bool refused_max;       /* the limit was maxmemory, not the machine */
static char nomem_text[200];

static rmf_mem_probe_fn *probe;

void rmf_mem_set_probe(rmf_mem_probe_fn *fn) { probe = fn; }

uint64_t rmf_mem_phys_bytes(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    if (pages <= 0 || size <= 0)
        return UINT64_MAX;
    return (uint64_t)pages * (uint64_t)size;
}

static bool server_memory(uint64_t *used, uint64_t *limit, bool *is_max)
{
    return probe && probe(used, limit, is_max);
}

bool rmf_mem_allow(size_t n)
{
    if (n < RM_MEM_SMALL || guard_off)
        return true;
    uint64_t used, limit;
    bool is_max;
    if (!server_memory(&used, &limit, &is_max))
        return true;
    if (used <= limit && n <= limit - used)
        return true;
    refused_bytes = n;
    refused_used = used;
    refused_limit = limit;
    refused_max = is_max;
    return false;
}

uint64_t rmf_mem_room(void)
{
    uint64_t used, limit;
    bool is_max;
    if (guard_off || !server_memory(&used, &limit, &is_max))
        return UINT64_MAX;
    return used < limit ? limit - used : 0;
}

void rmf_mem_unguarded(bool on)
{
    if (on)
        guard_off++;
    else if (guard_off)
        guard_off--;
}

void rmf_mem_clear(void) { refused_bytes = 0; }

rmf_err rmf_err_nomem(void)
{
    if (!refused_bytes)
        return "ERR allocation failure";
    snprintf(nomem_text, sizeof nomem_text,
             "ERR allocation failure: %llu bytes more would take Redis past %s (%llu bytes, "
             "%llu used)",
             (unsigned long long)refused_bytes,
             refused_max ? "its maxmemory" : "the machine's memory",
             (unsigned long long)refused_limit, (unsigned long long)refused_used);
    refused_bytes = 0;
    return nomem_text;
}
