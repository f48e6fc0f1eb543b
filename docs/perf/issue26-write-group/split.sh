#!/bin/bash
# usage: split.sh BUILD PROCS W1 W2 [DURATION]: one master and holder (segment faulted in first),
# 8 drivers run W1, then a fresh set runs W2. Run where ab.sh runs (docs/perf/issue26-spin150).
B=$1; P=$2; W1=$3; W2=$4; D=${5:-2}
PORT=$((20000 + RANDOM % 20000)); MP=$((PORT+1))
setsid $B/mooncake-store/tools/mooncake_master --port=$PORT --rpc_address=127.0.0.1 --metrics_port=$MP >./master.log 2>&1 &
MPID=$!
sleep 0.5
coproc H { env MC_STORE_SEGMENT_PREFAULT=sync setsid $B/benchmarks/mc_store_bench --role=holder --master=127.0.0.1:$PORT --segment_size=$((1024<<20)) 2>./holder.log; }
read -t 60 line <&${H[0]}
$B/benchmarks/mc_store_bench --master=127.0.0.1:$PORT --procs=$P --duration=$D --pool_bytes=$((384<<20)) --workloads=$W1 2>./driver.err | sed 's/^/d1 /'
$B/benchmarks/mc_store_bench --master=127.0.0.1:$PORT --procs=$P --duration=$D --pool_bytes=$((384<<20)) --workloads=$W2 2>./driver.err | sed 's/^/d2 /'
exec {H[1]}>&-
kill $H_PID 2>/dev/null; kill $MPID; wait 2>/dev/null
