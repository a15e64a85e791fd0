#!/usr/bin/env bash
# A window over a store (--last 5 --store DIR; --window takes the same path
# through cli/dedup_window.c) killed with SIGKILL at random instants (at
# least 50 kills;
# lib/store_kill.sh says what is asserted: over a store a key is new once
# ever, so the window changes none of it).
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/store_kill.sh"
kills=$(kill_target)
store_kill_chains "last 5 over a store" "$kills" 10 --last 5 --store STORE
finish
