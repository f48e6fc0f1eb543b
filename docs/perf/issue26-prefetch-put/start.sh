# Sourced by pstat3.sh, prof.sh and ../issue26-sweep/getstat.sh with B (a Release build tree), P
# (driver processes) and W (a workload of mc_store_bench): starts a master and a holder (1 GiB) in
# sessions of their own, as the harness does, then the drivers for DURATION s (4), and waits 1.5 s
# into their run. Sets MPID (the master), MP (its metrics port), HP (the holder), DPIDS (the
# drivers, comma-separated) and DP (the drivers' parent). drivers_done waits for the drivers and
# prints their result lines; stop_servers stops the master and the holder; finish does both.
PORT=$((20000 + RANDOM % 20000)); MP=$((PORT+1))
env $SERVER_ENV $MENV setsid $B/mooncake-store/tools/mooncake_master --port=$PORT --rpc_address=127.0.0.1 --metrics_port=$MP >./master.log 2>&1 &
MPID=$!
sleep 0.5
coproc H { env $SERVER_ENV $HENV setsid $B/benchmarks/mc_store_bench --role=holder --master=127.0.0.1:$PORT --segment_size=$((1024<<20)) 2>./holder.log; }
read -t 60 line <&${H[0]}
env $DENV $B/benchmarks/mc_store_bench --master=127.0.0.1:$PORT --procs=$P --duration=${DURATION:-4} --pool_bytes=$((384<<20)) --workloads=$W 2>./driver.err > /tmp/run-out.txt &
DP=$!
sleep 1.5
HP=$(pgrep -f "role=holder --master=127.0.0.1:$PORT" | tail -1)
DPIDS=$(pgrep -d, -f "mc_store_bench --master=127.0.0.1:$PORT")
drivers_done() {
    wait $DP
    cat /tmp/run-out.txt
}
stop_servers() {
    exec {H[1]}>&-
    kill $H_PID 2>/dev/null; kill $MPID; wait 2>/dev/null
}
finish() {
    drivers_done
    stop_servers
}
