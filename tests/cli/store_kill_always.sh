#!/usr/bin/env bash
# dedup --store DIR --sync always killed with SIGKILL at random instants (at
# least 50 kills; lib/store_kill.sh says what is asserted).
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/store_kill.sh"
kills=$(kill_target)
store_kill_chains "store --sync always" "$kills" 10 --store STORE --sync always
finish
