#!/bin/bash
W="put:65536:16,get_first:65536:16,get_cached:65536:16,put:4096:32"
for r in $(seq 1 ${ROUNDS:-2}); do for v in $VARIANTS; do for p in 1 8; do
  ./ab.sh ./$v $p $W ${DUR:-2} | sed "s/^/r$r $v /"
done; done; done
