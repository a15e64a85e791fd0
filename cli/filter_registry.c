/*
 * filter_registry.c - every filter type `dedup filter` knows, in one place.
 *
 * To add a type: define `const filter_type filter_type_NAME` in its own file
 * (cli/filter_NAME.c, see filter_types.h) and add `X(NAME)` to the list
 * below.  The order of the list is the order of `dedup filter --help`.
 */
#include <string.h>

#include "filter_types.h"

#define FILTER_TYPE_LIST(X) \
    X(bloom)                \
    X(blocked)              \
    X(counting)             \
    X(cuckoo)               \
    X(cuckoo_chain)         \
    X(scalable)

#define DECLARE_TYPE(name) extern const filter_type filter_type_##name;
#define LIST_TYPE(name) &filter_type_##name,
FILTER_TYPE_LIST(DECLARE_TYPE)

const filter_type *const filter_types[] = {FILTER_TYPE_LIST(LIST_TYPE) NULL};

const filter_type *filter_type_by_name(const char *name)
{
    for (size_t i = 0; filter_types[i]; i++)
        if (strcmp(filter_types[i]->name, name) == 0)
            return filter_types[i];
    return NULL;
}

const filter_type *filter_type_by_file_type(uint32_t file_type)
{
    for (size_t i = 0; filter_types[i]; i++)
        if (filter_types[i]->file_type == file_type)
            return filter_types[i];
    return NULL;
}
