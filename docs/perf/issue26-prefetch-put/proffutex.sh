#!/bin/bash
# prof.sh BUILD PROCS WORKLOAD : perf record of master and holder for 1.5 s mid-run
B=$1; P=$2; W=$3
PORT=$((20000 + RANDOM % 20000)); MP=$((PORT+1))
env $SERVER_ENV $MENV setsid $B/mooncake-store/tools/mooncake_master --port=$PORT --rpc_address=127.0.0.1 --metrics_port=$MP >./master.log 2>&1 &
MPID=$!
sleep 0.5
coproc H { env $SERVER_ENV $HENV setsid $B/benchmarks/mc_store_bench --role=holder --master=127.0.0.1:$PORT --segment_size=$((1024<<20)) 2>./holder.log; }
read -t 60 line <&${H[0]}
env $DENV $B/benchmarks/mc_store_bench --master=127.0.0.1:$PORT --procs=$P --duration=4 --pool_bytes=$((384<<20)) --workloads=$W 2>./driver.err > /tmp/pr-out.txt &
DP=$!
sleep 1.5
HP=$(pgrep -f "role=holder --master=127.0.0.1:$PORT" | tail -1)
perf record -e syscalls:sys_enter_futex --call-graph dwarf -p $MPID -o /tmp/pr-master.data -- sleep 1.5 2>/dev/null &
perf record -e syscalls:sys_enter_futex --call-graph dwarf -p $HP -o /tmp/pr-holder.data -- sleep 1.5 2>/dev/null &
wait $DP
exec {H[1]}>&-
kill $H_PID 2>/dev/null; kill $MPID; wait 2>/dev/null
cat /tmp/pr-out.txt
