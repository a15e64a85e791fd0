/*
 * rdb_lazy.h - the RocksDB C API, loaded when a store is first opened
 * instead of when the program starts.
 *
 * Why: `dedup` links this backend, and a librocksdb linked the ordinary way
 * is mapped, relocated and initialised (its C++ static constructors run,
 * libstdc++ comes with it) in every run, whether or not the run uses a
 * store: about 10 MB of resident memory before the first byte of input
 * (`dedup` on a 4-byte file: 14.5 MB peak, `cat`: 1.4 MB; librocksdb's
 * pages 6.3 MB and libstdc++'s 1.5 MB of it), which the external engine's
 * memory target (-m 64M within 80 MB) cannot afford.  So the backend's
 * sources call RocksDB through a table of function pointers that
 * ddr_rdb_load() fills with dlopen()/dlsym() the first time a store is
 * opened; a run without a store never loads the library.
 *
 * How: each name of RDB_FUNCS becomes, after this header, a macro naming its
 * pointer in the table, whose type is taken from the prototype in
 * <rocksdb/c.h> (__typeof__), so the calls in store.c and pending.c read
 * as before and are type-checked as before.  A call not in the list stays
 * an undefined symbol and the link fails (the backend is not linked with
 * librocksdb), so the list cannot silently miss one.
 *
 * The table is process-wide and written once (pthread_once) before any
 * store exists; it is read-only afterwards, like the dynamic linker's own.
 */
#ifndef DEDUP_RDB_LAZY_H
#define DEDUP_RDB_LAZY_H

#include <rocksdb/c.h>
#include <stddef.h>

/* Every RocksDB function the backend calls. */
#define RDB_FUNCS(X) \
    X(rocksdb_batched_multi_get_cf) \
    X(rocksdb_block_based_options_create) \
    X(rocksdb_block_based_options_destroy) \
    X(rocksdb_block_based_options_set_block_cache) \
    X(rocksdb_block_based_options_set_block_size) \
    X(rocksdb_block_based_options_set_checksum) \
    X(rocksdb_block_based_options_set_cache_index_and_filter_blocks) \
    X(rocksdb_block_based_options_set_filter_policy) \
    X(rocksdb_block_based_options_set_format_version) \
    X(rocksdb_block_based_options_set_whole_key_filtering) \
    X(rocksdb_cache_create_lru) \
    X(rocksdb_cache_destroy) \
    X(rocksdb_cache_get_usage) \
    X(rocksdb_close) \
    X(rocksdb_column_family_handle_destroy) \
    X(rocksdb_compactionfilter_create) \
    X(rocksdb_compactionfilter_destroy) \
    X(rocksdb_create_iterator_cf) \
    X(rocksdb_envoptions_create) \
    X(rocksdb_envoptions_destroy) \
    X(rocksdb_filterpolicy_create_ribbon) \
    X(rocksdb_flush_cf) \
    X(rocksdb_flush_wal) \
    X(rocksdb_flushoptions_create) \
    X(rocksdb_flushoptions_destroy) \
    X(rocksdb_flushoptions_set_wait) \
    X(rocksdb_get_cf) \
    X(rocksdb_ingest_external_file_cf) \
    X(rocksdb_ingestexternalfileoptions_create) \
    X(rocksdb_ingestexternalfileoptions_destroy) \
    X(rocksdb_ingestexternalfileoptions_set_move_files) \
    X(rocksdb_iter_destroy) \
    X(rocksdb_iter_get_error) \
    X(rocksdb_iter_key) \
    X(rocksdb_iter_next) \
    X(rocksdb_iter_seek_to_first) \
    X(rocksdb_iter_valid) \
    X(rocksdb_iter_value) \
    X(rocksdb_list_column_families) \
    X(rocksdb_list_column_families_destroy) \
    X(rocksdb_open_column_families) \
    X(rocksdb_open_for_read_only_column_families) \
    X(rocksdb_options_create) \
    X(rocksdb_options_destroy) \
    X(rocksdb_options_increase_parallelism) \
    X(rocksdb_options_set_block_based_table_factory) \
    X(rocksdb_options_set_bottommost_compression) \
    X(rocksdb_options_set_compaction_filter) \
    X(rocksdb_options_set_compression) \
    X(rocksdb_options_set_create_if_missing) \
    X(rocksdb_options_set_create_missing_column_families) \
    X(rocksdb_options_set_keep_log_file_num) \
    X(rocksdb_options_set_level_compaction_dynamic_level_bytes) \
    X(rocksdb_options_set_max_background_jobs) \
    X(rocksdb_options_set_max_write_buffer_number) \
    X(rocksdb_options_set_memtable_prefix_bloom_size_ratio) \
    X(rocksdb_options_set_memtable_whole_key_filtering) \
    X(rocksdb_options_set_optimize_filters_for_hits) \
    X(rocksdb_options_set_paranoid_checks) \
    X(rocksdb_options_set_write_buffer_size) \
    X(rocksdb_pinnableslice_destroy) \
    X(rocksdb_pinnableslice_value) \
    X(rocksdb_property_int_cf) \
    X(rocksdb_readoptions_create) \
    X(rocksdb_readoptions_destroy) \
    X(rocksdb_readoptions_set_fill_cache) \
    X(rocksdb_readoptions_set_total_order_seek) \
    X(rocksdb_sstfilewriter_create) \
    X(rocksdb_sstfilewriter_destroy) \
    X(rocksdb_sstfilewriter_finish) \
    X(rocksdb_sstfilewriter_open) \
    X(rocksdb_sstfilewriter_put) \
    X(rocksdb_write) \
    X(rocksdb_writebatch_create) \
    X(rocksdb_writebatch_destroy) \
    X(rocksdb_writebatch_put_cf) \
    X(rocksdb_writeoptions_create) \
    X(rocksdb_writeoptions_destroy) \
    X(rocksdb_writeoptions_disable_WAL) \
    X(rocksdb_writeoptions_set_sync)

typedef struct ddr_rdb_api {
#define RDB_FIELD(f) __typeof__(&f) f;
    RDB_FUNCS(RDB_FIELD)
#undef RDB_FIELD
} ddr_rdb_api;

extern ddr_rdb_api ddr_rdb;

/* Loads librocksdb and resolves every function of RDB_FUNCS, once per
 * process.  Returns NULL on success, else a message saying what failed
 * (the library or one of its functions not found); the same on every call. */
const char *ddr_rdb_load(void);

/* rdb_lazy.c fills the table by these names, so it goes without the macros. */
#ifndef RDB_LAZY_NO_MACROS
#define rocksdb_batched_multi_get_cf (ddr_rdb.rocksdb_batched_multi_get_cf)
#define rocksdb_block_based_options_create (ddr_rdb.rocksdb_block_based_options_create)
#define rocksdb_block_based_options_destroy (ddr_rdb.rocksdb_block_based_options_destroy)
#define rocksdb_block_based_options_set_block_cache (ddr_rdb.rocksdb_block_based_options_set_block_cache)
#define rocksdb_block_based_options_set_block_size (ddr_rdb.rocksdb_block_based_options_set_block_size)
#define rocksdb_block_based_options_set_checksum (ddr_rdb.rocksdb_block_based_options_set_checksum)
#define rocksdb_block_based_options_set_cache_index_and_filter_blocks (ddr_rdb.rocksdb_block_based_options_set_cache_index_and_filter_blocks)
#define rocksdb_block_based_options_set_filter_policy (ddr_rdb.rocksdb_block_based_options_set_filter_policy)
#define rocksdb_block_based_options_set_format_version (ddr_rdb.rocksdb_block_based_options_set_format_version)
#define rocksdb_block_based_options_set_whole_key_filtering (ddr_rdb.rocksdb_block_based_options_set_whole_key_filtering)
#define rocksdb_cache_create_lru (ddr_rdb.rocksdb_cache_create_lru)
#define rocksdb_cache_destroy (ddr_rdb.rocksdb_cache_destroy)
#define rocksdb_cache_get_usage (ddr_rdb.rocksdb_cache_get_usage)
#define rocksdb_close (ddr_rdb.rocksdb_close)
#define rocksdb_column_family_handle_destroy (ddr_rdb.rocksdb_column_family_handle_destroy)
#define rocksdb_compactionfilter_create (ddr_rdb.rocksdb_compactionfilter_create)
#define rocksdb_compactionfilter_destroy (ddr_rdb.rocksdb_compactionfilter_destroy)
#define rocksdb_create_iterator_cf (ddr_rdb.rocksdb_create_iterator_cf)
#define rocksdb_envoptions_create (ddr_rdb.rocksdb_envoptions_create)
#define rocksdb_envoptions_destroy (ddr_rdb.rocksdb_envoptions_destroy)
#define rocksdb_filterpolicy_create_ribbon (ddr_rdb.rocksdb_filterpolicy_create_ribbon)
#define rocksdb_flush_cf (ddr_rdb.rocksdb_flush_cf)
#define rocksdb_flush_wal (ddr_rdb.rocksdb_flush_wal)
#define rocksdb_flushoptions_create (ddr_rdb.rocksdb_flushoptions_create)
#define rocksdb_flushoptions_destroy (ddr_rdb.rocksdb_flushoptions_destroy)
#define rocksdb_flushoptions_set_wait (ddr_rdb.rocksdb_flushoptions_set_wait)
#define rocksdb_get_cf (ddr_rdb.rocksdb_get_cf)
#define rocksdb_ingest_external_file_cf (ddr_rdb.rocksdb_ingest_external_file_cf)
#define rocksdb_ingestexternalfileoptions_create (ddr_rdb.rocksdb_ingestexternalfileoptions_create)
#define rocksdb_ingestexternalfileoptions_destroy (ddr_rdb.rocksdb_ingestexternalfileoptions_destroy)
#define rocksdb_ingestexternalfileoptions_set_move_files (ddr_rdb.rocksdb_ingestexternalfileoptions_set_move_files)
#define rocksdb_iter_destroy (ddr_rdb.rocksdb_iter_destroy)
#define rocksdb_iter_get_error (ddr_rdb.rocksdb_iter_get_error)
#define rocksdb_iter_key (ddr_rdb.rocksdb_iter_key)
#define rocksdb_iter_next (ddr_rdb.rocksdb_iter_next)
#define rocksdb_iter_seek_to_first (ddr_rdb.rocksdb_iter_seek_to_first)
#define rocksdb_iter_valid (ddr_rdb.rocksdb_iter_valid)
#define rocksdb_iter_value (ddr_rdb.rocksdb_iter_value)
#define rocksdb_list_column_families (ddr_rdb.rocksdb_list_column_families)
#define rocksdb_list_column_families_destroy (ddr_rdb.rocksdb_list_column_families_destroy)
#define rocksdb_open_column_families (ddr_rdb.rocksdb_open_column_families)
#define rocksdb_open_for_read_only_column_families (ddr_rdb.rocksdb_open_for_read_only_column_families)
#define rocksdb_options_create (ddr_rdb.rocksdb_options_create)
#define rocksdb_options_destroy (ddr_rdb.rocksdb_options_destroy)
#define rocksdb_options_increase_parallelism (ddr_rdb.rocksdb_options_increase_parallelism)
#define rocksdb_options_set_block_based_table_factory (ddr_rdb.rocksdb_options_set_block_based_table_factory)
#define rocksdb_options_set_bottommost_compression (ddr_rdb.rocksdb_options_set_bottommost_compression)
#define rocksdb_options_set_compaction_filter (ddr_rdb.rocksdb_options_set_compaction_filter)
#define rocksdb_options_set_compression (ddr_rdb.rocksdb_options_set_compression)
#define rocksdb_options_set_create_if_missing (ddr_rdb.rocksdb_options_set_create_if_missing)
#define rocksdb_options_set_create_missing_column_families (ddr_rdb.rocksdb_options_set_create_missing_column_families)
#define rocksdb_options_set_keep_log_file_num (ddr_rdb.rocksdb_options_set_keep_log_file_num)
#define rocksdb_options_set_level_compaction_dynamic_level_bytes (ddr_rdb.rocksdb_options_set_level_compaction_dynamic_level_bytes)
#define rocksdb_options_set_max_background_jobs (ddr_rdb.rocksdb_options_set_max_background_jobs)
#define rocksdb_options_set_max_write_buffer_number (ddr_rdb.rocksdb_options_set_max_write_buffer_number)
#define rocksdb_options_set_memtable_prefix_bloom_size_ratio (ddr_rdb.rocksdb_options_set_memtable_prefix_bloom_size_ratio)
#define rocksdb_options_set_memtable_whole_key_filtering (ddr_rdb.rocksdb_options_set_memtable_whole_key_filtering)
#define rocksdb_options_set_optimize_filters_for_hits (ddr_rdb.rocksdb_options_set_optimize_filters_for_hits)
#define rocksdb_options_set_paranoid_checks (ddr_rdb.rocksdb_options_set_paranoid_checks)
#define rocksdb_options_set_write_buffer_size (ddr_rdb.rocksdb_options_set_write_buffer_size)
#define rocksdb_pinnableslice_destroy (ddr_rdb.rocksdb_pinnableslice_destroy)
#define rocksdb_pinnableslice_value (ddr_rdb.rocksdb_pinnableslice_value)
#define rocksdb_property_int_cf (ddr_rdb.rocksdb_property_int_cf)
#define rocksdb_readoptions_create (ddr_rdb.rocksdb_readoptions_create)
#define rocksdb_readoptions_destroy (ddr_rdb.rocksdb_readoptions_destroy)
#define rocksdb_readoptions_set_fill_cache (ddr_rdb.rocksdb_readoptions_set_fill_cache)
#define rocksdb_readoptions_set_total_order_seek (ddr_rdb.rocksdb_readoptions_set_total_order_seek)
#define rocksdb_sstfilewriter_create (ddr_rdb.rocksdb_sstfilewriter_create)
#define rocksdb_sstfilewriter_destroy (ddr_rdb.rocksdb_sstfilewriter_destroy)
#define rocksdb_sstfilewriter_finish (ddr_rdb.rocksdb_sstfilewriter_finish)
#define rocksdb_sstfilewriter_open (ddr_rdb.rocksdb_sstfilewriter_open)
#define rocksdb_sstfilewriter_put (ddr_rdb.rocksdb_sstfilewriter_put)
#define rocksdb_write (ddr_rdb.rocksdb_write)
#define rocksdb_writebatch_create (ddr_rdb.rocksdb_writebatch_create)
#define rocksdb_writebatch_destroy (ddr_rdb.rocksdb_writebatch_destroy)
#define rocksdb_writebatch_put_cf (ddr_rdb.rocksdb_writebatch_put_cf)
#define rocksdb_writeoptions_create (ddr_rdb.rocksdb_writeoptions_create)
#define rocksdb_writeoptions_destroy (ddr_rdb.rocksdb_writeoptions_destroy)
#define rocksdb_writeoptions_disable_WAL (ddr_rdb.rocksdb_writeoptions_disable_WAL)
#define rocksdb_writeoptions_set_sync (ddr_rdb.rocksdb_writeoptions_set_sync)
#endif

#endif
