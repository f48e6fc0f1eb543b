#!/bin/bash
# harness layout: master and holder in their own sessions (abs.sh)
W=${W:-"put:4096:1:heap,get_cached:4096:1:heap,get_first:4096:1:heap,put:4096:32:heap,put:65536:16:heap,get_cached:65536:1:heap"}
for r in $(seq 1 ${ROUNDS:-2}); do for v in $VARIANTS; do for p in ${PROCS:-1 8}; do
  ./abs.sh ./$v $p $W ${DUR:-1.5} | sed "s/^/r$r $v /"
done; done; done
