#!/bin/bash
# cpuop.sh BUILD PROCS WORKLOAD: total CPU µs per op (master+holder+drivers over 1 s, ops = drivers' sendmsg), with context switches per op
"$(dirname "$0")"/pstat3.sh "$1" "$2" "$3" >/dev/null 2>&1
python3 - <<'P'
import re
t=0;cs=0;ops=0;y=0;rv=0
for w in ("master","holder","drivers"):
    s=open(f"/tmp/ps3-{w}.txt").read()
    g=lambda k: sum(float(m.replace(',','')) for m in re.findall(r"([\d,\.]+)\s+(?:msec\s+)?"+k,s))
    t+=g("task-clock"); cs+=g("context-switches")
    if w=="drivers": ops=g("syscalls:sys_enter_sendmsg")
    y+=g("syscalls:sys_enter_sched_yield"); rv+=g("syscalls:sys_enter_recvfrom")
print("ops %d cpu_us/op %.1f cs/op %.2f yield/op %.2f recv/op %.2f"%(ops,t*1000/ops,cs/ops,y/ops,rv/ops))
P
