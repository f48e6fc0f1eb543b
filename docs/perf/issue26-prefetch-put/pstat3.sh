#!/bin/bash
# pstat3.sh BUILD PROCS WORKLOAD : per-party counts of each syscall for 1 s mid-run
B=$1; P=$2; W=$3
PORT=$((20000 + RANDOM % 20000)); MP=$((PORT+1))
env $SERVER_ENV $MENV setsid $B/mooncake-store/tools/mooncake_master --port=$PORT --rpc_address=127.0.0.1 --metrics_port=$MP >./master.log 2>&1 &
MPID=$!
sleep 0.5
coproc H { env $SERVER_ENV $HENV setsid $B/benchmarks/mc_store_bench --role=holder --master=127.0.0.1:$PORT --segment_size=$((1024<<20)) 2>./holder.log; }
read -t 60 line <&${H[0]}
env $DENV $B/benchmarks/mc_store_bench --master=127.0.0.1:$PORT --procs=$P --duration=4 --pool_bytes=$((384<<20)) --workloads=$W 2>./driver.err > /tmp/ps3-out.txt &
DP=$!
sleep 2
D=$(pgrep -d, -f "mc_store_bench --master=127.0.0.1:$PORT")
HP=$(pgrep -f "role=holder --master=127.0.0.1:$PORT" | tail -1); for who in master:$MPID holder:$HP drivers:$D; do
  perf stat -e task-clock,context-switches,syscalls:sys_enter_recvfrom,syscalls:sys_enter_sendmsg,syscalls:sys_enter_sendto,syscalls:sys_enter_sched_yield,syscalls:sys_enter_futex,syscalls:sys_enter_poll,syscalls:sys_enter_ppoll,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_read,syscalls:sys_enter_write,syscalls:sys_enter_writev,syscalls:sys_enter_clock_gettime,syscalls:sys_enter_recvmsg,syscalls:sys_enter_nanosleep,syscalls:sys_enter_clock_nanosleep -p ${who#*:} -o /tmp/ps3-${who%%:*}.txt -- sleep 1 &
done
wait $DP
exec {H[1]}>&-
kill $H_PID 2>/dev/null; kill $MPID; wait 2>/dev/null
cat /tmp/ps3-out.txt
for w in master holder drivers; do echo "== $w"; grep -E "task-clock|context|sys_enter" /tmp/ps3-$w.txt | awk '$1!="0" {print $1, $2}' | sort -t' ' -k1,1 -rn | head -14; done
