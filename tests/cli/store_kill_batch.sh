#!/usr/bin/env bash
# dedup --store DIR --sync batch killed with SIGKILL at random instants (at
# least 50 kills; lib/store_kill.sh says what is asserted).
. "$(dirname "$0")/lib/common.sh"
. "$(dirname "$0")/lib/store_kill.sh"
kills=$(kill_target)
store_kill_chains "store --sync batch" "$kills" 10 --store STORE --sync batch
first_run_kills 20 --store STORE --sync batch
finish
