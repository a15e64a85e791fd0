#!/usr/bin/env bash
# A window over a store (--window 1h --store DIR, then --last 5 --store DIR)
# killed with SIGKILL at random instants (at least 50 kills each;
# lib/store_kill.sh says what is asserted: over a store a key is new once
# ever, so the window changes none of it).
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/store_kill.sh"
kills=$(kill_target)
store_kill_chains "window 1h over a store" "$kills" 10 --window 1h --store STORE
store_kill_chains "last 5 over a store" "$kills" 10 --last 5 --store STORE
finish
