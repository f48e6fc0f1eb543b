"""A put whose replica cannot be kept is placed again elsewhere: its bytes all landed, then the
node holding them stopped answering and the master dropped it before the put's end. The end finds
no placement (OBJECT_NOT_FOUND); the client places the put again on a live node instead of
reporting -704 for a put the caller made in good faith."""

import signal

from store_helpers import wait_for

SIZE = 1 << 20


def test_put_whose_node_was_dropped_before_its_end_is_placed_again(make_master, make_worker):
    master = make_master("--client_ttl=6")
    doomed, live = make_worker(), make_worker()
    doomed_name = doomed.setup(master, segment=32 << 20)
    live.setup(master, segment=32 << 20)
    # stops itself once, after its bytes landed and before it ends the put
    writer = make_worker(env={"MC_FAILPOINTS": "store_put_before_end=stop"})
    writer.setup(master, segment=0)
    writer.send(f"cfg = ReplicateConfig(preferred_segments=[{doomed_name!r}])\n"
                f"result = store.put('moved', pattern({SIZE}, 'moved'), config=cfg)")
    assert wait_for(writer.stopped, timeout=30), "the writer did not reach its failpoint"
    doomed.kill()
    # client_ttl (6 s) without a heartbeat: the master drops the node and the put's placement
    assert wait_for(lambda: master.metric("mooncake_master_segments") == 1, timeout=60)
    writer.signal(signal.SIGCONT)
    assert writer.reply() == 0
    assert live.run(f"result = sha(store.get('moved')) == sha(pattern({SIZE}, 'moved'))") is True
    # once: a second put of the same key keeps the first value and succeeds, as always
    assert writer.run("result = store.put('moved', b'other')") == 0
