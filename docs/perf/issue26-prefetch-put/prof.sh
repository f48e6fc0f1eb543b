#!/bin/bash
# prof.sh BUILD PROCS WORKLOAD: perf record of the master and the holder for 1.5 s in the middle of
# a run (start.sh), into /tmp/pr-master.data and /tmp/pr-holder.data. PERF_ARGS is what to record:
# by default samples with frame-pointer call chains; the futex calls' chains were recorded with
# PERF_ARGS="-e syscalls:sys_enter_futex --call-graph dwarf".
B=$1; P=$2; W=$3
. "$(dirname "$0")/start.sh"
perf record ${PERF_ARGS:--F 4999 -g} -p $MPID -o /tmp/pr-master.data -- sleep 1.5 2>/dev/null &
perf record ${PERF_ARGS:--F 4999 -g} -p $HP -o /tmp/pr-holder.data -- sleep 1.5 2>/dev/null &
finish
