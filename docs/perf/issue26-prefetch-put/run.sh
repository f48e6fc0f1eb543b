#!/bin/bash
# run.sh BASE_TREE NEW_TREE [ROUNDS]: mc_master_bench from two Release build trees, alternating.
# Each round: the whole bench at batch 32 (its fill is batched put_start + put_end of 1M objects;
# then exist, get_replica_list, slot_put and slot_batch_put at 1 and 8 clients), then the fill at
# batch 1000 (the other phases short).
for r in $(seq 1 "${3:-3}"); do
  for v in "$1" "$2"; do
    echo "### round $r batch 32 tree $v"
    "$v"/mooncake-store/tools/mc_master_bench --objects=1000000 --batch=32 --seconds=2 --clients=1,8 2>&1
  done
  for v in "$1" "$2"; do
    echo "### round $r batch 1000 tree $v"
    "$v"/mooncake-store/tools/mc_master_bench --objects=1000000 --batch=1000 --seconds=1 --clients=1 2>&1 |
      grep -E "^fill|RSS"
  done
done
