"""EngramStore: one model layer's n-gram embedding tables kept in the store, gathered by row.

The reference's ``EngramStore``/``EngramStoreConfig`` (its store module). Layer ``L`` keeps one
object per head ``h`` under the key ``engram:l<L>:h<h>``: a float32 table of
``table_vocab_sizes[h]`` rows of ``embedding_dim`` values. ``lookup`` reads exactly the rows it
needs with one ranged read per head into the output array (registered for the read), so a
lookup moves B*L*H rows, never whole tables.
"""

try:
    import numpy as _np
except ImportError as exc:  # the tables are NumPy arrays: no NumPy, no EngramStore
    raise ImportError("mooncake.store.EngramStore needs NumPy: pip install numpy") from exc

from mooncake._store import STORE_ERRORS as _STORE_ERRORS

_FLOAT = _np.dtype(_np.float32)
_OBJECT_NOT_FOUND = dict(_STORE_ERRORS)["OBJECT_NOT_FOUND"]


class EngramStoreConfig:
    """The tables' geometry: ``table_vocab_sizes`` (rows per head) and ``embedding_dim``."""

    def __init__(self):
        self.table_vocab_sizes = []
        self.embedding_dim = 0

    def __repr__(self):
        return (f"EngramStoreConfig(table_vocab_sizes={self.table_vocab_sizes!r}, "
                f"embedding_dim={self.embedding_dim!r})")


def _positive_int(value, what):
    if isinstance(value, bool) or not isinstance(value, (int, _np.integer)) or value <= 0:
        raise ValueError(f"EngramStoreConfig.{what} must be a positive integer, got {value!r}")
    return int(value)


class EngramStore:
    """``EngramStore(layer_id, config, store=None)``; without a store only the metadata
    getters work (``populate``/``lookup``/``remove_from_store`` raise RuntimeError)."""

    def __init__(self, layer_id, config, store=None):
        if isinstance(layer_id, bool) or not isinstance(layer_id, (int, _np.integer)):
            raise TypeError(f"layer_id must be an int, got {type(layer_id).__name__}")
        if not isinstance(config, EngramStoreConfig):
            raise TypeError("config must be an EngramStoreConfig")
        sizes = list(config.table_vocab_sizes)
        if not sizes:
            raise ValueError("EngramStoreConfig.table_vocab_sizes must not be empty")
        self._vocab = [_positive_int(v, "table_vocab_sizes") for v in sizes]
        self._dim = _positive_int(config.embedding_dim, "embedding_dim")
        if store is not None:
            from mooncake._store import MooncakeDistributedStore

            if not isinstance(store, MooncakeDistributedStore):
                raise TypeError("store must be a MooncakeDistributedStore, got "
                                f"{type(store).__name__}")
        self._store = store
        self._keys = [f"engram:l{int(layer_id)}:h{h}" for h in range(len(self._vocab))]

    def get_table_vocab_sizes(self):
        return list(self._vocab)

    def get_store_keys(self):
        return list(self._keys)

    def get_num_heads(self):
        return len(self._vocab)

    def get_embedding_dim(self):
        return self._dim

    def _need_store(self, what):
        if self._store is None:
            raise RuntimeError(f"EngramStore.{what} needs a store: construct it with store=")
        return self._store

    def populate(self, embedding_buffers):
        """Puts one [vocab_size, embedding_dim] float32 table per head. Refuses a layer whose
        keys already exist (remove it first); a failed put leaves no key of this call behind."""
        store = self._need_store("populate")
        tables = list(embedding_buffers)
        if len(tables) != len(self._keys):
            raise RuntimeError(f"embedding_buffers holds {len(tables)} tables, the layer has "
                               f"{len(self._keys)} heads")
        arrays = []
        for h, table in enumerate(tables):
            if not isinstance(table, _np.ndarray):
                raise RuntimeError("embedding_buffers must be NumPy arrays")
            if table.shape != (self._vocab[h], self._dim):
                raise RuntimeError(f"table {h} has shape {table.shape}, expected "
                                   f"({self._vocab[h]}, {self._dim})")
            arrays.append(_np.ascontiguousarray(table, dtype=_FLOAT))
        exists = store.batch_is_exist(self._keys)
        for key, e in zip(self._keys, exists):
            if e < 0:
                raise RuntimeError(f"cannot query key {key!r} before populate (rc={e})")
            if e:
                raise RuntimeError(f"key {key!r} already exists: remove the layer first")
        ptrs = [a.ctypes.data for a in arrays]
        registered = []
        try:
            for a, p in zip(arrays, ptrs):
                rc = store.register_buffer(p, a.nbytes)
                if rc != 0:
                    raise RuntimeError(f"register_buffer failed (rc={rc})")
                registered.append(p)
            results = store.batch_put_from(self._keys, ptrs, [a.nbytes for a in arrays])
        finally:
            for p in registered:
                store.unregister_buffer(p)
        if any(r != 0 for r in results):
            for key, r in zip(self._keys, results):
                if r == 0:
                    store.remove(key, True)
            raise RuntimeError(f"populate failed (put results {list(results)})")

    def lookup(self, row_ids):
        """Rows by id: ``row_ids`` is [B][L][H] (nested lists or an int array); returns a
        float32 array [B, L, H, D]. An id outside its head's table raises RuntimeError."""
        store = self._need_store("lookup")
        ids = _np.asarray(row_ids)
        if ids.size == 0:
            raise RuntimeError("row_ids must not be empty")
        if ids.ndim != 3:
            raise RuntimeError(f"row_ids must have shape [B, L, H], got {ids.ndim} dimensions")
        if not _np.issubdtype(ids.dtype, _np.integer):
            raise RuntimeError(f"row_ids must be integers, got {ids.dtype}")
        heads = len(self._vocab)
        if ids.shape[2] != heads:
            raise RuntimeError(f"row_ids last dimension is {ids.shape[2]}, the layer has "
                               f"{heads} heads")
        ids = ids.astype(_np.int64, copy=False)
        limits = _np.asarray(self._vocab, dtype=_np.int64)
        bad = (ids < 0) | (ids >= limits)
        if bad.any():
            b, l, h = (int(i) for i in _np.argwhere(bad)[0])
            raise RuntimeError(f"row id {int(ids[b, l, h])} at [{b}, {l}, {h}] is outside "
                               f"head {h}'s {self._vocab[h]} rows")
        out = _np.empty(ids.shape + (self._dim,), dtype=_FLOAT)
        row = self._dim * _FLOAT.itemsize
        flat = ids.reshape(-1, heads)
        slots = _np.arange(flat.shape[0], dtype=_np.int64) * heads
        dst = [((slots + h) * row).tolist() for h in range(heads)]
        src = [(flat[:, h] * row).tolist() for h in range(heads)]
        sizes = [[row] * flat.shape[0] for _ in range(heads)]
        base = out.ctypes.data
        rc = store.register_buffer(base, out.nbytes)
        if rc != 0:
            raise RuntimeError(f"register_buffer failed (rc={rc})")
        try:
            results = store.get_into_ranges([base], [self._keys], [dst], [src], [sizes])[0]
        finally:
            store.unregister_buffer(base)
        for key, per_key in zip(self._keys, results):
            if any(n != row for n in per_key):
                raise RuntimeError(f"EngramStore lookup failed reading {key!r} "
                                   f"(rc={min(per_key)}): populate the layer first")
        return out

    def remove_from_store(self, force=False):
        """Removes the layer's tables; returns how many were removed (missing keys are not
        counted). Raises RuntimeError on any other failure."""
        store = self._need_store("remove_from_store")
        removed, first_error = 0, 0
        for key in self._keys:
            rc = store.remove(key, bool(force))
            if rc == 0:
                removed += 1
            elif rc != _OBJECT_NOT_FOUND and first_error == 0:
                first_error = rc
        if first_error:
            raise RuntimeError(f"remove_from_store failed, rc={first_error}")
        return removed
