#!/bin/bash
# usage: [SESSIONS=1] ab.sh BUILD_DIR PROCS WORKLOADS [DURATION]
# A master, a holder (1 GiB) and mc_store_bench --procs=PROCS from BUILD_DIR (a Release tree).
# SESSIONS=1 starts the master and the holder in sessions of their own (setsid), as the harness
# does (benchmarks/compare/procs.py, start_new_session); unset, all share this session.
# SERVER_ENV="NAME=VALUE ..." is the environment of the master and the holder only; MENV and HENV
# add to it for the master alone and the holder alone; DENV is the drivers' environment.
B=$1; P=$2; W=$3; D=${4:-3}
S=; [ "${SESSIONS:-0}" = 1 ] && S=setsid
PORT=$((20000 + RANDOM % 20000)); MP=$((PORT+1))
env $SERVER_ENV $MENV $S $MPFX $B/mooncake-store/tools/mooncake_master --port=$PORT --rpc_address=127.0.0.1 --metrics_port=$MP >./master.log 2>&1 &
MPID=$!
sleep 0.5
coproc H { env $SERVER_ENV $HENV $S $HPFX $B/benchmarks/mc_store_bench --role=holder --master=127.0.0.1:$PORT --segment_size=$((1024<<20)) 2>./holder.log; }
read -t 60 line <&${H[0]}
env $DENV $DPFX $B/benchmarks/mc_store_bench --master=127.0.0.1:$PORT --procs=$P --duration=$D --pool_bytes=$((384<<20)) --workloads=$W 2>./driver.err
exec {H[1]}>&-
kill $H_PID 2>/dev/null; kill $MPID; wait 2>/dev/null
