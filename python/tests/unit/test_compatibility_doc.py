"""docs/compatibility.md stays true: every name its store, engine and top-level tables mark
"yes" exists in the installed package, and every name marked "no" does not."""

import importlib
import importlib.util
import pathlib
import re

import pytest

DOC = pathlib.Path(__file__).resolve().parents[3] / "docs" / "compatibility.md"

# Table heading -> the object whose attributes the table's names are.
TABLES = {
    "### Module names": ("mooncake.store", None),
    "### `MooncakeDistributedStore` methods": ("mooncake.store", "MooncakeDistributedStore"),
    "### Module attributes": ("mooncake.engine", None),
    "### `TransferEngine` methods": ("mooncake.engine", "TransferEngine"),
    "### `mooncake` (top level)": ("mooncake", None),
    "### `mooncake.mooncake_store_service`": ("mooncake.mooncake_store_service", None),
    "### `MooncakeStoreService` methods": ("mooncake.mooncake_store_service", "MooncakeStoreService"),
    "### `mooncake.reshard`": ("mooncake.reshard", None),
    "### `mooncake.reshard.contracts`": ("mooncake.reshard.contracts", None),
    "### `mooncake.reshard.geometry`": ("mooncake.reshard.geometry", None),
    "### `mooncake.reshard.weight`": ("mooncake.reshard.weight", None),
    "### `mooncake.ep`": ("mooncake.ep", None),
    "### `mooncake.ep.Buffer` methods": ("mooncake.ep", "Buffer"),
    "### `mooncake.ep.ElasticBuffer` methods": ("mooncake.ep", "ElasticBuffer"),
}


def _rows():
    table = None
    for line in DOC.read_text().splitlines():
        if line.startswith("#"):
            table = TABLES.get(line.strip())
            continue
        if table is None or not line.startswith("| "):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) < 2 or cells[1] not in ("yes", "no"):
            continue
        first = re.sub(r"\([^()]*\)", "", re.sub(r"\([^()]*\)", "", cells[0]))
        for token in re.findall(r"`([^`]+)`", first):
            name = re.match(r"[A-Za-z_][A-Za-z0-9_]*", token)
            if name and not name.group(0).startswith("__"):
                yield table, name.group(0), cells[1] == "yes"


ROWS = list(_rows())


def test_the_tables_were_found():
    seen = {t for t, _, _ in ROWS}
    assert len(seen) == len(TABLES)
    assert len(ROWS) > 150


@pytest.mark.parametrize("table,name,present", ROWS,
                         ids=[f"{t[1] or t[0]}.{n}" for t, n, _ in ROWS])
def test_row_matches_the_package(table, name, present):
    module, cls = table
    obj = importlib.import_module(module)
    if cls:
        obj = getattr(obj, cls)
    found = hasattr(obj, name)
    if not found and not cls:
        # A subpackage is an attribute of its package only once something imported it: look it
        # up as a module, so the answer does not depend on which tests ran before.
        found = importlib.util.find_spec(f"{module}.{name}") is not None
    assert found == present, f"{name}: the doc says {'yes' if present else 'no'}"
