#!/bin/bash
# VARIANTS="a b" ROUNDS= PROCS= DUR= W= rounds.sh ; variant dir ./v (build), prefixes MPFX_v HPFX_v DPFX_v, envs SERVER_ENV_v MENV_v HENV_v DENV_v
W=${W:-"put:4096:1,get_first:4096:1,get_cached:4096:1,put:65536:1,get_first:65536:1,get_cached:65536:1,put:4096:32,get_first:4096:32,get_cached:4096:32,put:65536:16,get_first:65536:16,get_cached:65536:16"}
for r in $(seq 1 ${ROUNDS:-2}); do for v in $VARIANTS; do for p in ${PROCS:-1 8}; do
  eval SERVER_ENV=\"\${SERVER_ENV_$v}\" DENV=\"\${DENV_$v}\" MENV=\"\${MENV_$v}\" HENV=\"\${HENV_$v}\" MPFX=\"\${MPFX_$v}\" HPFX=\"\${HPFX_$v}\" DPFX=\"\${DPFX_$v}\" SESSIONS=1 ./ab.sh ./$v $p $W ${DUR:-2} | sed "s/^/r$r $v /"
done; done; done
