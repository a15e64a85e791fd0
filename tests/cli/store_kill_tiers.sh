#!/usr/bin/env bash
# A filter in front of a store (--tier blocked:... --tier rocksdb:DIR)
# killed with SIGKILL at random instants (at least 50 kills;
# lib/store_kill.sh says what is asserted).
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/store_kill.sh"
kills=$(kill_target)
store_kill_chains "tiers blocked + rocksdb" "$kills" 10 \
    --tier blocked:n=200000,p=1% --tier rocksdb:STORE
finish
