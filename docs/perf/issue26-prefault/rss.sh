#!/bin/bash
# like ab.sh, printing the holder's RssShmem every second to rss.log
B=$1; P=$2; W=$3; D=${4:-3}
PORT=$((20000 + RANDOM % 20000)); MP=$((PORT+1))
$B/mooncake-store/tools/mooncake_master --port=$PORT --rpc_address=127.0.0.1 --metrics_port=$MP >./master.log 2>&1 &
MPID=$!
sleep 0.5
coproc H { $B/benchmarks/mc_store_bench --role=holder --master=127.0.0.1:$PORT --segment_size=$((1024<<20)) 2>./holder.log; }
read -t 60 line <&${H[0]}
HP=$(pgrep -f "role=holder --master=127.0.0.1:$PORT")
( while kill -0 $HP 2>/dev/null; do echo "$(date +%s.%N | cut -c1-14) $(grep RssShmem /proc/$HP/status)"; sleep 1; done ) > rss.log &
$B/benchmarks/mc_store_bench --master=127.0.0.1:$PORT --procs=$P --duration=$D --pool_bytes=$((384<<20)) --workloads=$W 2>./driver.err | while read l; do echo "$(date +%s.%N | cut -c1-14) $l"; done
exec {H[1]}>&-
kill $H_PID 2>/dev/null; kill $MPID; wait 2>/dev/null
