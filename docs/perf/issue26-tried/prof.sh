#!/bin/bash
# prof.sh BUILD PROCS WORKLOAD : records the whole machine for 1 s in the middle of a 4 s run
B=$1; P=$2; W=$3
PORT=$((20000 + RANDOM % 20000)); MP=$((PORT+1))
env $SERVER_ENV setsid $B/mooncake-store/tools/mooncake_master --port=$PORT --rpc_address=127.0.0.1 --metrics_port=$MP >./master.log 2>&1 &
MPID=$!
sleep 0.5
coproc H { env $SERVER_ENV $HENV setsid $B/benchmarks/mc_store_bench --role=holder --master=127.0.0.1:$PORT --segment_size=$((1024<<20)) 2>./holder.log; }
read -t 60 line <&${H[0]}
$B/benchmarks/mc_store_bench --master=127.0.0.1:$PORT --procs=$P --duration=4 --pool_bytes=$((384<<20)) --workloads=$W 2>./driver.err &
DP=$!
sleep 2
perf record -F 499 ${PERF_CG:--g} -a -o /tmp/perf.data -- sleep 1 >/dev/null 2>&1
wait $DP
exec {H[1]}>&-
kill $H_PID 2>/dev/null; kill $MPID; wait 2>/dev/null
