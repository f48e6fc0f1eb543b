#!/bin/bash
# getstat.sh BUILD PROCS WORKLOAD : the master's request counters after one 3 s run
B=$1; P=$2; W=$3
DURATION=3
. "$(dirname "$0")/../issue26-prefetch-put/start.sh"
drivers_done
curl -s http://127.0.0.1:$MP/metrics | grep -E '^mooncake_master_requests_total' | grep -v ' 0$'
stop_servers
