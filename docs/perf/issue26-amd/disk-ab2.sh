#!/bin/bash
# disk-ab2.sh ROUNDS : disk_tier_bench 64 KiB, one reader, alternating the installed binaries
# (base: d4b6f92) and the build tree's (wip: the node's read server spins after a reply)
for r in $(seq 1 $1); do for v in base wip; do
  E=; [ $v = wip ] && E="MOONCAKE_BIN_DIR=/work/ab/bin-wip"
  env $E /work/venv-h/bin/python /work/main/benchmarks/disk_tier_bench.py --dir /work/main/build --sizes 64kb --threads ${THREADS:-1} --rounds 1 --total 256mb 2>&1 | grep -E 'round 1|p50' | sed "s/^/r$r $v /"
done; done
