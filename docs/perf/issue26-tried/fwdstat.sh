#!/bin/bash
# usage: fwdstat.sh BUILD PROCS WORKLOAD DUR : like ab.sh, then prints the master's commit counters
B=$1; P=$2; W=$3; D=${4:-2}
PORT=$((20000 + RANDOM % 20000)); MP=$((PORT+1))
env $SERVER_ENV setsid $B/mooncake-store/tools/mooncake_master --port=$PORT --rpc_address=127.0.0.1 --metrics_port=$MP >./master.log 2>&1 &
MPID=$!
sleep 0.5
coproc H { env $SERVER_ENV $HENV setsid $B/benchmarks/mc_store_bench --role=holder --master=127.0.0.1:$PORT --segment_size=$((1024<<20)) 2>./holder.log; }
read -t 60 line <&${H[0]}
$B/benchmarks/mc_store_bench --master=127.0.0.1:$PORT --procs=$P --duration=$D --pool_bytes=$((384<<20)) --workloads=$W 2>./driver.err
curl -s 127.0.0.1:$MP/metrics | grep -E 'requests_total\{op="put_(commit|commit_for|reserve|start|end)"\}|^master_put_end_requests_total|^master_batch_put_end_requests_total'
exec {H[1]}>&-
kill $H_PID 2>/dev/null; kill $MPID; wait 2>/dev/null
