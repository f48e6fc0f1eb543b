#!/usr/bin/env bash
# Issue 26, put slots: alternating A/B runs of mc_store_loop (store.h, three processes: master,
# holder, clients) against redis-benchmark (Redis's own C client) in the same minutes.
#   docs/perf/issue26-put/run.sh BEFORE_BUILD AFTER_BUILD ROUNDS > out.txt
# BEFORE_BUILD / AFTER_BUILD: build trees with mooncake-store/tools/{mooncake_master,mc_store_loop}
# (configure with -DMOONCAKE_BUILD_BENCH=ON). Each round runs, for every shape, before then after
# then redis, each on a fresh master (no metadata log: the default). WITH_OFF=1 adds a third
# run of the after build with MC_STORE_PUT_SLOTS=0 (label "off": the start path, same binary).
set -u
before=$1 after=$2 rounds=${3:-3}
ops1=${OPS1:-3000} ops8=${OPS8:-800}
port=$((52000 + RANDOM % 2000))
redis_port=$((port + 1))
redis-server --port "$redis_port" --save '' --appendonly no --daemonize no >/dev/null 2>&1 &
redis_pid=$!
trap 'kill $redis_pid 2>/dev/null' EXIT
sleep 0.5
run_ours() { # label build clients size batch ops
    local label=$1 b=$2/mooncake-store/tools
    "$b/mooncake_master" --port "$port" --http_metadata_server_port 0 --metrics_port 0 \
        >/dev/null 2>&1 &
    local mpid=$!
    sleep 0.3
    timeout 300 "$b/mc_store_loop" --master "127.0.0.1:$port" --clients "$3" --size "$4" \
        --batch "$5" --ops "$6" | sed "s/^/$label /"
    kill "$mpid"; wait "$mpid" 2>/dev/null
}
run_redis() { # clients size pipeline
    local n=$((${4:-3000} * $1))
    redis-benchmark -p "$redis_port" -c "$1" -P "$3" -d "$2" -n "$n" -t set,get -q 2>/dev/null |
        tr '\r' '\n' | grep -E '^(SET|GET): [0-9.]+ requests per second' | sed "s/^/redis clients=$1 size=$2 pipeline=$3 /"
}
echo "# $(date -u +%FT%TZ) $(nproc) cores, load: $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
    echo "## round $r load $(cut -d' ' -f1-3 /proc/loadavg)"
    for shape in "1 4096 1 $ops1" "1 65536 1 $ops1" "1 4096 32 $((ops1 * 4))" \
                 "8 4096 1 $ops8" "8 65536 1 $ops8"; do
        set -- $shape
        run_ours before "$before" "$@"
        run_ours after "$after" "$@"
        [ -n "${WITH_OFF:-}" ] && MC_STORE_PUT_SLOTS=0 run_ours off "$after" "$@"
        run_redis "$1" "$2" "$3" "$4"
    done
done
