"""mooncake.store.EngramStore against a real master: a layer's embedding tables live in another
process's segment and a lookup gathers exactly the rows asked for; the layer's key names, the
refusals (existing layer, wrong shapes, ids out of range, a layer never populated) and remove."""

import numpy as np
import pytest
from store_helpers import Master, Worker

from mooncake.store import EngramStore, EngramStoreConfig, MooncakeDistributedStore

MiB = 1 << 20


@pytest.fixture(scope="module")
def store():
    """A pure client here; the tables land in the storage worker's segment (another process)."""
    master = Master()
    peer = Worker()
    s = MooncakeDistributedStore()
    try:
        peer.setup(master, segment=32 * MiB)
        assert s.setup("127.0.0.1", "P2PHANDSHAKE", 0, 4 * MiB, "tcp", "", master.addr) == 0
        yield s
    finally:
        s.close()
        peer.close()
        master.stop()


def config(vocab=(5, 7, 3), dim=4):
    c = EngramStoreConfig()
    c.table_vocab_sizes = list(vocab)
    c.embedding_dim = dim
    return c


def tables(vocab=(5, 7, 3), dim=4, seed=1):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((v, dim)).astype(np.float32) for v in vocab]


layer_ids = iter(range(1000, 2000))


@pytest.fixture
def layer(store):
    made = []

    def make(**kw):
        e = EngramStore(next(layer_ids), config(**kw), store=store)
        made.append(e)
        return e

    yield make
    for e in made:
        e.remove_from_store(force=True)


def test_metadata_and_keys_without_a_store():
    e = EngramStore(7, config())
    assert e.get_num_heads() == 3 and e.get_embedding_dim() == 4
    assert e.get_table_vocab_sizes() == [5, 7, 3]
    assert e.get_store_keys() == ["engram:l7:h0", "engram:l7:h1", "engram:l7:h2"]
    for call in (lambda: e.populate(tables()), lambda: e.lookup([[[0, 0, 0]]]),
                 lambda: e.remove_from_store()):
        with pytest.raises(RuntimeError, match="needs a store"):
            call()


@pytest.mark.parametrize("vocab,dim,exc", [((), 4, ValueError), ((3, 0), 4, ValueError),
                                           ((3,), 0, ValueError), ((3,), -2, ValueError)])
def test_bad_config(vocab, dim, exc):
    with pytest.raises(exc):
        EngramStore(1, config(vocab, dim))


def test_bad_arguments():
    with pytest.raises(TypeError, match="EngramStoreConfig"):
        EngramStore(1, {"table_vocab_sizes": [3], "embedding_dim": 2})
    with pytest.raises(TypeError, match="MooncakeDistributedStore"):
        EngramStore(1, config(), store=object())
    with pytest.raises(TypeError, match="layer_id"):
        EngramStore("1", config())


def test_lookup_gathers_the_stored_rows(layer, store):
    e = layer()
    t = tables()
    e.populate(t)
    assert all(store.is_exist(k) == 1 for k in e.get_store_keys())
    ids = np.array([[[4, 6, 2], [0, 0, 0], [1, 3, 1]], [[2, 5, 0], [4, 6, 2], [3, 1, 2]]])
    out = e.lookup(ids)
    assert out.shape == (2, 3, 3, 4) and out.dtype == np.float32
    for b in range(2):
        for pos in range(3):
            for h in range(3):
                np.testing.assert_array_equal(out[b, pos, h], t[h][ids[b, pos, h]])
    np.testing.assert_array_equal(e.lookup(ids.tolist()), out)  # nested lists: same rows
    np.testing.assert_array_equal(e.lookup(ids.astype(np.int32)), out)


def test_populate_refuses_an_existing_layer_and_bad_tables(layer):
    e = layer()
    t = tables()
    with pytest.raises(RuntimeError, match="shape"):
        e.populate([t[0][:-1], t[1], t[2]])
    with pytest.raises(RuntimeError, match="3 heads"):
        e.populate(t[:2])
    with pytest.raises(RuntimeError, match="NumPy"):
        e.populate([t[0].tolist(), t[1], t[2]])
    assert e.remove_from_store(force=True) == 0  # nothing was put by the refused calls
    e.populate(t)
    with pytest.raises(RuntimeError, match="already exists"):
        e.populate(tables(seed=2))
    np.testing.assert_array_equal(e.lookup([[[1, 1, 1]]])[0, 0, 1], t[1][1])  # first one kept


def test_lookup_refusals(layer):
    e = layer()
    with pytest.raises(RuntimeError, match="populate the layer first"):
        e.lookup([[[0, 0, 0]]])
    e.populate(tables())
    with pytest.raises(RuntimeError, match="empty"):
        e.lookup([])
    with pytest.raises(RuntimeError, match="3 heads"):
        e.lookup(np.zeros((1, 1, 2), dtype=np.int64))
    with pytest.raises(RuntimeError, match="outside head 1"):
        e.lookup([[[0, 7, 0]]])
    with pytest.raises(RuntimeError, match="outside head 0"):
        e.lookup([[[-1, 0, 0]]])
    with pytest.raises(RuntimeError, match="B, L, H"):
        e.lookup([[0, 0, 0]])
    with pytest.raises(RuntimeError, match="integers"):
        e.lookup([[[0.5, 0, 0]]])


def test_remove_counts_the_tables(layer, store):
    e = layer(vocab=(2, 2), dim=3)
    e.populate(tables((2, 2), 3))
    assert e.remove_from_store(force=True) == 2
    assert all(store.is_exist(k) == 0 for k in e.get_store_keys())
    assert e.remove_from_store(force=True) == 0
