/* status.c - status texts, type names and the runtime version. */
#include "dedup/common.h"
#include "dedup/format.h"

unsigned dedup_version_number(void) { return DEDUP_VERSION_NUMBER; }
const char *dedup_version_string(void) { return DEDUP_VERSION_STRING; }

const char *dedup_strerror(dedup_status status)
{
    switch (status) {
    case DEDUP_OK: return "success";
    case DEDUP_ERR_INVALID_ARG: return "invalid argument";
    case DEDUP_ERR_NOMEM: return "out of memory";
    case DEDUP_ERR_IO: return "input/output error";
    case DEDUP_ERR_BAD_MAGIC: return "not a dedup file (bad magic number)";
    case DEDUP_ERR_VERSION: return "unsupported file format version";
    case DEDUP_ERR_WRONG_TYPE: return "file holds a different structure type";
    case DEDUP_ERR_CHECKSUM: return "checksum mismatch (file is corrupted)";
    case DEDUP_ERR_TRUNCATED: return "data is truncated";
    case DEDUP_ERR_CORRUPT: return "data is corrupted (impossible field value)";
    case DEDUP_ERR_FULL: return "structure is full";
    case DEDUP_ERR_RANGE: return "index out of range";
    case DEDUP_ERR_INCOMPATIBLE: return "structures differ in shape, type or seed";
    case DEDUP_ERR_NOT_FOUND: return "key is not present";
    case DEDUP_ERR_LIMIT: return "size exceeds a library limit";
    case DEDUP_ERR_UNSUPPORTED: return "operation not supported by this structure";
    case DEDUP_ERR_CANCELLED: return "operation cancelled";
    case DEDUP_ERR_TRAILING: return "data goes on after the end of the saved structure";
    }
    return "unknown status";
}

const char *dedup_type_name(uint32_t type)
{
    switch (type) {
    case DEDUP_TYPE_BITMAP: return "bitmap";
    case DEDUP_TYPE_BLOOM: return "bloom";
    case DEDUP_TYPE_BLOCKED_BLOOM: return "blocked";
    case DEDUP_TYPE_COUNTING_BLOOM: return "counting";
    case DEDUP_TYPE_CUCKOO: return "cuckoo";
    case DEDUP_TYPE_SCALABLE_BLOOM: return "scalable";
    case DEDUP_TYPE_SET_U64: return "set-u64";
    case DEDUP_TYPE_SET_DIGEST: return "fingerprint-set";
    case DEDUP_TYPE_SET_STRING: return "exact-set";
    case DEDUP_TYPE_WINDOW: return "window";
    case DEDUP_TYPE_CUCKOO_CHAIN: return "cuckoo-chain";
    case DEDUP_TYPE_ROTATING_BLOOM: return "rotating-bloom";
    case DEDUP_TYPE_HLL: return "hll";
    case DEDUP_TYPE_ROARING: return "roaring";
    case DEDUP_TYPE_RING: return "ring";
    case DEDUP_TYPE_STATE: return "state";
    }
    return "unknown";
}
