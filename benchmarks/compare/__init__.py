"""Side-by-side comparison harness: ours against the reference Mooncake, Redis and the machine's
limits. Run ``python -m benchmarks.compare --help`` from the repository root."""
