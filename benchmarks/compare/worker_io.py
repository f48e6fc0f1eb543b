"""What both benchmark workers share: one JSON result per line on stdout, and latency percentiles.

The workers run as scripts under either implementation's interpreter (ours, or the reference's
venv), so this is a plain sibling module with no package imports.
"""

import json
import sys


def emit(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def percentiles(lat_ns):
    lat = sorted(lat_ns)
    n = len(lat)
    if n == 0:
        return {}

    def pick(q):
        return lat[min(n - 1, int(q * n))] / 1e3

    return {"p50_us": pick(0.50), "p99_us": pick(0.99), "p999_us": pick(0.999),
            "min_us": lat[0] / 1e3, "max_us": lat[-1] / 1e3, "mean_us": sum(lat) / n / 1e3}
