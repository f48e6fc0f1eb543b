#!/bin/bash
# usage: user-latency.sh HOT_KEYS   (in the venv of an install: mooncake_master and python on PATH)
# A master and a holder (sessions of their own), then user-latency.py with renewal on and off,
# alternating, 3 rounds of 6 s.
cd "$(dirname "$0")"
HOT=$1; PORT=$((20000 + RANDOM % 20000))
setsid mooncake_master --port=$PORT --rpc_address=127.0.0.1 --metrics_port=$((PORT+1)) > /tmp/ul-master.log 2>&1 &
M=$!
sleep 0.5
coproc H { setsid python user-latency-holder.py $PORT 2>/tmp/ul-holder.log; }
read -t 60 line <&${H[0]}
for r in 1 2 3; do
  MC_STORE_CACHE_RENEW=1 python user-latency.py $PORT $HOT 6 2>/dev/null
  MC_STORE_CACHE_RENEW=0 python user-latency.py $PORT $HOT 6 2>/dev/null
done
kill $H_PID $M 2>/dev/null; pkill -f "user-latency-holder.py $PORT"; wait 2>/dev/null
