"""mooncake.ep without torch: the package imports, and its size hints are the reference's numbers.

The expected sizes are derived here a second way, from the reference's buffer layouts (where each
region starts and ends), not from its closed-form sums, and pinned for a few named shapes.
"""

import itertools
import subprocess
import sys

import pytest

import mooncake.ep as ep


def _low_latency_layout_end(max_tokens, hidden, num_experts):
    # Two buffer pairs, each: send signals, receive signals, send data, receive data. A slot is
    # two int4 (32 bytes) of metadata and a bf16 row; a signal is one int per expert.
    signal, data = num_experts * 4, num_experts * max_tokens * (32 + 2 * hidden)
    end = 0
    for pair in range(2):
        base = pair * 2 * (signal + data)
        for start, size in ((0, signal), (signal, signal), (2 * signal, data), (2 * signal + data, data)):
            end = max(end, base + start + size)
    return end


_WORKSPACE_TABLES = [  # (entries, bytes each) of the elastic workspace, in the reference's order
    (16, 8 + 2 * 1024 * 4),  # barrier tags: a counter and two int per rank
    (1024 + 2048, 8),
    (1024 * 2, 8),
    (2048 * 2, 8),
    (1024, 4),
    (1024 * 2, 4),
    (2048 * 2, 4),
    (1024 * 8 * 160, 8),  # per rank and channel
    (1024 * 8 * 160, 4),
    (4, 8),
    (33 * 1024, 4),  # in-flight all-gather/reduce-scatter sessions + 1, per rank
]


def _elastic(ranks, tokens, hidden, topk, fp8, hybrid, multi):
    ws = sum(n * b for n, b in _WORKSPACE_TABLES)
    ws = -(-ws // 32) * 32
    k = max(1, topk)
    row = -(-hidden * (1 if fp8 else 2) // 32) * 32 + (-(-(-(-hidden // 128) * 4) // 32) * 32 if fp8 else 0)
    meta = -(-(k * 8 + (k + 1) * 4) // 32) * 32
    slots = ranks * tokens * k
    dispatch = slots * (row + meta) * 2
    total = dispatch * (1 + (3 if multi else 4))
    return 2 * ws + (2 if hybrid and ranks > 1 else 1) * total


def test_low_latency_hint_matches_the_layout_over_a_grid():
    for tokens, hidden, ranks, experts in itertools.product([0, 1, 128, 4096], [128, 2048, 7168], [1, 2, 8, 64],
                                                            [8, 64, 256, 288]):
        assert ep.get_ep_buffer_size_hint(tokens, hidden, ranks, experts) == _low_latency_layout_end(tokens, hidden, experts)


def test_elastic_hint_matches_the_layout_over_a_grid():
    for shape in itertools.product([1, 2, 8, 64], [0, 1, 128, 4096], [128, 2048, 7168], [0, 1, 8],
                                   [False, True], [False, True], [False, True]):
        assert ep.calculate_elastic_buffer_size(*shape) == _elastic(*shape), shape


def test_pinned_values():
    # DeepSeek-V3-like shapes: 128 tokens per rank, hidden 7168, 256 experts over 8 ranks.
    assert ep.get_ep_buffer_size_hint(128, 7168, 8, 256) == 4 * 256 * 4 + 4 * 256 * 128 * (32 + 7168 * 2)
    assert ep.get_ep_buffer_size_hint(128, 7168, 8, 256) == 1_883_246_592
    assert ep.calculate_elastic_buffer_size(2, 8, 128, 3, False, True, True) == 32_440_640
    assert ep.calculate_elastic_buffer_size(1, 0, 128, 0, False, True, True) == 2 * 16_097_440


def test_bad_hint_arguments():
    with pytest.raises(ValueError, match="num_ranks must be >= 1"):
        ep.get_ep_buffer_size_hint(8, 128, 0, 8)
    with pytest.raises(TypeError, match="hidden must be an int"):
        ep.get_ep_buffer_size_hint(8, 128.0, 2, 8)
    with pytest.raises(TypeError, match="num_topk must be an int"):
        ep.calculate_elastic_buffer_size(2, 8, 128, True, False, True, True)
    with pytest.raises(ValueError, match="num_max_tokens_per_rank must be >= 0"):
        ep.calculate_elastic_buffer_size(2, -8, 128, 2, False, True, True)


def test_package_imports_without_torch():
    code = (
        "import sys; sys.modules['torch'] = None\n"
        "import mooncake.ep as ep\n"
        "assert ep.get_ep_buffer_size_hint(1, 128, 1, 1) > 0\n"
        "try:\n    ep.Buffer\nexcept ImportError as e:\n    print('ImportError:', e)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "ImportError: mooncake.ep.Buffer needs torch" in r.stdout
