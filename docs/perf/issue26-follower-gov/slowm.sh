#!/bin/bash
# slowm.sh BUILD PROCS WORKLOAD DUR : ab.sh's layout with a master that syncs every change to disk
# (--metadata_dir); prints the drivers' line, then the holder's CPU seconds and the machine's busy CPU
B=$1; P=$2; W=$3; D=${4:-3}
PORT=$((20000 + RANDOM % 20000)); MP=$((PORT+1)); MD=$(mktemp -d /var/tmp/mdXXXX)
setsid $B/mooncake-store/tools/mooncake_master --port=$PORT --rpc_address=127.0.0.1 --metrics_port=$MP --metadata_dir=$MD >./master.log 2>&1 &
MPID=$!
sleep 0.5
coproc H { env $HENV setsid $B/benchmarks/mc_store_bench --role=holder --master=127.0.0.1:$PORT --segment_size=$((1024<<20)) 2>./holder.log; }
read -t 60 line <&${H[0]}
HP=$(echo "$line" | python3 -c 'import json,sys; print(json.load(sys.stdin)["pid"])')
ht() { awk '{print $14+$15}' /proc/$HP/stat; }
busy() { awk '/^cpu /{print $2+$3+$4+$7+$8}' /proc/stat; }
h1=$(ht); c1=$(busy)
$B/benchmarks/mc_store_bench --master=127.0.0.1:$PORT --procs=$P --duration=$D --pool_bytes=$((384<<20)) --workloads=$W 2>./driver.err
h2=$(ht); c2=$(busy)
echo "holder_cpu_s=$(( (h2-h1) ))e-2 machine_busy_s=$(( (c2-c1) ))e-2"
curl -s 127.0.0.1:$MP/metrics | grep -E 'requests_total\{op="put_commit_for"\}'
exec {H[1]}>&-
kill $H_PID 2>/dev/null; kill $MPID; wait 2>/dev/null; rm -rf $MD
