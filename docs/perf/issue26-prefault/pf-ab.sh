#!/bin/bash
# 1 process: the harness's sequence (small sizes, then 1 and 16 MiB); 8 processes: the 12 small workloads
W1="put:4096:1,get_cached:4096:1,get_first:4096:1,put:4096:32,get_cached:4096:32,get_first:4096:32,put:65536:1,get_cached:65536:1,get_first:65536:1,put:65536:16,get_cached:65536:16,get_first:65536:16,put:1048576:1:heap,get_cached:1048576:1:heap,get_first:1048576:1:heap,put:1048576:1:zc,put:16777216:1:heap,put:16777216:1:zc"
export SESSIONS=1 SERVER_ENV_sync="MC_STORE_SEGMENT_PREFAULT=sync" SERVER_ENV_off="MC_STORE_SEGMENT_PREFAULT=off"
for r in 1 2; do
  VARIANTS="$VARIANTS" ROUNDS=1 PROCS=1 W="$W1" ./rounds.sh | sed "s/^r1 /r$r /"
  VARIANTS="$VARIANTS" ROUNDS=1 PROCS=8 ./rounds.sh | sed "s/^r1 /r$r /"
done
