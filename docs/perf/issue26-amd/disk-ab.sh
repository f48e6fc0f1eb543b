#!/bin/bash
# disk-ab.sh ROUNDS : disk_tier_bench 64 KiB, one reader, alternating the node's spin off / on
# (XX_NODESPIN), binaries from /work/ab/bin-wip
for r in $(seq 1 $1); do for v in off on; do
  E=; [ $v = on ] && E="XX_NODESPIN=1"
  env $E MOONCAKE_BIN_DIR=/work/ab/bin-wip /work/venv-h/bin/python /work/main/benchmarks/disk_tier_bench.py --dir /work/main/build --sizes 64kb --threads ${THREADS:-1} --rounds 1 --total 256mb 2>&1 | grep -E 'round 1|p50' | sed "s/^/r$r $v /"
done; done
