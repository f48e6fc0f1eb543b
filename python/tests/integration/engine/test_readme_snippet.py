"""The README's Transfer Engine snippet runs as written (a newcomer pastes it first)."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[4] / "README.md"


def test_readme_transfer_engine_snippet_runs():
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    snippet = next(b for b in blocks if "TransferEngine()" in b)
    exec(compile(snippet, "README.md (TransferEngine snippet)", "exec"), {})
