#!/bin/bash
# usage: switches.sh ours BUILD_DIR PROCS WORKLOAD       (WORKLOAD as mc_store_bench takes it)
#        switches.sh redis multi|procs CONNS set|get     (4 KiB values, no pipelining)
# Runs one workload for 4 s and counts the machine's context switches and wake-ups for the second
# in its middle (perf stat -a), then prints op/s and both per operation. A wait that sleeps costs
# a wake-up (on another core, an interrupt to it) and a switch; a spin that yields costs switches
# without wake-ups.
# ours: a master and a 1 GiB holder from BUILD_DIR (a Release tree), each in a session of its own
# as the harness starts them, and mc_store_bench --procs=PROCS in this one.
# redis: a redis-server (persistence off) in a session of its own, driven by redis-benchmark:
# "multi" is one redis-benchmark with CONNS connections (the harness's baseline), "procs" is CONNS
# redis-benchmark processes of one connection each (one process per client, as ours).
set -u
count() { # "SWITCHES WAKEUPS": across the machine for 1 s
    perf stat -a -x, -e context-switches,sched:sched_wakeup -- sleep 1 2>&1 >/dev/null |
        awk -F, '/context-switches/ {s = $1} /sched_wakeup/ {w = $1} END {print s, w}'
}
report() { # OPS_PER_S "SWITCHES WAKEUPS" LABEL
    echo "$2" | awk -v o="$1" -v l="$3" '{printf "%-36s %8.0f op/s %6.2f switches/op %6.2f wake-ups/op\n", l, o, $1 / o, $2 / o}'
}
case ${1:-} in
ours)
    B=$2 P=$3 W=$4
    PORT=$((20000 + RANDOM % 20000)) MP=$((PORT + 1))
    setsid "$B"/mooncake-store/tools/mooncake_master --port=$PORT --rpc_address=127.0.0.1 --metrics_port=$MP >./master.log 2>&1 &
    MPID=$!
    sleep 0.5
    # the holder runs until its standard input closes or it is killed
    coproc H { setsid "$B"/benchmarks/mc_store_bench --role=holder --master=127.0.0.1:$PORT --segment_size=$((1024 << 20)) 2>./holder.log; }
    read -r -t 60 _ <&"${H[0]}"
    "$B"/benchmarks/mc_store_bench --master=127.0.0.1:$PORT --procs="$P" --duration=4 --pool_bytes=$((384 << 20)) --workloads="$W" >./driver.out 2>./driver.err &
    BP=$!
    sleep 2
    SW=$(count)
    wait $BP
    pkill -f "role=holder --master=127.0.0.1:$PORT"
    kill $MPID 2>/dev/null
    wait 2>/dev/null
    OPS=$(awk '/op\/s/ {for (i = 1; i < NF; i++) if ($(i + 1) == "op/s") print $i}' ./driver.out | tail -1)
    report "$OPS" "$SW" "ours $W x$P procs"
    ;;
redis)
    MODE=$2 C=$3 T=$4
    PORT=$((20000 + RANDOM % 20000))
    setsid redis-server --port $PORT --save "" --appendonly no >./redis.log 2>&1 &
    RPID=$!
    until redis-cli -p $PORT ping >/dev/null 2>&1; do sleep 0.1; done
    redis-benchmark -p $PORT -c 1 -d 4096 -t set -n 100000 -r 100000 -q >/dev/null 2>&1 # the keys gets read
    if [ "$MODE" = multi ]; then
        timeout 4 redis-benchmark -p $PORT -c "$C" -P 1 -d 4096 -t "$T" -n 100000000 -r 100000 --csv >/dev/null 2>&1 &
    else
        for _ in $(seq 1 "$C"); do
            timeout 4 redis-benchmark -p $PORT -c 1 -P 1 -d 4096 -t "$T" -n 100000000 -r 100000 --csv >/dev/null 2>&1 &
        done
    fi
    # the commands the server ran in the same second as the count (redis-benchmark killed by
    # its timeout prints no summary)
    calls() { redis-cli -p $PORT info commandstats | awk -F'[=,]' -v t="cmdstat_$T:" 'index($0, t) == 1 {print $2}'; }
    sleep 2
    N0=$(calls)
    SW=$(count)
    N1=$(calls)
    sleep 2 # the benchmarks' timeout
    kill $RPID
    wait 2>/dev/null
    report "$((N1 - N0))" "$SW" "redis $T $MODE x$C"
    ;;
*)
    sed -n 2,11p "$0"
    exit 2
    ;;
esac
