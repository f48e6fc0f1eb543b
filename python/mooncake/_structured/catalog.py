"""``DataProtoCatalog``: which immutable DataProto fragment holds each field of each logical row.

Writers publish *fragments*: single-stage DataProto ref handles, one row per logical key. The
catalog maps ``(partition, key, field)`` to ``(fragment id, row)``, where the fragment id is
the stage's manifest key, and merges per-key tags (e.g. a status). Readers ``resolve`` an
ordered list of keys and fields into groups of fields that share the same row locations, plus
the handles to read them with. Only metadata lives here: moving the data is
``MooncakeBundleTransfer``'s job and object lifetime is the store's; a fragment is forgotten
once no (key, field) points at it. Not thread-safe: the host serializes calls.
"""

from __future__ import annotations

import copy


def _text(value, what):
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string")
    return value


def _names(values, what):
    if isinstance(values, (str, bytes)):
        raise ValueError(f"{what} must be a sequence of non-empty strings")
    try:
        names = tuple(values)
    except TypeError:
        raise ValueError(f"{what} must be a sequence of non-empty strings") from None
    if not names or not all(isinstance(n, str) and n for n in names):
        raise ValueError(f"{what} must be non-empty strings")
    if len(set(names)) != len(names):
        raise ValueError(f"{what} must be unique")
    return names


def _tag_list(tags, count):
    if tags is None:
        return None
    tags = list(tags)
    if len(tags) != count:
        raise ValueError("tags must have the same length as keys")
    for tag in tags:
        if not hasattr(tag, "items"):
            raise TypeError("tags must be mappings")
    return [copy.deepcopy(dict(t)) for t in tags]


def _fragment(handle, rows):
    """(fragment id, canonical handle, field names) of a single-stage handle of ``rows`` rows."""
    from mooncake._structured.handles import export_dataproto_ref, import_dataproto_ref

    ref = import_dataproto_ref(handle)
    if ref.batch_size != rows:
        raise ValueError(f"DataProto batch size {ref.batch_size!r} does not match {rows} "
                         "logical keys")
    if len(ref.stage_refs) != 1:
        raise ValueError("catalog fragments must contain exactly one DataProto stage")
    (stage_ref,) = ref.stage_refs.values()
    fragment_id = _text(stage_ref.manifest_key, "manifest_key")
    if not ref.field_index:
        raise ValueError("DataProto catalog fragments cannot be empty")
    return fragment_id, export_dataproto_ref(ref), tuple(ref.field_index)


class DataProtoCatalog:
    """Logical rows and fields -> immutable DataProto fragments (see the module doc)."""

    def __init__(self):
        self._rows = {}        # partition -> key -> {"tag": dict, "fields": {field: (fid, row)}}
        self._handles = {}     # fragment id -> canonical handle
        self._refs = {}        # fragment id -> number of (key, field) locations naming it

    def update(self, partition, keys, *, tags=None, handle=None):
        """Merge ``tags`` (one mapping per key) into the keys' tags and publish every field of
        ``handle`` (a single-stage handle with one row per key, in key order). Everything is
        checked before anything changes. Returns the keys, their merged tags and fields."""
        partition = _text(partition, "partition")
        keys = _names(keys, "keys")
        new_tags = _tag_list(tags, len(keys))
        fragment = None if handle is None else _fragment(handle, len(keys))
        if new_tags is None and fragment is None:
            raise ValueError("catalog update requires tags or a DataProto handle")
        if fragment is not None:
            fid, canonical, fields = fragment
            known = self._handles.get(fid)
            if known is not None and known != canonical:
                raise ValueError(f"DataProto fragment id collision: {fid!r}")
        rows = self._rows.setdefault(partition, {})
        if fragment is not None and fid not in self._handles:
            self._handles[fid] = canonical
            self._refs[fid] = 0
        for row, key in enumerate(keys):
            entry = rows.setdefault(key, {"tag": {}, "fields": {}})
            if new_tags is not None:
                entry["tag"].update(new_tags[row])
            if fragment is None:
                continue
            for name in fields:
                old = entry["fields"].get(name)
                entry["fields"][name] = (fid, row)
                if old is not None and old[0] == fid:
                    continue
                self._refs[fid] += 1
                if old is not None:
                    self._release(old[0])
        return {"keys": list(keys), "tags": [copy.deepcopy(rows[k]["tag"]) for k in keys],
                "fields": self._union(rows, keys)}

    def resolve(self, partition, keys, fields=None):
        """The read plan of ``fields`` (default: every field of the keys) for ``keys``, in
        order: ``field_groups`` (fields whose rows sit at the same ``(fragment, row)``
        locations, one per key) and the ``handles`` those locations name."""
        partition = _text(partition, "partition")
        keys = _names(keys, "keys")
        rows = self._rows.get(partition, {})
        missing = [k for k in keys if k not in rows]
        if missing:
            raise ValueError(f"keys were not found in partition {partition!r}: {missing}")
        wanted = list(_names(fields, "field names")) if fields is not None \
            else self._union(rows, keys)
        if not wanted:
            raise ValueError("requested keys do not contain any fields")
        for key in keys:
            absent = [f for f in wanted if f not in rows[key]["fields"]]
            if absent:
                raise ValueError(f"fields are not ready for key {key!r}: {absent}")
        groups = {}
        for name in wanted:
            groups.setdefault(tuple(rows[k]["fields"][name] for k in keys), []).append(name)
        fids = {fid for locations in groups for fid, _ in locations}
        return {
            "keys": list(keys),
            "tags": [copy.deepcopy(rows[k]["tag"]) for k in keys],
            "fields": wanted,
            "field_groups": [{"fields": names, "locations": list(locations)}
                             for locations, names in groups.items()],
            "handles": {fid: copy.deepcopy(self._handles[fid]) for fid in fids},
        }

    def list(self, partition=None):
        """``{partition: {key: tag}}`` of one partition (or all)."""
        if partition is not None:
            partition = _text(partition, "partition")
            names = [partition] if partition in self._rows else []
        else:
            names = list(self._rows)
        return {p: {k: copy.deepcopy(e["tag"]) for k, e in self._rows[p].items()} for p in names}

    def remove(self, partition, keys):
        """Forget logical keys (their fragments' objects stay in the store)."""
        partition = _text(partition, "partition")
        keys = _names(keys, "keys")
        rows = self._rows.get(partition)
        if rows is None:
            return
        for key in keys:
            entry = rows.pop(key, None)
            if entry is not None:
                for fid, _row in entry["fields"].values():
                    self._release(fid)
        if not rows:
            del self._rows[partition]

    @staticmethod
    def _union(rows, keys):
        return list(dict.fromkeys(f for k in keys for f in rows[k]["fields"]))

    def _release(self, fid):
        self._refs[fid] -= 1
        if self._refs[fid] == 0:
            del self._refs[fid]
            del self._handles[fid]
