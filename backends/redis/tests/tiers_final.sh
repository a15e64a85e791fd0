#!/bin/bash
# The final state of tier stacks with a Redis TTL tier at the bottom
# (test_tiers_final.c) against one real redis-server this script starts on
# a free loopback port and stops.  Usage: tiers_final.sh TEST_BINARY
. "$(dirname "$0")/lib.sh"
P=$(free_port)
start_server "$P"
"$1" "redis://127.0.0.1:$P/2" || fail "tier stacks' final state"
echo "tiers_final: ok"
