#!/usr/bin/env python3
"""A KV event subscriber written against vLLM's schema with pyzmq and msgpack only.

Usage: kv_events_subscriber.py PUB_ENDPOINT REPLAY_ENDPOINT TOPIC [TOPIC ...]

Decodes every KVEventBatch (msgpack, array_like tagged structs) and checks each field's type as
the schema defines it; a batch that does not fit exits with status 2 and the reason on stderr.
Prints one JSON line per batch to stdout:
  {"topic", "seq", "ts", "events": [{"type", "hashes" (hex), "medium", ...}], "replayed"}
A sequence gap on a topic is repaired through the replay endpoint, as vLLM's example subscriber
does. stdin commands: "REPLAY" asks for every kept batch of each topic from 0 and prints
{"replay": topic, "count", "identical", "last_seq"} (identical: payloads equal those received);
end of stdin stops the subscriber.
"""
import json
import select
import sys

import msgpack
import zmq

END_SEQ = (-1).to_bytes(8, "big", signed=True)


def fail(why):
    print("schema violation: " + why, file=sys.stderr, flush=True)
    sys.exit(2)


def check_hashes(hashes, where):
    if not isinstance(hashes, list) or not hashes:
        fail(where + ": block_hashes must be a non-empty list")
    for h in hashes:
        if not isinstance(h, (bytes, int)):
            fail(where + ": a block hash must be bytes or int, got %r" % (h,))
    return [h.hex() if isinstance(h, bytes) else h for h in hashes]


def decode(payload):
    batch = msgpack.unpackb(payload, raw=False)
    if not isinstance(batch, list) or len(batch) not in (2, 3):
        fail("KVEventBatch must be [ts, events] (or with data_parallel_rank)")
    ts, events = batch[0], batch[1]
    if not isinstance(ts, float):
        fail("ts must be a float, got %r" % (ts,))
    out = []
    for e in events:
        if not isinstance(e, list) or not e or not isinstance(e[0], str):
            fail("an event must be a tagged array, got %r" % (e,))
        tag = e[0]
        if tag == "BlockStored":
            if len(e) != 7:
                fail("BlockStored has 6 fields after the tag, got %d" % (len(e) - 1))
            _, hashes, parent, tokens, block_size, lora_id, medium = e
            hexes = check_hashes(hashes, tag)
            if parent is not None and not isinstance(parent, (bytes, int)):
                fail("parent_block_hash must be bytes, int or nil")
            if not isinstance(tokens, list) or not all(isinstance(t, int) for t in tokens):
                fail("token_ids must be a list of ints")
            if not isinstance(block_size, int) or block_size < 1:
                fail("block_size must be a positive int")
            if lora_id is not None and not isinstance(lora_id, int):
                fail("lora_id must be an int or nil")
            if medium is not None and not isinstance(medium, str):
                fail("medium must be a str or nil")
            out.append({"type": tag, "hashes": hexes, "parent": parent.hex() if isinstance(parent, bytes) else parent,
                        "tokens": tokens, "block_size": block_size, "lora_id": lora_id, "medium": medium})
        elif tag == "BlockRemoved":
            if len(e) != 3:
                fail("BlockRemoved has 2 fields after the tag, got %d" % (len(e) - 1))
            _, hashes, medium = e
            hexes = check_hashes(hashes, tag)
            if medium is not None and not isinstance(medium, str):
                fail("medium must be a str or nil")
            out.append({"type": tag, "hashes": hexes, "medium": medium})
        elif tag == "AllBlocksCleared":
            if len(e) != 1:
                fail("AllBlocksCleared has no fields")
            out.append({"type": tag})
        else:
            fail("unknown event tag %r" % (tag,))
    return ts, out


def replay(dealer, topic, start):
    """Every kept batch of topic with seq >= start, as (seq, payload), until the end marker."""
    dealer.send_multipart([b"", topic.encode(), start.to_bytes(8, "big")])
    got = []
    while True:
        if not dealer.poll(10_000):
            fail("no end marker from the replay endpoint within 10 s")
        frames = dealer.recv_multipart()
        if len(frames) != 3 or frames[0] != b"":
            fail("a replay answer is ['', seq, payload], got %d frames" % len(frames))
        if frames[1] == END_SEQ and frames[2] == b"":
            return got
        got.append((int.from_bytes(frames[1], "big"), frames[2]))


def main():
    pub_endpoint, replay_endpoint, topics = sys.argv[1], sys.argv[2], sys.argv[3:]
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.connect(pub_endpoint)
    for t in topics:
        sub.setsockopt_string(zmq.SUBSCRIBE, t)
    dealer = ctx.socket(zmq.DEALER)
    dealer.connect(replay_endpoint)
    received = {t: {} for t in topics}  # topic -> seq -> payload
    last = {t: -1 for t in topics}

    def emit(topic, seq, payload, replayed):
        ts, events = decode(payload)
        received[topic][seq] = payload
        last[topic] = seq
        print(json.dumps({"topic": topic, "seq": seq, "ts": ts, "events": events, "replayed": replayed}), flush=True)

    print(json.dumps({"ready": True}), flush=True)
    stdin_open = True
    while stdin_open:
        readable, _, _ = select.select([sys.stdin], [], [], 0) if stdin_open else ([], [], [])
        if readable:
            line = sys.stdin.readline()
            if not line:
                break
            if line.strip() == "REPLAY":
                for t in topics:
                    got = replay(dealer, t, 0)
                    identical = all(received[t].get(s) == p for s, p in got) and len(got) == len(received[t])
                    for s, p in got:
                        decode(p)
                    print(json.dumps({"replay": t, "count": len(got), "identical": identical,
                                      "last_seq": got[-1][0] if got else -1}), flush=True)
        if not sub.poll(20):
            continue
        frames = sub.recv_multipart()
        if len(frames) != 3 or len(frames[1]) != 8:
            fail("a PUB message is [topic, seq (8 bytes), payload], got %d frames" % len(frames))
        topic, seq, payload = frames[0].decode(), int.from_bytes(frames[1], "big"), frames[2]
        if topic not in last:
            fail("a message of topic %r, not subscribed" % topic)
        if seq > last[topic] + 1:
            # missed batches (a slow join, or dropped by the high-water mark): ask for them
            for s, p in replay(dealer, topic, last[topic] + 1):
                if last[topic] < s < seq:
                    emit(topic, s, p, True)
        if seq <= last[topic]:
            continue
        emit(topic, seq, payload, False)


if __name__ == "__main__":
    main()
