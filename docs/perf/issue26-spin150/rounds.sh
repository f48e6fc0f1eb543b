#!/bin/bash
# usage: VARIANTS="v0 s150" [ROUNDS=2] [PROCS="1 8"] [DUR=2] [W=...] [SESSIONS=1] rounds.sh
# Alternates the variants (build trees ./v0, ./s150, ...) A B A B, each at every process count;
# prefixes each line with its round and variant, for table.py. A variant's directory may be a link
# to another's build: SERVER_ENV_<variant>="NAME=VALUE ..." then sets its master's and holder's environment,
# MENV_<variant> the master's alone, HENV_<variant> the holder's alone, DENV_<variant> the drivers' (each after MENV, HENV, DENV).
W=${W:-"put:4096:1,get_first:4096:1,get_cached:4096:1,put:65536:1,get_first:65536:1,get_cached:65536:1,put:4096:32,get_first:4096:32,get_cached:4096:32,put:65536:16,get_first:65536:16,get_cached:65536:16"}
for r in $(seq 1 ${ROUNDS:-2}); do for v in $VARIANTS; do for p in ${PROCS:-1 8}; do
  eval SERVER_ENV=\"\${SERVER_ENV_$v}\" DENV=\"$DENV \${DENV_$v}\" MENV=\"$MENV \${MENV_$v}\" HENV=\"$HENV \${HENV_$v}\" ./ab.sh ./$v $p $W ${DUR:-2} | sed "s/^/r$r $v /"
done; done; done
