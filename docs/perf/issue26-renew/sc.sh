#!/bin/bash
# sc.sh BUILD PROCS WORKLOAD : strace -c -f per party for ~1.5 s mid-run
B=$1; P=$2; W=$3
PORT=$((20000 + RANDOM % 20000)); MP=$((PORT+1))
env $SERVER_ENV setsid $B/mooncake-store/tools/mooncake_master --port=$PORT --rpc_address=127.0.0.1 --metrics_port=$MP >./master.log 2>&1 &
MPID=$!
sleep 0.5
coproc H { env $SERVER_ENV setsid $B/benchmarks/mc_store_bench --role=holder --master=127.0.0.1:$PORT --segment_size=$((1024<<20)) 2>./holder.log; }
read -t 60 line <&${H[0]}
env $DENV $B/benchmarks/mc_store_bench --master=127.0.0.1:$PORT --procs=$P --duration=4 --pool_bytes=$((384<<20)) --workloads=$W 2>./driver.err >./driver.out &
DP=$!
sleep 2
D=$(pgrep -f "mc_store_bench --master=127.0.0.1:$PORT" | tail -1)
HP=$(pgrep -f "role=holder --master=127.0.0.1:$PORT" | tail -1)
for who in master:$MPID holder:$HP driver:$D; do
  timeout -s INT 1 strace -c -f -p ${who#*:} -o /tmp/sc-${who%%:*}.txt &
done
wait $DP
exec {H[1]}>&-
kill $H_PID 2>/dev/null; kill $MPID; wait 2>/dev/null
cat driver.out | grep -v '^#' | head
for w in master holder driver; do echo "== $w"; head -20 /tmp/sc-$w.txt; done
