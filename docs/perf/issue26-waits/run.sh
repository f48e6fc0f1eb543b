#!/bin/bash
# usage: run.sh EXPERIMENT > raw/NAME.txt   (from a directory holding ab.sh and table.py of
# ../issue26-spin150 and a link `cur` to a Release build tree)
# Alternates the variants of one experiment, 3 rounds, each at 1 and 8 client processes, and
# prefixes each line with its round and variant for table.py. Every variant runs the same build;
# they differ only in the environment of the driver (the client processes), the master or the
# holder:
#   pipeline  cur | p1m: the drivers with MC_TCP_PIPELINE_BYTES=1048576 (batched workloads)
#   servers   cur | srv0: master and holder with MC_TCP_REPLY_SPIN_US=0 | all0: drivers too
#   one       cur | m0: the master alone with MC_TCP_REPLY_SPIN_US=0 | h0: the holder alone
#   convoy    8 processes' single cached 4 KiB gets, 3 s, six times with h0 and four with cur
SINGLE=put:4096:1,get_first:4096:1,get_cached:4096:1,put:65536:1,get_first:65536:1,get_cached:65536:1
BATCHED=put:4096:32,get_first:4096:32,get_cached:4096:32,put:65536:16,get_first:65536:16,get_cached:65536:16
NOSPIN=MC_TCP_REPLY_SPIN_US=0
export SESSIONS=1
one() { # ROUND VARIANT PROCS WORKLOADS DURATION [DRIVER_ENV...]
    local r=$1 v=$2 p=$3 w=$4 d=$5
    shift 5
    env "$@" ./ab.sh ./cur "$p" "$w" "$d" | sed "s/^/r$r $v /"
}
case $1 in
pipeline)
    for r in 1 2 3; do for v in cur p1m; do for p in 1 8; do
        if [ $v = p1m ]; then one $r $v $p $BATCHED 2 MC_TCP_PIPELINE_BYTES=1048576
        else one $r $v $p $BATCHED 2 X=; fi
    done; done; done ;;
servers)
    for r in 1 2 3; do for v in cur srv0 all0; do for p in 8 1; do
        case $v in
        cur) SERVER_ENV='' one $r $v $p $SINGLE 2 X= ;;
        srv0) SERVER_ENV=$NOSPIN one $r $v $p $SINGLE 2 X= ;;
        all0) SERVER_ENV=$NOSPIN one $r $v $p $SINGLE 2 $NOSPIN ;;
        esac
    done; done; done ;;
one)
    for r in 1 2 3; do for v in cur m0 h0; do for p in 8 1; do
        case $v in
        cur) MENV='' HENV='' one $r $v $p $SINGLE 2 X= ;;
        m0) MENV=$NOSPIN HENV='' one $r $v $p $SINGLE 2 X= ;;
        h0) MENV='' HENV=$NOSPIN one $r $v $p $SINGLE 2 X= ;;
        esac
    done; done; done ;;
convoy)
    for i in 1 2 3 4 5 6; do HENV=$NOSPIN one $i h0 8 get_cached:4096:1 3 X=; done
    for i in 1 2 3 4; do HENV='' one $i cur 8 get_cached:4096:1 3 X=; done ;;
*)
    sed -n 2,12p "$0"
    exit 2 ;;
esac
