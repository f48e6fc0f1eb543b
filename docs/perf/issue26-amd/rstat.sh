#!/bin/bash
# rstat.sh CLIENTS TEST SIZE : redis-server and one redis-benchmark -c CLIENTS process; per-party
# CPU, context switches and system calls for 1 s in the middle of the run (perf stat -p), and the
# commands the server processed in that second
C=$1; T=$2; S=$3
PORT=$((20000 + RANDOM % 20000))
setsid redis-server --port $PORT --save '' --appendonly no --daemonize no >/tmp/rs.log 2>&1 &
RP=$!
sleep 0.5
redis-benchmark -p $PORT -c $C -P 1 -d $S -t $T -n 5000000 -r 100000 -q > /tmp/rb.out 2>&1 &
BP=$!
sleep 1.5
BPID=$(pgrep -f "redis-benchmark -p $PORT")
n0=$(redis-cli -p $PORT info stats | tr -d '\r' | awk -F: '/total_commands_processed/{print $2}')
perf stat -e task-clock,context-switches,raw_syscalls:sys_enter -p $RP -o /tmp/rst-server.txt -- sleep 1 &
P1=$!
perf stat -e task-clock,context-switches,raw_syscalls:sys_enter -p $BPID -o /tmp/rst-bench.txt -- sleep 1 &
P2=$!
wait $P1 $P2
n1=$(redis-cli -p $PORT info stats | tr -d '\r' | awk -F: '/total_commands_processed/{print $2}')
kill $BP 2>/dev/null; kill $RP; wait 2>/dev/null
echo "commands in the window: $((n1 - n0))"
for w in server bench; do echo "== $w"; grep -E "task-clock|context|sys_enter" /tmp/rst-$w.txt | awk '{print $1, $2}'; done
