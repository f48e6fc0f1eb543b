#!/bin/bash
# pstat3.sh BUILD PROCS WORKLOAD: per party (master, holder, drivers), the CPU time, context
# switches and count of each system call over 1 s in the middle of a run (start.sh).
B=$1; P=$2; W=$3
. "$(dirname "$0")/start.sh"
for who in master:$MPID holder:$HP drivers:$DPIDS; do
  perf stat -e task-clock,context-switches,syscalls:sys_enter_recvfrom,syscalls:sys_enter_sendmsg,syscalls:sys_enter_sendto,syscalls:sys_enter_sched_yield,syscalls:sys_enter_futex,syscalls:sys_enter_poll,syscalls:sys_enter_ppoll,syscalls:sys_enter_epoll_wait,syscalls:sys_enter_read,syscalls:sys_enter_write,syscalls:sys_enter_writev,syscalls:sys_enter_clock_gettime,syscalls:sys_enter_recvmsg,syscalls:sys_enter_nanosleep,syscalls:sys_enter_clock_nanosleep -p ${who#*:} -o /tmp/ps3-${who%%:*}.txt -- sleep 1 &
done
finish
for w in master holder drivers; do echo "== $w"; grep -E "task-clock|context|sys_enter" /tmp/ps3-$w.txt | awk '$1!="0" {print $1, $2}' | sort -t' ' -k1,1 -rn | head -14; done
