#!/usr/bin/env python3
"""Writes the seed corpora (fuzz/corpus/<harness>/) and dictionaries (fuzz/<harness>.dict).

Seeds are small valid messages of every type each harness decodes, plus the edge cases its
decoder must refuse, so a short run starts from inside the protocol instead of from random bytes
(the descriptor harness: coverage 23 from an empty corpus). The output is deterministic:

    python3 fuzz/make_seeds.py            # rewrite everything
    python3 fuzz/make_seeds.py --check    # exit 1 when the files on disk differ

Layouts follow the C headers: mooncake-common/include/mooncake/common/frame.h (the 24-byte
header), mooncake-transfer-engine/src/proto.h (TE RPC), mooncake-store/src/proto/master_proto.h
(master RPC), mooncake-transfer-engine/src/transports/shm_wire.h (shm hand-off, native layout),
mooncake-store/src/disk/bucket_record.h (disk tier bucket records).
"""
import json
import os
import struct
import sys
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))

# --- framing ------------------------------------------------------------------------------------
MAGIC = 0x314B434D
F_REPLY = 0x1
F_ERROR = 0x2


def header(typ, body_len, flags=0, request_id=1, magic=MAGIC, version=1):
    return struct.pack("<IBBHQQ", magic, version, typ, flags, request_id, body_len)


def frame(typ, body, flags=0, request_id=1):
    return header(typ, len(body), flags, request_id) + body


def u8(v):
    return struct.pack("<B", v)


def u32(v):
    return struct.pack("<I", v)


def i32(v):
    return struct.pack("<i", v)


def u64(v):
    return struct.pack("<Q", v)


def i64(v):
    return struct.pack("<q", v)


def s(b):
    """A length-prefixed (u32) byte string."""
    if isinstance(b, str):
        b = b.encode()
    return u32(len(b)) + b


# --- TE RPC -------------------------------------------------------------------------------------
TE_PING, TE_GET_DESC, TE_WRITE, TE_READ, TE_NOTIFY, TE_WRITE_ASK = 1, 2, 3, 4, 5, 6
TE_MAX_SLICE = 64 << 20
TE_MAX_ASK_MSG = 4096


def te_rw(typ, addr, length, epoch, payload=b"", body_len=None):
    body = u64(addr) + u64(length) + u64(epoch) + payload
    n = len(body) if body_len is None else body_len
    return header(typ, n) + body


def te_ask(addr, length, epoch, msg, payload=b"", msg_len=None, body_len=None):
    ml = len(msg) if msg_len is None else msg_len
    body = u64(addr) + u64(length) + u64(epoch) + u32(ml) + msg + payload
    n = len(body) if body_len is None else body_len
    return header(TE_WRITE_ASK, n) + body


def te_rpc_seeds():
    return {
        "ping": frame(TE_PING, b""),
        "get_desc": frame(TE_GET_DESC, b""),
        "read": te_rw(TE_READ, 0x7F0000001000, 4096, 0),
        "read_epoch": te_rw(TE_READ, 0x7F0000001000, 64, 7),
        "write": te_rw(TE_WRITE, 0x7F0000002000, 8, 3, b"ABCDEFGH"),
        "write_len_mismatch": te_rw(TE_WRITE, 0x1000, 16, 0, b"ABCDEFGH"),
        "read_len_zero": te_rw(TE_READ, 0x1000, 0, 0),
        "read_len_max": te_rw(TE_READ, 0x1000, TE_MAX_SLICE, 0),
        "read_len_over_max": te_rw(TE_READ, 0x1000, TE_MAX_SLICE + 1, 0),
        "read_short_body": header(TE_READ, 16) + u64(0x1000) + u64(8),
        "notify": frame(TE_NOTIFY, s("node-a:15001") + s("kv_done") + s(b"\x00\x01payload")),
        "notify_empty": frame(TE_NOTIFY, s("") + s("") + s("")),
        "notify_nul_in_name": frame(TE_NOTIFY, s("a") + s(b"x\x00y") + s("m")),
        "notify_trailing": frame(TE_NOTIFY, s("a") + s("b") + s("c") + b"\x00"),
        "write_ask": te_ask(0x7F0000002000, 8, 3, b"commit k1", b"ABCDEFGH"),
        "write_ask_msg_only": te_ask(0, 0, 0, b"commit k2"),
        "write_ask_empty": te_ask(0x1000, 0, 0, b""),
        "write_ask_msg_over_max": te_ask(0x1000, 0, 0, b"", msg_len=TE_MAX_ASK_MSG + 1,
                                         body_len=28 + TE_MAX_ASK_MSG + 1),
        "write_ask_len_mismatch": te_ask(0x1000, 16, 0, b"m", b"ABCDEFGH"),
        "write_ask_short_head": header(TE_WRITE_ASK, 20) + u64(0x1000) + u64(8) + u32(0),
        "error_reply": frame(TE_READ, i32(-3) + s("address not registered"), F_REPLY | F_ERROR),
        "error_positive_code": frame(TE_READ, i32(5) + s("ok?"), F_REPLY | F_ERROR),
        "reply_flag_on_request": frame(TE_PING, b"", F_REPLY),
        "unknown_type": frame(9, b"\x00" * 8),
        "bad_magic": header(TE_PING, 0, magic=0x12345678),
        "bad_version": header(TE_PING, 0, version=2),
    }


def te_rpc_dict():
    return [
        ("magic", u32(MAGIC)),
        ("version", b"\x01"),
        ("flag_reply", struct.pack("<H", F_REPLY)),
        ("flag_error", struct.pack("<H", F_REPLY | F_ERROR)),
        ("rw_body_len", u64(24)),
        ("max_slice", u64(TE_MAX_SLICE)),
        ("max_slice_plus1", u64(TE_MAX_SLICE + 1)),
        ("max_notify_name", u32(1024)),
        ("max_notify_msg", u32(64 << 10)),
        ("max_error", u32(4096)),
        ("neg_code", i32(-3)),
        ("u64_max", u64(2**64 - 1)),
        ("ask_head_len", u64(28)),
        ("max_ask_msg", u32(TE_MAX_ASK_MSG)),
        ("max_ask_msg_plus1", u32(TE_MAX_ASK_MSG + 1)),
    ] + [("type_%d" % t, bytes([t])) for t in range(1, 7)]


# --- frame header + cursor ----------------------------------------------------------------------
def frame_header_seeds():
    return {
        "ping": frame(1, b""),
        "reply": frame(4, u32(1) + i32(0), F_REPLY, 77),
        "error": frame(2, i32(-1) + s("boom"), F_REPLY | F_ERROR),
        "max_body": header(3, 1 << 20),
        "over_max_body": header(3, (1 << 20) + 1),
        "bad_magic": header(1, 0, magic=0x314B434E),
        "bad_version": header(1, 0, version=0),
        "short": header(1, 0)[:23],
        # the tail drives cursor reads: op byte then operand (op % 7: u16 u32 u64 i32 i64 bytes
        # count)
        "cursor_each_op": header(1, 0)
        + b"\x00" + b"\x01\x02"
        + b"\x01" + u32(0xDEADBEEF)
        + b"\x02" + u64(1)
        + b"\x03" + i32(-1)
        + b"\x04" + i64(-2)
        + b"\x05" + s("hello")
        + b"\x06" + u32(2) + u64(0) + u64(0),
        "cursor_bytes_overlong": header(1, 0) + b"\x05" + u32(4097) + b"x" * 8,
        "cursor_count_too_many": header(1, 0) + b"\x06" + u32(1000) + u64(0),
        "cursor_short_u64": header(1, 0) + b"\x02\x01\x02\x03",
    }


def frame_header_dict():
    return [
        ("magic", u32(MAGIC)),
        ("version", b"\x01"),
        ("flag_reply", struct.pack("<H", F_REPLY)),
        ("flag_error", struct.pack("<H", F_REPLY | F_ERROR)),
        ("len_1mib", u64(1 << 20)),
        ("len_1mib_plus1", u64((1 << 20) + 1)),
        ("u32_4096", u32(4096)),
        ("u32_max", u32(2**32 - 1)),
        ("u64_max", u64(2**64 - 1)),
    ]


# --- master RPC ---------------------------------------------------------------------------------
(MOUNT, UNMOUNT, PUT_START, PUT_END, PUT_REVOKE, GET_REPLICA_LIST, EXIST, REMOVE, REMOVE_ALL,
 HEARTBEAT, SEGMENT_UNREACHABLE, UPSERT_START, UPSERT_END, UPSERT_REVOKE,
 REPLICA_CLEAR, UNREGISTER_CLIENT) = range(1, 17)
TASK_CREATE, TASK_QUERY, TASK_FETCH, TASK_REPORT = range(17, 21)
DISK_ANNOUNCE, DISK_FETCH, DISK_DONE = range(21, 24)
PUT_RESERVE, PUT_COMMIT, STORAGE_CONFIG, PUT_COMMIT_FOR = range(24, 28)
DISK_READ = 1  # the node's disk read server
CLIENT_ID = bytes(range(0x10, 0x20))
TASK_ID = bytes(range(0xA0, 0xB0))


def keys(*ks):
    return u32(len(ks)) + b"".join(s(k) for k in ks)


def versioned(*pairs):
    """Keys each followed by the u64 version its start gave (ends and revokes)."""
    return u32(len(pairs)) + b"".join(s(k) + u64(v) for k, v in pairs)


def config(replica_num=1, flags=0, ttl=0, preferred=()):
    return (u32(replica_num) + u8(flags) + u64(ttl) + u32(len(preferred)) +
            b"".join(s(p) for p in preferred))


def replica(name, addr, size, epoch, status=1):
    return s(name) + u64(addr) + u64(size) + u64(epoch) + u8(status)


def key_replicas(code, size, lease, reps):
    return i32(code) + u64(size) + u64(lease) + u32(len(reps)) + b"".join(reps)


def master_rpc_seeds():
    req = lambda t, body: frame(t, CLIENT_ID + body)  # noqa: E731
    rep = lambda t, body: frame(t, body, F_REPLY)  # noqa: E731
    seg = "127.0.0.1:15001"
    return {
        "mount": req(MOUNT, s(seg) + u64(0x7F0000000000) + u64(64 << 20) + u64(5) + u8(0)),
        "mount_check": req(MOUNT, s(seg) + u64(0x7F0000000000) + u64(64 << 20) + u64(5) + u8(1)),
        "mount_bad_flags": req(MOUNT, s(seg) + u64(0) + u64(4096) + u64(1) + u8(2)),
        "mount_empty_name": req(MOUNT, s("") + u64(0) + u64(4096) + u64(1) + u8(0)),
        "unmount": req(UNMOUNT, s(seg) + u64(0x7F0000000000)),
        "put_start": req(PUT_START, u32(2) + s("key-a") + u64(4096) + s("key-b") + u64(1) +
                         config(2, 0x1, 60000, (seg,))),
        "put_start_hard_pin": req(PUT_START, u32(1) + s("k") + u64(1 << 30) + config(1, 0x2)),
        "put_end": req(PUT_END, versioned(("key-a", 1), ("key-b", 2))),
        "put_revoke": req(PUT_REVOKE, versioned(("key-a", 1))),
        "put_end_no_version": req(PUT_END, keys("key-a")),
        "upsert_start": req(UPSERT_START, u32(1) + s("key-a") + u64(8192) + config(1, 0x4)),
        "upsert_end": req(UPSERT_END, versioned(("key-a", 7))),
        "upsert_revoke": req(UPSERT_REVOKE, versioned(("key-a", 7), ("key-b", 2**64 - 1))),
        "replica_clear": req(REPLICA_CLEAR, s(seg) + keys("key-a", "key-b")),
        "replica_clear_all": req(REPLICA_CLEAR, s("") + keys("key-a")),
        "get_replica_list": req(GET_REPLICA_LIST, keys("key-a")),
        "exist": req(EXIST, keys("key-a", "missing")),
        "exist_empty_key": req(EXIST, keys("")),
        "exist_count_lies": req(EXIST, u32(100) + s("k")),
        "remove": req(REMOVE, u8(1) + keys("key-a")),
        "remove_all": req(REMOVE_ALL, u8(0)),
        "heartbeat": req(HEARTBEAT, u32(2)),
        "heartbeat_old": req(HEARTBEAT, b""),
        "segment_unreachable": req(SEGMENT_UNREACHABLE, keys(seg)),
        "task_copy": req(TASK_CREATE, u8(0) + s("key-a") + s("") + u32(2) + s(seg) +
                         s("127.0.0.1:15002")),
        "task_move": req(TASK_CREATE, u8(1) + s("key-a") + s(seg) + u32(1) + s("127.0.0.1:15002")),
        "task_bad_type": req(TASK_CREATE, u8(7) + s("key-a") + s("") + u32(1) + s(seg)),
        "task_no_targets": req(TASK_CREATE, u8(0) + s("key-a") + s("") + u32(0)),
        "task_query": req(TASK_QUERY, TASK_ID),
        "task_query_short": req(TASK_QUERY, TASK_ID[:8]),
        "task_fetch": req(TASK_FETCH, u32(4)),
        "task_fetch_zero": req(TASK_FETCH, u32(0)),
        "task_report": req(TASK_REPORT, TASK_ID + i32(-800) + s("transfer failed")),
        "reply_task_id": rep(TASK_CREATE, TASK_ID),
        "reply_task_query": rep(TASK_QUERY, u8(0) + u8(3) + u64(1700000000000) +
                                u64(1700000000100) + CLIENT_ID + s("")),
        "reply_task_fetch": rep(TASK_FETCH, u32(1) + TASK_ID + u8(1) + s("key-a") + u64(4096) +
                                s(seg) + u64(0x7F0000001000) + u64(5) + u32(1) +
                                s("127.0.0.1:15002") + u64(0x7F0000009000) + u64(9)),
        "disk_announce": req(DISK_ANNOUNCE, u8(1) + s("127.0.0.1:16001") + u64(1 << 30) +
                             u64(0x1234) + versioned(("key-a", 4096), ("key-b", 1))),
        "disk_announce_drop": req(DISK_ANNOUNCE, u8(2) + s("") + u64(0) + u64(0) +
                                  versioned(("key-a", 0))),
        "disk_announce_end": req(DISK_ANNOUNCE, u8(5) + s("127.0.0.1:16001") + u64(1 << 30) +
                                 u64(0x1234) + versioned(("key-a", 4096))),
        "disk_announce_bad_flags": req(DISK_ANNOUNCE, u8(32) + s("h:1") + u64(1) + u64(1) +
                                       u32(0)),
        "disk_announce_leave": req(DISK_ANNOUNCE, u8(16) + s("") + u64(1 << 30) + u64(0x1234) +
                                   u32(0)),
        "disk_announce_shared": req(DISK_ANNOUNCE, u8(9) + s("") + u64(0) + u64(0) +
                                    versioned(("key-a", 4096))),
        "storage_config": req(STORAGE_CONFIG, b""),
        "storage_config_trailing": req(STORAGE_CONFIG, u8(0)),
        "reply_storage_config": rep(STORAGE_CONFIG, s("/mnt/fs/mooncake_cluster") + u8(1) +
                                    u64(0)),
        "disk_fetch": req(DISK_FETCH, u32(64)),
        "disk_fetch_too_many": req(DISK_FETCH, u32(65)),
        "disk_done": req(DISK_DONE, u8(1) + versioned(("key-a", 7))),
        "disk_done_bad_ok": req(DISK_DONE, u8(2) + versioned(("key-a", 7))),
        "reply_disk_fetch": rep(DISK_FETCH, u32(3) + u8(1) + s("key-a") + u64(4096) + u64(7) +
                                s(seg) + u64(0x7F0000001000) + u64(5) + u8(2) + s("key-b") +
                                u64(1) + u64(8) + s("") + u64(0) + u64(0) + u8(3) +
                                s("key-c") + u64(9) + u64(9) + s("") + u64(0) + u64(0)),
        "reply_disk_fetch_bad_kind": rep(DISK_FETCH, u32(1) + u8(9) + s("k") + u64(1) + u64(1) +
                                         s("") + u64(0) + u64(0)),
        "reply_replicas_disk": rep(GET_REPLICA_LIST, u32(1) + key_replicas(
            0, 4096, 0, [replica("127.0.0.1:16001", 0, 4096, 7, 2)])),
        "disk_read": frame(DISK_READ, s("key-a") + u64(0) + u64(1 << 20)),
        "disk_read_reply": rep(DISK_READ, i32(0) + u64(4096)),
        "disk_read_reply_missing": rep(DISK_READ, i32(-704) + u64(0)),
        # the 8-byte trailer after a streamed value: magic "MCRT", verdict
        "disk_read_trailer_ok": u32(0x5452434D) + i32(0),
        "disk_read_trailer_bad_crc": u32(0x5452434D) + i32(-801),
        "trailing_byte": req(PUT_END, versioned(("k", 1)) + b"\x00"),
        "put_reserve": req(PUT_RESERVE, u32(16) + u64(4096) + config(2, 0x1, 60000, (seg,))),
        "put_reserve_zero": req(PUT_RESERVE, u32(0) + u64(4096) + config()),
        "put_reserve_too_many": req(PUT_RESERVE, u32(1025) + u64(4096) + config()),
        "put_reserve_no_config": req(PUT_RESERVE, u32(1) + u64(4096)),
        "put_commit": req(PUT_COMMIT, u32(2) + s("key-a") + u64(4000) + u64(7) + s("-") + u64(0) +
                          u64(8)),
        "put_commit_no_slot": req(PUT_COMMIT, versioned(("key-a", 4000))),
        "put_commit_count_lies": req(PUT_COMMIT, u32(3) + s("k") + u64(1) + u64(1)),
        # entries of two clients (each id before its key), one a give-back
        "put_commit_for": req(PUT_COMMIT_FOR, u32(2) + TASK_ID + s("key-a") + u64(4000) + u64(7) +
                              CLIENT_ID + s("-") + u64(0) + u64(8)),
        # PUT_COMMIT's entries (no ids): too short for the count
        "put_commit_for_no_id": req(PUT_COMMIT_FOR, u32(1) + s("key-a") + u64(4000) + u64(7)),
        "put_commit_for_empty_key": req(PUT_COMMIT_FOR, u32(1) + TASK_ID + s("") + u64(1) +
                                        u64(1)),
        "reply_commit_for": rep(PUT_COMMIT_FOR, u32(3) + i32(0) + i32(-705) + i32(-704)),
        "reply_reserve": rep(PUT_RESERVE, u32(1) + key_replicas(0, 4096, 9, [
            replica(seg, 0x7F0000001000, 4096, 5, 0)])),
        "unregister_client": req(UNREGISTER_CLIENT, b""),
        "unregister_trailing": req(UNREGISTER_CLIENT, u32(0)),
        "unknown_type": frame(99, CLIENT_ID),
        "reply_codes": rep(PUT_END, u32(2) + i32(0) + i32(-704)),
        "reply_codes_one": rep(EXIST, u32(1) + i32(1)),
        "reply_replicas": rep(GET_REPLICA_LIST, u32(1) + key_replicas(
            0, 4096, 5000, [replica(seg, 0x7F0000001000, 4096, 5),
                            replica("127.0.0.1:15002", 0x7F0000002000, 4096, 9, 0)])),
        "reply_replicas_two": rep(PUT_START, u32(2) + key_replicas(0, 1, 3, [
            replica(seg, 0x1000, 1, 1)]) + key_replicas(-704, 0, 0, [])),
        "reply_remove_all": rep(REMOVE_ALL, i64(3)),
        "reply_heartbeat": rep(HEARTBEAT, u8(1) + u64(42)),
        "reply_empty": rep(MOUNT, b""),
        "reply_error": frame(PUT_START, i32(-200) + s("no space"), F_REPLY | F_ERROR),
        "reply_error_positive": frame(PUT_START, i32(1) + s("?"), F_REPLY | F_ERROR),
    }


def master_rpc_dict():
    d = [
        ("magic", u32(MAGIC)),
        ("version", b"\x01"),
        ("flag_reply", struct.pack("<H", F_REPLY)),
        ("flag_error", struct.pack("<H", F_REPLY | F_ERROR)),
        ("client_id", CLIENT_ID),
        ("max_key", u32(4096)),
        ("max_key_plus1", u32(4097)),
        ("max_segment_name", u32(255)),
        ("max_batch", u32(16384)),
        ("max_replicas", u32(8)),
        ("replicas_9", u32(9)),
        ("mounts_unknown", u32(2**32 - 1)),
        ("segment_1pib", u64(1 << 50)),
        ("mount_f_check", b"\x01"),
        ("code_not_found", i32(-704)),
        ("segment", s("127.0.0.1:15001")),
    ]
    d.append(("max_slots_plus1", u32(1025)))
    return d + [("type_%d" % t, bytes([t])) for t in list(range(1, 16)) + list(range(17, 26)) +
                [PUT_COMMIT_FOR]]


# --- master metadata log ------------------------------------------------------------------------
(R_SEG_MOUNT, R_SEG_DROP, R_ALLOC, R_FREE, R_OBJ_SET, R_OBJ_DEL, R_DISK_SET,
 R_DISK_DEL) = range(1, 9)
LOG_MAGIC = b"MCMLOG01"


def rec(payload):
    """One log record: u32 length, u32 CRC-32 of the payload, the payload."""
    return u32(len(payload)) + u32(zlib.crc32(payload)) + payload


def seg_mount(serial, name="127.0.0.1:15001", base=0x7F0000000000, size=64 << 20, epoch=5):
    return rec(u8(R_SEG_MOUNT) + u64(serial) + s(name) + u64(base) + u64(size) + u64(epoch) +
               CLIENT_ID)


def obj_set(version, key, size, reps, flags=1, pin=0):
    return rec(u8(R_OBJ_SET) + u64(version) + s(key) + u64(size) + u8(flags) + u64(pin) +
               u32(len(reps)) + b"".join(u64(sr) + u64(off) + u64(size) for sr, off in reps))


def alloc(serial, off, length):
    return rec(u8(R_ALLOC) + u64(serial) + u64(off) + u64(length))


def disk_set(version, key, size, disk_id=7):
    return rec(u8(R_DISK_SET) + u64(version) + s(key) + u64(size) + u64(disk_id))


def master_log_seeds():
    one = seg_mount(1) + alloc(1, 0, 4096) + obj_set(7, "key-a", 4096, [(1, 0)])
    two_segs = (seg_mount(1) + seg_mount(2, "127.0.0.1:15002", 0x7F1000000000) +
                alloc(1, 4096, 8192) + alloc(2, 0, 8192) +
                obj_set(9, "key-b", 8192, [(1, 4096), (2, 0)], flags=5, pin=60000))
    return {
        "empty": LOG_MAGIC,
        "one_object": LOG_MAGIC + one,
        "two_replicas": LOG_MAGIC + two_segs,
        "removed": LOG_MAGIC + one + rec(u8(R_OBJ_DEL) + u64(7)) +
        rec(u8(R_FREE) + u64(1) + u64(0)),
        "replaced": LOG_MAGIC + one + alloc(1, 4096, 4096) + obj_set(8, "key-a", 4096, [(1, 4096)]),
        "orphan": LOG_MAGIC + seg_mount(1) + alloc(1, 65536, 1 << 20),
        "segment_dropped": LOG_MAGIC + one + rec(u8(R_SEG_DROP) + u64(1)),
        "zeros_after": LOG_MAGIC + one + bytes(64),
        "torn_tail": LOG_MAGIC + one + u32(64) + u32(0) + b"torn",
        "damaged_middle": LOG_MAGIC + one[:-1] + b"\xff" + one,
        "overlap": LOG_MAGIC + seg_mount(1) + alloc(1, 0, 8192) + alloc(1, 4096, 8192),
        "replica_unallocated": LOG_MAGIC + seg_mount(1) + obj_set(3, "k", 64, [(1, 0)]),
        "disk_copies": LOG_MAGIC + one + disk_set(7, "key-a", 4096) + disk_set(11, "disk-only", 100) +
        disk_set(12, "gone", 5, disk_id=8) + rec(u8(R_DISK_DEL) + s("gone")),
        "disk_empty_key": LOG_MAGIC + disk_set(3, "", 1),
        "unknown_type": LOG_MAGIC + rec(u8(99)),
        "bad_magic": b"MCMLOG00" + one,
    }


def master_log_dict():
    return [("magic", LOG_MAGIC), ("client_id", CLIENT_ID), ("zero_len", u32(0)),
            ("max_replicas", u32(8)), ("max_key", u32(4096))] + [
        ("type_%d" % t, bytes([t])) for t in range(1, 9)]


# --- segment descriptors (JSON) -----------------------------------------------------------------
def desc(bufs, **over):
    d = {
        "name": "127.0.0.1:15001",
        "instance_id": "12345678901234567",
        "host_id": "boot-1234/host-a",
        "rpc_host": "127.0.0.1",
        "rpc_port": 15001,
        "transports": {"shm": {"socket": "@mooncake-shm-100-00000000000000ab"}},
        "buffers": bufs,
    }
    d.update(over)
    d = {k: v for k, v in d.items() if v is not None}  # None: the field is left out
    return json.dumps(d, separators=(",", ":")).encode()


def buf(addr, length, shm=-1, epoch=None, location="cpu:0"):
    b = {"addr": addr, "length": length, "location": location, "shm": shm}
    if epoch is not None:
        b["epoch"] = epoch
    return b


def fabric(addr="0200a4b27f0000010000000000000000", provider="tcp;ofi_rxm", virt=False, keys=()):
    return {"provider": provider, "addr": addr, "virt_addr": virt,
            "keys": [{"addr": a, "key": k} for a, k in keys]}


def parts(**tps):
    """The "transports" object: shm's part, and the ones given (None drops one)."""
    t = {"shm": {"socket": "@mooncake-shm-100-00000000000000ab"}}
    t.update(tps)
    return {k: v for k, v in t.items() if v is not None}


def te_desc_seeds():
    return {
        "no_buffers": desc([]),
        "one_buffer": desc([buf(4096, 4096)]),
        "three_buffers_unsorted": desc([buf(0x30000, 16), buf(0x10000, 0x10000, 0),
                                        buf(0x20000, 8, 1, "7")]),
        "string_u64": desc([buf("140737488355328", "18446744073709551615", 2, "5")]),
        "epoch_number": desc([buf(8192, 100, 3, 9)]),
        "wrapping": desc([buf("18446744073709547520", 8192)]),
        "overlap": desc([buf(4096, 8192), buf(8192, 16)]),
        "zero_length": desc([buf(4096, 0)]),
        "port_zero": desc([], rpc_port=0),
        "port_too_big": desc([], rpc_port=65536),
        "no_transports": desc([buf(4096, 1, -1)], transports=None),
        "no_shm_part": desc([buf(4096, 1, 2)], transports=parts(shm=None)),
        "shm_socket_not_abstract": desc([buf(4096, 1, 2)], transports=parts(shm={"socket": "x"})),
        "unknown_part": desc([], transports=parts(future={"v": [1, 2]})),
        "part_not_object": desc([], transports=parts(future=7)),
        "transports_not_object": desc([], transports="shm"),
        "nine_parts": desc([], transports={str(i): {} for i in range(9)}),
        "bad_shm": desc([buf(4096, 1, -2)]),
        "name_long": desc([], name="n" * 255),
        "name_too_long": desc([], name="n" * 256),
        "not_object": b"[1,2,3]",
        "truncated": desc([buf(4096, 4096)])[:-3],
        "float_addr": desc([buf(4096.5, 1)]),
        "negative_addr": desc([buf(-1, 1)]),
        "fabric": desc([buf(4096, 4096), buf(65536, 16)],
                       transports=parts(fabric=fabric(keys=[("4096", "7")]))),
        "fabric_virt_key_number": desc([buf(4096, 8)],
                                       transports=parts(fabric=fabric(virt=True, keys=[(4096, 3)]))),
        "fabric_odd_hex": desc([], transports=parts(fabric=fabric(addr="abc"))),
        "fabric_bad_hex": desc([], transports=parts(fabric=fabric(addr="zz"))),
        "fabric_addr_too_long": desc([], transports=parts(fabric=fabric(addr="ab" * 257))),
        "fabric_no_provider": desc([], transports=parts(fabric=fabric(provider=""))),
        "fabric_bad_key": desc([buf(4096, 8)], transports=parts(fabric=fabric(keys=[("4096", "-1")]))),
        "fabric_duplicate_key": desc([buf(4096, 8)],
                                     transports=parts(fabric=fabric(keys=[("4096", "1"), ("4096", "2")]))),
    }


def te_desc_dict():
    words = ["name", "instance_id", "host_id", "rpc_host", "rpc_port", "transports", "socket",
             "buffers", "addr", "length", "location", "shm", "epoch", "key", "keys", "fabric",
             "provider", "virt_addr"]
    d = [("key_" + w, ('"%s":' % w).encode()) for w in words]
    d += [("tok_" + n, v) for n, v in [
        ("lbrace", b"{"), ("rbrace", b"}"), ("lbracket", b"["), ("rbracket", b"]"),
        ("comma", b","), ("quote", b'"'), ("true", b"true"), ("false", b"false"),
        ("null", b"null"), ("minus1", b"-1"), ("u64max", b'"18446744073709551615"'),
        ("2p53", b"9007199254740992"), ("cpu0", b'"cpu:0"'), ("star", b'"*"'),
        ("abstract", b'"@mooncake-shm-'), ("uescape", b"\\u0000"), ("exp", b"1e300")]]
    return d


# --- HTTP requests ------------------------------------------------------------------------------
def http_req(method, target, headers=(), body=b"", version="HTTP/1.1", length=True):
    h = "%s %s %s\r\n" % (method, target, version)
    for k, v in headers:
        h += "%s: %s\r\n" % (k, v)
    if length and (body or method in ("PUT", "POST")):
        h += "Content-Length: %d\r\n" % len(body)
    return h.encode() + b"\r\n" + body


def http_request_seeds():
    return {
        "get": http_req("GET", "/metadata?key=mooncake%2Fram%2Fnode-a", [("Host", "x")]),
        "put": http_req("PUT", "/metadata?key=k", [("Host", "x")], b'{"a":1}'),
        "delete": http_req("DELETE", "/metadata?key=k"),
        "head": http_req("HEAD", "/health"),
        "post_empty": http_req("POST", "/api/put?key=a+b&size=10"),
        "http10_keepalive": http_req("GET", "/metrics", [("Connection", "keep-alive")],
                                     version="HTTP/1.0"),
        "connection_close": http_req("GET", "/", [("Connection", "Upgrade, close")]),
        "expect_continue": http_req("PUT", "/metadata?key=k", [("Expect", "100-continue")],
                                    b"xyz"),
        "authorization": http_req("GET", "/get_all_keys", [(
            "Authorization", "MC-HMAC nonce=00112233445566778899aabbccddeeff, mac=" + "ab" * 32)]),
        "pct_path": http_req("GET", "/query%5Fkey?key=%00"),
        "chunked": http_req("PUT", "/m", [("Transfer-Encoding", "chunked")], length=False),
        "dup_length_same": http_req("PUT", "/m", [("Content-Length", "3")], b"abc"),
        "dup_length_differ": http_req("PUT", "/m", [("Content-Length", "4")], b"abc"),
        "length_too_big": http_req("PUT", "/m", [("Content-Length", "99999999999")],
                                   length=False),
        "http2": http_req("GET", "/", version="HTTP/1.2"),
        "folded_header": b"GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n",
        "bare_lf": b"GET / HTTP/1.1\nHost: x\n\n",
        "lowercase_method": b"get / HTTP/1.1\r\n\r\n",
        "long_method": b"PROPFINDX / HTTP/1.1\r\n\r\n",
        "incomplete": b"GET /metadata?key=k HTTP/1.1\r\nHost: x\r\n",
    }


HTTP_DICT = [
    ("m_get", b"GET "), ("m_put", b"PUT "), ("m_delete", b"DELETE "), ("m_head", b"HEAD "),
    ("m_post", b"POST "), ("v11", b" HTTP/1.1\r\n"), ("v10", b" HTTP/1.0\r\n"), ("crlf", b"\r\n"),
    ("end", b"\r\n\r\n"), ("h_cl", b"Content-Length: "), ("h_te", b"Transfer-Encoding: chunked"),
    ("h_conn_close", b"Connection: close"), ("h_conn_ka", b"Connection: keep-alive"),
    ("h_expect", b"Expect: 100-continue"), ("h_host", b"Host: "),
    ("h_auth", b"Authorization: MC-HMAC nonce="), ("mac", b", mac="), ("q", b"?"), ("amp", b"&"),
    ("key", b"key="), ("keys", b"keys="), ("pct", b"%"), ("pct2f", b"%2F"), ("pct00", b"%00"),
    ("plus", b"+"), ("slash", b"/"),
]


def http_request_dict():
    paths = ["/metadata", "/metrics", "/metrics/summary", "/health", "/query_key",
             "/batch_query_keys", "/get_all_keys", "/get_all_segments", "/query_segment"]
    return HTTP_DICT + [("p%d" % i, p.encode()) for i, p in enumerate(paths)]


def http_kv_seeds():
    put = lambda k, v: http_req("PUT", "/metadata?key=" + k, body=v)  # noqa: E731
    get = lambda k: http_req("GET", "/metadata?key=" + k)  # noqa: E731
    dele = lambda k: http_req("DELETE", "/metadata?key=" + k)  # noqa: E731
    return {
        "put_get_delete_get": put("mooncake%2Fram%2Fa", b'{"name":"a"}') +
        get("mooncake%2Fram%2Fa") + dele("mooncake%2Fram%2Fa") + get("mooncake%2Fram%2Fa"),
        "put_overwrite": put("k", b"first-value") + put("k", b"2") + get("k"),
        "put_empty": put("k", b"") + get("k"),
        "head": put("k", b"v") + http_req("HEAD", "/metadata?key=k"),
        "get_missing": get("nothing"),
        "delete_missing": dele("nothing"),
        "wrong_path": http_req("GET", "/metadata/x?key=k"),
        "post": http_req("POST", "/metadata?key=k", body=b"v"),
        "no_key": http_req("GET", "/metadata?other=1"),
        "empty_key": http_req("GET", "/metadata?key="),
        "plus_and_pct": put("a+b%20c", b"v") + get("a%20b+c"),
        "bad_escape": get("%zz"),
        "long_key": put("k" * 4096, b"v") + put("k" * 4097, b"v"),
        "keep_alive_http10": http_req("PUT", "/metadata?key=k", [("Connection", "keep-alive")],
                                      b"v", version="HTTP/1.0") + get("k"),
        "body_short": b"PUT /metadata?key=k HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc",
    }


def http_kv_dict():
    return HTTP_DICT + [("path", b"/metadata"), ("path_q", b"/metadata?key=")]


# --- HTTP responses (first byte picks the method: 0 GET, 1 HEAD, 2 PUT, 3 DELETE) ---------------
GET, HEAD, PUT, DELETE = b"\x00", b"\x01", b"\x02", b"\x03"


def http_response_seeds():
    return {
        "200_length": GET + b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
        "200_length_spaces": GET + b"HTTP/1.1 200 OK\r\ncontent-length:\t 2 \r\n\r\nhi",
        "200_chunked": GET + b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"5\r\nhello\r\n1A;ext=1\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-Trailer: 1\r\n\r\n",
        "200_chunked_gzip": GET + b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"
        b"0\r\n\r\n",
        "200_close": GET + b"HTTP/1.0 200 OK\r\nContent-Type: application/json\r\n\r\n{\"a\":1}",
        "204": DELETE + b"HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n",
        "304": GET + b"HTTP/1.1 304 Not Modified\r\n\r\n",
        "head_with_length": HEAD + b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n",
        "100_then_200": PUT + b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n"
        b"Content-Length: 16\r\n\r\nmetadata updated",
        "404": GET + b"HTTP/1.1 404 Not Found\r\nContent-Length: 18\r\n\r\nmetadata not found",
        "401_challenge": GET + b"HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: MC-HMAC "
        b"nonce=00112233445566778899aabbccddeeff\r\nContent-Length: 0\r\n\r\n",
        "length_short": GET + b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\nonly this",
        "length_bad": GET + b"HTTP/1.1 200 OK\r\nContent-Length: 5x\r\n\r\nhello",
        "length_huge": GET + b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999\r\n\r\n",
        "chunk_truncated": GET + b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"ff\r\nabc",
        "chunk_no_digits": GET + b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"zz\r\n",
        "status_short": GET + b"HTTP/1.1 20\r\n\r\n",
        "status_099": GET + b"HTTP/1.1 099 Odd\r\n\r\nbody",
        "not_http": GET + b"SSH-2.0-OpenSSH\r\n\r\n",
        "no_head_end": GET + b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n",
    }


def http_response_dict():
    return [
        ("v11", b"HTTP/1.1 "), ("v10", b"HTTP/1.0 "), ("ok", b"200 OK\r\n"),
        ("cont", b"100 Continue\r\n\r\n"), ("s204", b"204 "), ("s304", b"304 "),
        ("s404", b"404 "), ("s401", b"401 "), ("crlf", b"\r\n"), ("end", b"\r\n\r\n"),
        ("cl", b"Content-Length: "), ("te", b"Transfer-Encoding: "), ("chunked", b"chunked"),
        ("last_chunk", b"0\r\n\r\n"), ("chunk_ext", b";ext="), ("hex", b"FFFFFFFF"),
        ("www_auth", b"WWW-Authenticate: MC-HMAC nonce="), ("ct", b"Content-Type: "),
        ("colon", b":"),
    ] + [("m%d" % i, bytes([i])) for i in range(4)]


# --- etcd gateway answers (first byte: decoder; stream: second byte = split point) ------------
def etcd_seeds():
    hdr = b'{"header":{"cluster_id":"1","member_id":"2","revision":"9","raft_term":"2"}'
    kv = b'{"key":"Zm9v","create_revision":"2","mod_revision":"9","version":"3","value":"YmFy"}'
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"

    def chunk(b):
        return b"%x\r\n" % len(b) + b + b"\r\n"
    created = b'{"result":{"header":{"revision":"9"},"created":true}}\n'
    events = (b'{"result":{"header":{"revision":"10"},"events":[{"kv":' + kv +
              b'},{"type":"DELETE","kv":{"key":"Zm9v","mod_revision":"10"}}]}}\n')
    return {
        "stream_created_events": b"\x00\x40" + head + chunk(created) + chunk(events[:30]) +
        chunk(events[30:]) + b"0\r\n\r\n",
        "stream_error": b"\x00\x10HTTP/1.1 400 Bad Request\r\nContent-Length: 37\r\n\r\n"
        b'{"error":"bad","message":"x","code":3}',
        "stream_bad_size": b"\x00\x05" + head + b"zz\r\n",
        "stream_chunk_ext": b"\x00\x00" + head + b"5;x=y\r\n{}\n\n\n\r\n0\r\n\r\n",
        "range": b"\x01" + hdr + b',"kvs":[' + kv + b'],"more":true,"count":"4"}',
        "range_empty": b"\x01" + hdr + b"}",
        "range_bad_b64": b"\x01" + hdr + b',"kvs":[{"key":"Zm9","value":"!!!!"}]}',
        "range_numbers": b"\x01" + b'{"header":{"revision":5},"kvs":[{"key":"YQ==","version":1.5}]}',
        "txn": b"\x02" + hdr + b',"succeeded":true,"responses":[{"response_put":' + hdr +
        b'}},{"response_range":' + hdr + b',"kvs":[' + kv + b']}},'
        b'{"response_delete_range":{"deleted":"2"}}]}',
        "txn_failed": b"\x02" + hdr + b',"responses":[]}',
        "lease_grant": b"\x03" + hdr + b',"ID":"7587","TTL":"10"}',
        "lease_keepalive": b"\x03" + b'{"result":{"ID":"7587","TTL":"10"}}',
        "write_put": b"\x04" + hdr + b"}",
        "write_delete": b"\x04" + hdr + b',"deleted":"3"}',
        "error_flat": b"\x05" + b'{"error":"etcdserver: requested lease not found",'
        b'"message":"etcdserver: requested lease not found","code":5}',
        "error_stream": b"\x05" + b'{"error":{"grpc_code":14,"http_code":503,"message":"no leader"}}',
        "watch_events": b"\x06" + events.rstrip(b"\n"),
        "watch_canceled": b"\x06" + b'{"result":{"header":{"revision":"9"},"canceled":true,'
        b'"compact_revision":"7","cancel_reason":"compacted"}}',
        "b64": b"\x07Zm9vYmFy",
        "b64_pad": b"\x07Zm8=",
        "b64_noncanonical": b"\x07Zh==",
    }


def etcd_dict():
    return [
        ("header", b'"header"'), ("revision", b'"revision"'), ("kvs", b'"kvs"'),
        ("key", b'"key"'), ("value", b'"value"'), ("more", b'"more"'), ("count", b'"count"'),
        ("lease", b'"lease"'), ("version", b'"version"'), ("modrev", b'"mod_revision"'),
        ("succeeded", b'"succeeded"'), ("responses", b'"responses"'),
        ("rr", b'"response_range"'), ("rd", b'"response_delete_range"'),
        ("deleted", b'"deleted"'), ("id", b'"ID"'), ("ttl", b'"TTL"'), ("result", b'"result"'),
        ("error", b'"error"'), ("code", b'"code"'), ("message", b'"message"'),
        ("events", b'"events"'), ("type", b'"type"'), ("del", b'"DELETE"'),
        ("created", b'"created"'), ("canceled", b'"canceled"'),
        ("compact", b'"compact_revision"'), ("true", b"true"), ("crlf", b"\r\n"),
        ("te", b"Transfer-Encoding: chunked"), ("last", b"0\r\n\r\n"), ("pad", b"=="),
    ] + [("m%d" % i, bytes([i])) for i in range(8)]


# --- host:port (first byte: host buffer capacity, 0 = plenty) -----------------------------------
def host_port_seeds():
    p = b"\x00"
    return {
        "ipv4": p + b"10.0.0.1:8080",
        "ipv6": p + b"[::1]:17000",
        "ipv6_zone": p + b"[fe80::1%eth0]:80",
        "name_port0": p + b"node-3:0",
        "port_max": p + b"host:65535",
        "port_over": p + b"host:65536",
        "port_huge": p + b"host:99999999999999999999",
        "two_colons": p + b"a:b:80",
        "no_host": p + b":80",
        "no_port": p + b"host:",
        "port_sign": p + b"host:+1",
        "port_trailing": p + b"host:80x",
        "v6_no_colon": p + b"[::1]80",
        "v6_unclosed": p + b"[::1:80",
        "v6_empty": p + b"[]:80",
        "leading_zeros": p + b"localhost:00012",
        "small_cap": b"\x04" + b"verylonghostname:1",
        "exact_cap": b"\x05" + b"abcd:1",
        "no_colon": p + b"localhost",
    }


def host_port_dict():
    return [("colon", b":"), ("lb", b"["), ("rb", b"]"), ("rbc", b"]:"), ("pmax", b"65535"),
            ("pover", b"65536"), ("v6", b"::1"), ("v4", b"127.0.0.1"), ("zone", b"%eth0"),
            ("zero", b"0")]


# --- shm hand-off (native mc__shm_req_t: u32 op, u32 pad, u64 id) -------------------------------
def shm_req(op, id_, pad=0):
    return struct.pack("<IIQ", op, pad, id_)


def shm_serve_seeds():
    return {
        "ctrl": shm_req(1, 0),
        "buffer_0": shm_req(2, 0),
        "buffer_1": shm_req(2, 1),
        "buffer_missing": shm_req(2, 2),
        "buffer_minus1": shm_req(2, 2**64 - 1),
        "op_zero": shm_req(0, 0),
        "op_unknown": shm_req(3, 0),
        "pad_set": shm_req(2, 0, 0xFFFFFFFF),
        "short": shm_req(1, 0)[:8],
        "empty": b"",
        "trailing": shm_req(1, 0) + b"\x00" * 16,
    }


def shm_serve_dict():
    return [("op_ctrl", u32(1)), ("op_buffer", u32(2)), ("id0", u64(0)), ("id1", u64(1)),
            ("id_minus1", u64(2**64 - 1))]


# --- descriptor passing (u8 fds sent, u8 options, u8 expected-1, payload) -----------------------
def unix_fds_seeds():
    rep = struct.pack("<iIQQQ", 0, 0, 0x7F0000001000, 4096, 4096)  # an mc__shm_rep_t
    return {
        "rep_one_fd": b"\x01\x01" + bytes([len(rep) - 1]) + rep,
        "rep_no_fd": b"\x00\x01" + bytes([len(rep) - 1]) + rep,
        "more_fds_than_room": b"\x03\x01\x1f" + rep,
        "fds_not_taken": b"\x02\x00\x1f" + rep,
        "ctrunc_65": bytes([65, 3, 31]) + rep,
        "ctrunc_71": bytes([71, 1, 31]) + rep,
        "max_64": bytes([64, 3, 31]) + rep,
        "split_second_fd": b"\x01\x0e\x1f" + rep,
        "split_no_fd": b"\x00\x04\x1f" + rep,
        "short_payload": b"\x01\x01\x1f" + rep[:10],
        "empty_payload": b"\x01\x01\x00",
        "one_byte": b"\x01\x01\x00" + b"\x7f",
        "want_64": b"\x01\x01\x3f" + bytes(range(64)),
    }


def unix_fds_dict():
    return [("n1", b"\x01"), ("n64", b"\x40"), ("n65", b"\x41"), ("n71", b"\x47"),
            ("opt_split_fd", b"\x0f"), ("want32", b"\x1f")]


# --- JSON config files --------------------------------------------------------------------------
def j(obj):
    return json.dumps(obj, indent=1).encode()


def store_config_seeds():
    return {
        "reference": j({"local_hostname": "127.0.0.1", "metadata_server": "P2PHANDSHAKE",
                        "global_segment_size": "4gb", "local_buffer_size": 536870912,
                        "protocol": "tcp", "device_name": "",
                        "master_server_address": "127.0.0.1:50051"}),
        "aliases": j({"rdma_devices": "mlx5_0", "master_server_addr": "[::1]:50051",
                      "metadata_server": "http://127.0.0.1:8080/metadata"}),
        "ignored_keys": j({"tenant_id": "t", "ssd_offload_path": "/tmp",
                           "client_http_port": 9300, "enable_ssd_offload": False,
                           "enable_client_http_server": "false"}),
        "feature_on": j({"enable_ssd_offload": True}),
        "feature_bad_bool": j({"enable_client_http_server": "maybe"}),
        "secret": j({"cluster_secret": "s3cr3t", "cluster_secret_file": "/etc/mooncake/secret"}),
        "sizes": j({"global_segment_size": "512MiB", "local_buffer_size": "0"}),
        "size_bad": j({"global_segment_size": "4 parsecs"}),
        "size_negative": j({"local_buffer_size": -1}),
        "size_big_number": j({"local_buffer_size": 1e16}),
        "size_fraction": j({"local_buffer_size": 1.5}),
        "unknown_key": j({"no_such_key": "x"}),
        "nested": j({"protocol": {"name": "tcp"}}),
        "null_value": j({"protocol": None}),
        "long_value": j({"local_hostname": "h" * 256}),
        "empty_object": b"{}",
        "not_object": b"[\"protocol\", \"tcp\"]",
        "truncated": b"{\"protocol\": \"tc",
        "duplicate": b"{\"protocol\":\"tcp\",\"protocol\":\"shm\"}",
        "escapes": b"{\"local_hostname\":\"a\\u00e9\\n\\\"b\"}",
    }


def store_config_dict():
    keys_ = ["local_hostname", "metadata_server", "protocol", "device_name", "rdma_devices",
             "master_server_address", "master_server_addr", "global_segment_size",
             "local_buffer_size", "cluster_secret", "cluster_secret_file", "tenant_id",
             "ssd_offload_path", "client_http_port", "enable_ssd_offload",
             "enable_client_http_server"]
    d = [("k_" + k, ('"%s":' % k).encode()) for k in keys_]
    d += [("v_" + v.strip('"'), v.encode()) for v in [
        '"tcp"', '"shm"', '"auto"', '"rdma"', '"P2PHANDSHAKE"', '"4gb"', '"512MB"', '"1kib"',
        '"1t"', "true", "false", "null", '"yes"', '"off"']]
    return d + [("lb", b"{"), ("rb", b"}"), ("comma", b","), ("big", b"9e15"), ("neg", b"-1")]


MASTER_KEYS = ["port", "rpc_port", "rpc_address", "rpc_interface", "rpc_thread_num",
               "max_threads", "rpc_conn_timeout_seconds", "default_kv_lease_ttl",
               "default_kv_soft_pin_ttl", "max_kv_soft_pin_ttl",
               "allow_evict_soft_pinned_objects", "eviction_ratio",
               "eviction_high_watermark_ratio", "client_ttl", "client_live_ttl_sec",
               "put_start_discard_timeout_sec", "put_start_release_timeout_sec",
               "enable_http_metadata_server", "http_metadata_server_port",
               "http_metadata_server_host", "metrics_port", "metrics_host",
               "enable_metric_reporting", "rpc_idle_timeout_sec", "rpc_max_conns_per_peer",
               "cluster_secret_file", "cluster_id", "config_path", "enable_ha", "etcd_endpoints",
               "enable_offload", "enable_cxl", "root_fs_dir", "memory_allocator",
               "allocation_strategy", "dynamic_replication_mode", "offloading_queue_limit",
               "nof_eviction_ratio"]


def master_config_seeds():
    return {
        "reference": j({"port": 50051, "rpc_address": "0.0.0.0", "rpc_thread_num": 4,
                        "default_kv_lease_ttl": 5000, "default_kv_soft_pin_ttl": 1800000,
                        "allow_evict_soft_pinned_objects": True, "eviction_ratio": 0.05,
                        "eviction_high_watermark_ratio": 0.95, "client_ttl": 10,
                        "enable_http_metadata_server": True, "http_metadata_server_port": 8080,
                        "http_metadata_server_host": "0.0.0.0", "metrics_port": 9003}),
        "strings": j({"port": "50051", "enable_metric_reporting": "yes",
                      "eviction_ratio": "0.1", "rpc_idle_timeout_sec": "600"}),
        "timeouts": j({"put_start_discard_timeout_sec": 30, "put_start_release_timeout_sec": 600,
                       "rpc_max_conns_per_peer": 64}),
        "secret_file": j({"cluster_secret_file": "/etc/mooncake/secret"}),
        "ha": j({"enable_ha": False, "etcd_endpoints": "http://127.0.0.1:2379"}),
        "ha_on": j({"enable_ha": True}),
        "config_path_in_file": j({"config_path": "/tmp/other.json"}),
        "unknown_key": j({"no_such_flag": 1}),
        "port_out_of_range": j({"port": 70000}),
        "port_fraction": j({"port": 1.5}),
        "port_huge": j({"port": 1e300}),
        "ratio_out_of_range": j({"eviction_ratio": 2}),
        "bool_as_number": j({"enable_ha": 1}),
        "string_as_bool": j({"rpc_address": True}),
        "negative_ttl": j({"client_ttl": -5}),
        "empty_object": b"{}",
        "not_object": b"42",
        "truncated": b"{\"port\": 5",
        "nan_string": j({"eviction_ratio": "nan"}),
        "durations": j({"default_kv_lease_ttl": "10s", "default_kv_soft_pin_ttl": "30m",
                        "max_kv_soft_pin_ttl": 86400000}),
        "duration_bad_unit": j({"default_kv_lease_ttl": "10 days"}),
        "duration_negative": j({"default_kv_lease_ttl": -1}),
        "reference_names": j({"rpc_port": 50051, "rpc_thread_num": 0, "max_threads": 16,
                              "metrics_host": "127.0.0.1", "cluster_id": "c1",
                              "client_live_ttl_sec": 20, "rpc_conn_timeout_seconds": 0,
                              "memory_allocator": "offset", "dynamic_replication_mode": "off"}),
        "feature_on": j({"enable_cxl": True}),
        "feature_string": j({"root_fs_dir": "/mnt/3fs"}),
        "allocator_cachelib": j({"memory_allocator": "cachelib"}),
        "nested": b'{"a": {"b": 1}}',
        "yaml_reference": (b"# master\nrpc_port: 50051\nrpc_address: \"0.0.0.0\"\n"
                           b"enable_metric_reporting: true\neviction_ratio: 0.1\n"
                           b"default_kv_lease_ttl: 10s\nclient_live_ttl_sec: 60\n"
                           b"etcd_endpoints: 'http://localhost:2379'\nunknown: 1\n"),
        "yaml_nested": b"a: 1\nb:\n  c: 2\n",
        "yaml_list": b"- a\n- b\n",
        "yaml_flow": b"a: [1, 2]\n",
        "yaml_escapes": b"cluster_id: \"a\\u00e9\\x41\\t\"\nrpc_address: 'it''s'\n",
        "yaml_unterminated": b"cluster_id: \"open\n",
        "yaml_null": b"port: ~\n",
        "yaml_documents": b"---\na: 1\n---\nb: 2\n",
    }


def master_config_dict():
    d = [("k_" + k, ('"%s":' % k).encode()) for k in MASTER_KEYS]
    return d + [("true", b"true"), ("false", b"false"), ("null", b"null"), ("lb", b"{"),
                ("rb", b"}"), ("comma", b","), ("yes", b'"yes"'), ("nan", b'"nan"'),
                ("inf", b'"inf"'), ("big", b"9e15"), ("frac", b"0.5"), ("neg", b"-1"),
                ("p65535", b"65535"), ("p65536", b"65536"),
                ("colon", b": "), ("nl", b"\n"), ("hash", b" #"), ("dq", b'"'), ("sq", b"'"),
                ("dash", b"- "), ("indent", b"  "), ("s10", b'"10s"'), ("ms", b"ms"),
                ("doc", b"---\n")]


# --- config values and gflags command lines -----------------------------------------------------
def config_seeds():
    return {
        "size_gb": b"4gb",
        "size_mib": b"512MiB",
        "size_plain": b"1073741824",
        "size_overflow": b"16384pb",
        "size_u64max": b"18446744073709551615",
        "int_negative": b"-17",
        "int_overflow": b"9223372036854775808",
        "double": b"3.5e2",
        "bool_yes": b"yes",
        "bool_off": b"off",
        "flags_all": b"--b\n--i=42\n--d=0.5\n--s=hello\n--size=4gb",
        "flags_separate_values": b"--i\n-3\n--size\n1kib\n--s\nworld",
        "flags_no_bool": b"--nob\n-b=false",
        "flags_help": b"--help",
        "flags_version": b"--version",
        "flags_unknown": b"--unknown=1",
        "flags_positional": b"positional",
        "flags_missing_value": b"--s",
        "flags_bad_value": b"--d=abc\n--i=1x",
        "flags_double_dash_only": b"--",
    }


def config_dict():
    words = ["--", "=", "--no", "--help", "--version", "--b", "--i", "--d", "--s", "--size",
             "-", "\n", "k", "kb", "kib", "m", "mb", "mib", "g", "gb", "gib", "t", "tb", "tib",
             "b", "true", "false", "yes", "no", "on", "off", "1", "0", "e308", "nan", "inf",
             "0x", "9223372036854775807"]
    return [("w%d" % i, w.encode()) for i, w in enumerate(words)]


# --- storage node control channel (mooncake-store/src/proto/node_proto.h) -------------------------
NP = dict(HELLO=1, MAP=2, UNMAP=3, PUT=4, UPSERT=5, GET=6, EXIST=7, REMOVE=8, SIZE=9,
          REMOVE_ALL=10, REMOVE_REGEX=11, HEALTH=12)


def np_item(key, *parts):
    return s(key) + u32(len(parts)) + b"".join(u32(h) + u64(o) + u64(n) for h, o, n in parts)


def np_config(replicas=1, soft=0, hard=0, ttl=-1, preferred=()):
    return (u32(replicas) + u8(soft) + u8(hard) + i64(ttl) + u32(len(preferred)) +
            b"".join(s(p) for p in preferred))


def np_reply(typ, rc, results=(), text=""):
    return frame(typ, i64(rc) + u32(len(results)) + b"".join(i64(r) for r in results) + s(text),
                 F_REPLY)


def node_proto_seeds():
    return {
        "hello": frame(NP["HELLO"], u32(4242)),
        "map": frame(NP["MAP"], u64(1 << 20)),
        "unmap": frame(NP["UNMAP"], u32(1)),
        "put": frame(NP["PUT"], np_config(2, 1, 0, 60000, ("127.0.0.1:12345",)) + u32(2) +
                     np_item("key-a", (1, 0, 4096), (2, 64, 10)) + np_item("key-b", (1, 8192, 1))),
        "upsert": frame(NP["UPSERT"], np_config() + u32(1) + np_item("k", (3, 0, 100))),
        "get": frame(NP["GET"], u32(1) + np_item("key-a", (1, 0, 4096))),
        "get_no_parts": frame(NP["GET"], u32(1) + np_item("key-a")),
        "exist": frame(NP["EXIST"], u32(2) + s("key-a") + s("missing")),
        "remove": frame(NP["REMOVE"], u8(1) + u32(1) + s("key-a")),
        "size": frame(NP["SIZE"], s("key-a")),
        "remove_all": frame(NP["REMOVE_ALL"], u8(0)),
        "remove_regex": frame(NP["REMOVE_REGEX"], u8(1) + s("^key-")),
        "health": frame(NP["HEALTH"], b""),
        "count_lies": frame(NP["GET"], u32(1000000)),
        "empty_key": frame(NP["EXIST"], u32(1) + s("")),
        "nul_key": frame(NP["EXIST"], u32(1) + s(b"a\x00b")),
        "bad_pin": frame(NP["PUT"], np_config(1, 9) + u32(0)),
        "trailing": frame(NP["HEALTH"], b"\x00"),
        "unknown_type": frame(99, b""),
        "reply": np_reply(NP["GET"], 0, (4096, -704)),
        "reply_hello": np_reply(NP["HELLO"], 0, (), "127.0.0.1:12345"),
        "reply_error": frame(NP["PUT"], i32(-600) + s("item count: over the limit"),
                             F_REPLY | F_ERROR),
    }


def node_proto_dict():
    d = [
        ("magic", u32(MAGIC)),
        ("flag_reply", struct.pack("<H", F_REPLY)),
        ("flag_error", struct.pack("<H", F_REPLY | F_ERROR)),
        ("max_items", u32(65536)),
        ("max_parts", u32(1024)),
        ("max_key", u32(4096)),
        ("ttl_default", i64(-1)),
        ("code_not_found", i64(-704)),
    ]
    return d + [("type_%s" % k.lower(), bytes([v])) for k, v in sorted(NP.items())]


# --- the PG's control plane (mooncake-pg/src/pg_ctrl_proto.h) ------------------------------------
PGC = dict(REGISTER=1, JOIN=2, ACTIVATE=3, VIEW=4)
PGC_ADDR = "127.0.0.1:15001#140737488355328"


def pgc_view(status=1, seats=4, epoch=2, active=0xB, dropped=0x4, joining=0x4, rnd=9, syncs=1,
             addrs=((0, PGC_ADDR), (1, "127.0.0.1:15002#4096")), reason=""):
    return frame(0, u8(status) + u32(seats) + u64(epoch) + u64(active) + u64(dropped) +
                 u64(joining) + u64(rnd) + u64(syncs) + u32(len(addrs)) + b"".join(u32(i) + s(a) for i, a in addrs) +
                 s(reason), F_REPLY)


def pg_ctrl_seeds():
    head = s("elastic") + u32(1)
    return {
        "register": frame(PGC["REGISTER"], head + u32(3) + u32(4) + u8(0) + s(PGC_ADDR) +
                          u32(30000)),
        "register_extension": frame(PGC["REGISTER"], head + u32(3) + u32(4) + u8(1) +
                                    s(PGC_ADDR) + u32(30000)),
        "join": frame(PGC["JOIN"], head + s(PGC_ADDR) + u64(12) + u64(1) + u32(60000)),
        "activate": frame(PGC["ACTIVATE"], head + s(PGC_ADDR) + u64(0x8) + u64(0x7) + u64(12) +
                          u64(1) + u64(3) + u32(5000) + u32(60000)),
        "view": frame(PGC["VIEW"], head),
        "seats_65": frame(PGC["REGISTER"], head + u32(3) + u32(65) + u8(0) + s(PGC_ADDR) +
                          u32(1)),
        "joiner_active": frame(PGC["ACTIVATE"], head + s(PGC_ADDR) + u64(0x2) + u64(0x3) +
                               u64(0) * 3 + u32(0) + u32(1)),
        "nul_group": frame(PGC["VIEW"], s(b"a\x00b") + u32(0)),
        "trailing": frame(PGC["VIEW"], head + b"\x00"),
        "unknown_type": frame(99, head),
        "reply_view": pgc_view(),
        "reply_rejected": pgc_view(status=3, dropped=0, addrs=(), reason="the group moved on"),
        "reply_count_lies": pgc_view(addrs=())[:-4 - 4] + u32(64) + s(""),
        "reply_error": frame(0, i32(-201) + s("no member admitted rank 3 in time"),
                             F_REPLY | F_ERROR),
    }


def pg_ctrl_dict():
    d = [
        ("magic", u32(MAGIC)),
        ("flag_reply", struct.pack("<H", F_REPLY)),
        ("flag_error", struct.pack("<H", F_REPLY | F_ERROR)),
        ("seats_max", u32(64)),
        ("mask_all", u64(0xFFFFFFFFFFFFFFFF)),
        ("code_endpoint", i32(-201)),
        ("addr", PGC_ADDR.encode()),
    ]
    return d + [("type_%s" % k.lower(), bytes([v])) for k, v in sorted(PGC.items())]


# --- disk tier bucket files (mooncake-store/src/disk/bucket_record.h) ---------------------------
BREC_LIVE, BREC_DEAD = 0x424F434D, 0x4444434D


def brec(key, value, seq=1, magic=BREC_LIVE, key_len=None, value_len=None, data_crc=None):
    if isinstance(key, str):
        key = key.encode()
    kl = len(key) if key_len is None else key_len
    vl = len(value) if value_len is None else value_len
    crc = zlib.crc32(key + value) if data_crc is None else data_crc
    fields = u32(kl) + u64(vl) + u64(seq) + u32(crc)
    return u32(magic) + fields + u32(zlib.crc32(fields)) + key + value


def bucket_scan_seeds():
    a = brec("key-a", b"A" * 100, 1)
    b = brec("key-b", b"", 2)
    c = brec("key-a", b"newer", 3)
    return {
        "empty": b"",
        "one": a,
        "three": a + b + c,
        "dead": brec("gone", b"xyz", 4, magic=BREC_DEAD) + b,
        "bad_data_crc": brec("k", b"value", 5, data_crc=0x12345678) + b,
        "bad_hdr_crc": a[:28] + u32(0) + a[32:],
        "torn_value": a + c[:-2],
        "torn_header": a + c[:20],
        "key_len_zero": brec(b"", b"v", 6),
        "key_len_max": brec("k" * 4096, b"v", 7),
        "key_len_over": brec("k" * 4097, b"v", 8),
        "key_nul": brec(b"a\x00b", b"v", 9),
        "value_len_lies": brec("k", b"v", 10, value_len=2**64 - 1),
        "bad_magic": u32(0x11111111) + a[4:],
        # O_DIRECT stores pad each record with zeros to the next 4 KiB boundary
        "padded": pad4k(a) + pad4k(b) + c,
        "padded_torn_at_boundary": pad4k(a) + c[:20],
        "padded_nonzero_pad": a + b"\x01" + bytes(4096 - len(a) - 1) + b,
    }


def pad4k(rec):
    return rec + bytes(-len(rec) % 4096)


def bucket_scan_dict():
    return [
        ("magic_live", u32(BREC_LIVE)),
        ("magic_dead", u32(BREC_DEAD)),
        ("max_key", u32(4096)),
        ("max_key_plus1", u32(4097)),
        ("u64_max", u64(2**64 - 1)),
        ("seq_1", u64(1)),
    ]



# --- msgpack (mooncake-common/include/mooncake/common/msgpack.h) ------------------------------------
def mp_str(t):
    b = t.encode() if isinstance(t, str) else t
    if len(b) < 32:
        return bytes([0xa0 | len(b)]) + b
    return b"\xd9" + bytes([len(b)]) + b


def mp_map(pairs):
    out = bytes([0x80 | len(pairs)])
    for k, v in pairs:
        out += mp_str(k) + v
    return out


def kv_event_batch():
    """A batch as the master publishes it: [timestamp, [event map], dp_rank]."""
    event = mp_map([("event_id", b"\x01"), ("timestamp", b"\xcf" + (1700000000000).to_bytes(8, "big")),
                    ("event_type", mp_str("stored")), ("type", mp_str("BlockStored")),
                    ("medium", mp_str("cpu")), ("seq_hashes", b"\x91\xcd\x30\x39"),
                    ("block_hashes", b"\x91\xcd\x30\x39"), ("parent_hash", b"\xc0")])
    return b"\x93\xcf" + (1700000000000).to_bytes(8, "big") + b"\x91" + event + b"\x00"


def msgpack_seeds():
    return {
        "scalars": b"\xc0\xc2\xc3\x05\xff\xcc\xc8\xcd\xff\xff\xce\x00\x01\x00\x00"
                   b"\xcf" + b"\xff" * 8 + b"\xd0\xdf\xd3" + b"\x80" + b"\x00" * 7,
        "floats": b"\xca\x3f\xc0\x00\x00\xcb\x3f\xf8" + b"\x00" * 6,
        "strings": mp_str("stored") + b"\xda\x00\x03abc" + b"\xc4\x02hi" + b"\xd4\x05\x99",
        "kv_batch": kv_event_batch(),
        "vllm_batch": b"\x93\xcb" + b"\x00" * 8 + b"\x91\x95" + mp_str("BlockStored")
                      + b"\x91\x07\xc0\x92\x01\x02\x10",
        "deep": b"\x91" * 40 + b"\x00",
        "bad_count": b"\xdd\xff\xff\xff\xff\x00",
        "reserved": b"\xc1",
    }


def msgpack_dict():
    return [("nil", b"\xc0"), ("map16", b"\xde"), ("arr32", b"\xdd"), ("str8", b"\xd9"),
            ("u64", b"\xcf"), ("ext8", b"\xc7"), ("stored", mp_str("stored"))]


# --- ZMTP (mooncake-common/include/mooncake/common/zmtp.h) ------------------------------------------
def zmtp_greeting(major=3, minor=1, mech=b"NULL"):
    return b"\xff" + b"\x00" * 8 + b"\x7f" + bytes([major, minor]) + mech.ljust(20, b"\x00") \
        + b"\x00" + b"\x00" * 31


def zmtp_frame(body, flags=0):
    if len(body) > 255:
        return bytes([flags | 2]) + len(body).to_bytes(8, "big") + body
    return bytes([flags, len(body)]) + body


def zmtp_command(name, data=b""):
    return zmtp_frame(bytes([len(name)]) + name + data, 4)


def zmtp_ready(socket_type):
    prop = b"\x0bSocket-Type" + len(socket_type).to_bytes(4, "big") + socket_type
    return zmtp_command(b"READY", prop)


def zmtp_seeds():
    sub_side = b"\x01"  # the harness parses as a SUB: the peer is a PUB
    pub_side = b"\x00"
    return {
        "pub_stream": sub_side + zmtp_greeting() + zmtp_ready(b"PUB") + zmtp_frame(b"", 1)
                      + zmtp_frame((7).to_bytes(8, "big"), 1) + zmtp_frame(kv_event_batch()),
        "sub_stream": pub_side + zmtp_greeting() + zmtp_ready(b"SUB")
                      + zmtp_command(b"SUBSCRIBE", b"kv") + zmtp_frame(b"\x01topic")
                      + zmtp_command(b"PING", b"\x00\x10ctx") + zmtp_command(b"CANCEL", b"kv"),
        "zmtp30": pub_side + zmtp_greeting(minor=0) + zmtp_ready(b"SUB") + zmtp_frame(b"\x01"),
        "long_frame": sub_side + zmtp_greeting() + zmtp_ready(b"PUB") + zmtp_frame(b"x" * 300),
        "wrong_type": pub_side + zmtp_greeting() + zmtp_ready(b"REQ"),
        "curve": pub_side + zmtp_greeting(mech=b"CURVE"),
        "data_first": pub_side + zmtp_greeting() + zmtp_frame(b"early"),
    }


def zmtp_dict():
    return [("sig", b"\xff\x00\x00\x00\x00\x00\x00\x00\x00\x7f"), ("null", b"NULL"),
            ("ready", b"\x05READY"), ("socket_type", b"\x0bSocket-Type"),
            ("subscribe", b"\x09SUBSCRIBE"), ("cmd", b"\x04"), ("more", b"\x01"),
            ("long", b"\x02\x00\x00\x00\x00\x00\x00\x01\x00")]



# --- KV-event batches (mooncake-conductor/src/kv_event_decode.h): the golden payloads, made by the
# engines' own encoders (mooncake-conductor/tests/golden/make_event_golden.py), and edge cases
GOLDEN = os.path.join(HERE, "..", "mooncake-conductor", "tests", "golden")


def kv_event_decode_seeds():
    seeds = {}
    for name in ("vllm_batch.msgpack", "sglang_array.msgpack", "master.msgpack"):
        with open(os.path.join(GOLDEN, name), "rb") as f:
            seeds[name.split(".")[0]] = f.read()
    seeds["master_live"] = kv_event_batch()
    seeds["array_cleared"] = b"\x93\xcb" + b"\x00" * 8 + b"\x91\x91\xb0AllBlocksCleared\xc0"
    seeds["deep_event"] = b"\x92\x00\x91" + b"\x91" * 30 + b"\x00"
    return seeds


def kv_event_decode_dict():
    return [(k, mp_str(k)) for k in ("BlockStored", "BlockRemoved", "AllBlocksCleared", "type",
                                     "event_type", "seq_hashes", "block_hashes", "medium",
                                     "events", "ts", "data_parallel_rank", "CPU_PINNED")] + \
        [("bin32", b"\xc4\x20"), ("nil", b"\xc0"), ("neg", b"\xd3")]


# --- block hashes (mooncake-conductor/src/block_hash.h): algo, block size, flags, int32 tokens
def block_hash_seeds():
    def seed(algo, bs, flags, tokens):
        return bytes([algo, bs, flags]) + b"".join(struct.pack("<i", t) for t in tokens)
    return {"vllm_cbor": seed(0, 4, 0, range(12)), "vllm_pickle_lora": seed(1, 3, 1, range(9)),
            "xxhash_salt": seed(2, 2, 6, [255, 256, 65535, 65536, -1, 7]),
            "sglang": seed(4, 4, 0, range(100, 116)), "sglang_negative": seed(4, 1, 0, [-5]),
            "python_hash": seed(5, 2, 0, [-1, -2, 3, 4]), "xxh3": seed(6, 8, 0, range(32)),
            "zero_block": seed(0, 0, 0, range(4))}


def block_hash_dict():
    return [("neg1", struct.pack("<i", -1)), ("u16", struct.pack("<i", 65536)),
            ("u8", struct.pack("<i", 256)), ("min", struct.pack("<i", -2**31))]


HARNESSES = {
    "block_hash_fuzz": (block_hash_seeds, block_hash_dict),
    "bucket_scan_fuzz": (bucket_scan_seeds, bucket_scan_dict),
    "config_fuzz": (config_seeds, config_dict),
    "etcd_fuzz": (etcd_seeds, etcd_dict),
    "frame_header_fuzz": (frame_header_seeds, frame_header_dict),
    "host_port_fuzz": (host_port_seeds, host_port_dict),
    "kv_event_decode_fuzz": (kv_event_decode_seeds, kv_event_decode_dict),
    "http_kv_fuzz": (http_kv_seeds, http_kv_dict),
    "http_request_fuzz": (http_request_seeds, http_request_dict),
    "http_response_fuzz": (http_response_seeds, http_response_dict),
    "master_config_fuzz": (master_config_seeds, master_config_dict),
    "master_log_fuzz": (master_log_seeds, master_log_dict),
    "master_rpc_fuzz": (master_rpc_seeds, master_rpc_dict),
    "msgpack_fuzz": (msgpack_seeds, msgpack_dict),
    "node_proto_fuzz": (node_proto_seeds, node_proto_dict),
    "pg_ctrl_fuzz": (pg_ctrl_seeds, pg_ctrl_dict),
    "shm_serve_fuzz": (shm_serve_seeds, shm_serve_dict),
    "store_config_fuzz": (store_config_seeds, store_config_dict),
    "te_desc_fuzz": (te_desc_seeds, te_desc_dict),
    "te_rpc_fuzz": (te_rpc_seeds, te_rpc_dict),
    "unix_fds_fuzz": (unix_fds_seeds, unix_fds_dict),
    "zmtp_fuzz": (zmtp_seeds, zmtp_dict),
}


def dict_escape(b):
    """libFuzzer dictionary value: printable ASCII as is, '"' and '\\' escaped, others \\xNN."""
    out = []
    for c in b:
        if c in (0x22, 0x5C):
            out.append("\\" + chr(c))
        elif 0x20 <= c < 0x7F:
            out.append(chr(c))
        else:
            out.append("\\x%02X" % c)
    return "".join(out)


def render(name, seeds_fn, dict_fn):
    """The files one harness needs: {relative path: bytes}."""
    files = {}
    for seed, data in sorted(seeds_fn().items()):
        files[os.path.join("corpus", name, seed)] = data
    lines = ["# libFuzzer dictionary for fuzz/%s.c, written by fuzz/make_seeds.py" % name]
    seen = set()
    for key, val in dict_fn():
        if val in seen:
            continue
        seen.add(val)
        lines.append('%s="%s"' % (key, dict_escape(val)))
    files[name + ".dict"] = ("\n".join(lines) + "\n").encode()
    return files


def main():
    check = "--check" in sys.argv[1:]
    wanted = {}
    for name, (seeds_fn, dict_fn) in sorted(HARNESSES.items()):
        wanted.update(render(name, seeds_fn, dict_fn))
    stale = []
    for name in HARNESSES:
        d = os.path.join(HERE, "corpus", name)
        if os.path.isdir(d):
            for f in os.listdir(d):
                if os.path.join("corpus", name, f) not in wanted:
                    stale.append(os.path.join(d, f))
    differ = []
    for rel, data in sorted(wanted.items()):
        path = os.path.join(HERE, rel)
        try:
            with open(path, "rb") as fh:
                same = fh.read() == data
        except FileNotFoundError:
            same = False
        if not same:
            differ.append(path)
    if check:
        for p in differ + stale:
            print("out of date: %s" % os.path.relpath(p, HERE))
        return 1 if differ or stale else 0
    for p in stale:
        os.remove(p)
    for rel, data in sorted(wanted.items()):
        path = os.path.join(HERE, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(data)
    total = sum(len(v) for k, v in wanted.items() if k.startswith("corpus"))
    print("%d harnesses, %d seed files (%d bytes), %d dictionaries" % (
        len(HARNESSES), sum(1 for k in wanted if k.startswith("corpus")), total,
        sum(1 for k in wanted if k.endswith(".dict"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
