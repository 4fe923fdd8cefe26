"""orbitkv.protocol against docs/protocol.md: the worked examples of section 10 byte for byte,
every valid frame of the Java seed corpus round-tripped byte-exactly, and the refusals of
section 7.2 (each raises MalformedFrame with the documented code and skippability)."""

import glob
import os
import random
import re
import struct
import unittest

from orbitkv import protocol as p
from orbitkv.state import FullGroup, Namespace, RecoveryContract, RecurrentGroup, SlidingWindowGroup

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..", ".."))
CORPUS = os.path.join(ROOT, "orbitkv-state", "src", "test", "resources", "io", "orbitkv", "state", "protocol",
                      "FrameDecoderFuzzTestInputs", "decodeStream")
SEED = int(os.environ.get("ORBITKV_TEST_SEED", random.randrange(1 << 32)))

NS = Namespace("m", "r", "sha256:w", "sha256:t", "", "bf16", "nhd", 16, 1, 0, 1, 0, 1)
CONTRACT = RecoveryContract(16, [FullGroup(0), SlidingWindowGroup(1, 4096, 4), RecurrentGroup(2)])
TO_MANAGER = p.FrameDecoder(p.DEFAULT_LIMITS, p.Direction.TO_MANAGER)
TO_CLIENT = p.FrameDecoder(p.DEFAULT_LIMITS, p.Direction.TO_CLIENT)


def doc_examples():
    with open(os.path.join(ROOT, "docs", "protocol.md"), encoding="utf-8") as f:
        text = f.read()
    found = re.findall(r"<!-- example: (\w+) -->\s*```hex\n(.*?)```", text, re.S)
    return {name: bytes.fromhex("".join(body.split())) for name, body in found}


def round_trip(test, data: bytes, decoder=None):
    """Decodes one whole frame with the decoder of its direction and re-encodes it."""
    if decoder is None:
        (type_code,) = struct.unpack_from("<H", data, 6)
        decoder = TO_CLIENT if type_code & 0x8000 else TO_MANAGER
    result = decoder.decode(data)
    test.assertIsInstance(result, p.Decoded)
    test.assertEqual(result.consumed, len(data))
    test.assertEqual(p.encode(result.request_id, result.frame).hex(), data.hex())
    return result


def sample_frames():
    """One value of every frame type (request id, frame)."""
    lease = p.Lease(1, 4096, 100)
    return [
        (1, p.Register("engine-0", 3, NS, CONTRACT)),
        (2, p.RegisterRegion("/dev/shm/region", 8192, 4096, 2)),
        (3, p.RegisterRegion(None, 8192, 4096, 2, bytes(range(16)))),
        (3, p.Query(5, 1, p.CompletionTarget.ENGINE_RESTORE, 100, 16,
                    [p.QueryGroup(0, p.KeyForm.STATE_KEY, [bytes(range(32))] * 2),
                     p.QueryGroup(2, p.KeyForm.BLOCK_HASH, [], 5)], 4000, 300)),
        (4, p.QueryPoll(5, 1)),
        (5, p.Cancel(5)),
        (6, p.PublishReserve([p.PublishPage(0, p.KeyForm.BLOCK_HASH, b"\x01" * 8, 4096)])),
        (6, p.PublishReserve([p.PublishPage(0, p.KeyForm.STATE_KEY, bytes(32), 4096)], "salt-a")),
        (7, p.PublishCommit([1, 2, 3])),
        (8, p.PublishAbort([9])),
        (9, p.Restore(5, 0, [p.RestorePage(0, 1, 0), p.RestorePage(1, 1, 1)])),
        (10, p.Release(5)),
        (11, p.Stats()),
        (12, p.Prepare(6, 1500, 9, 100, 16, [p.QueryGroup(0, p.KeyForm.BLOCK_HASH, [b"\x02" * 8] * 3)])),
        (13, p.Hint(p.HintKind.PIN, [p.QueryGroup(0, p.KeyForm.STATE_KEY, [bytes(range(32))])], 5000)),
        (14, p.Hint(p.HintKind.DROP, [p.QueryGroup(1, p.KeyForm.BLOCK_HASH, [b"\x07" * 8] * 3)])),
        (15, p.Contains([p.QueryGroup(0, p.KeyForm.BLOCK_HASH, [b"\x07" * 8] * 3),
                         p.QueryGroup(2, p.KeyForm.STATE_KEY, [bytes(range(32))])])),
        (1, p.Registered(7, 3, p.DEFAULT_LIMITS, bytes(range(16)), "/run/orbitkv/manager.sock.fd",
                         [p.ArenaFile(1 << 20, 4096)])),
        (2, p.RegionRegistered(0)),
        (3, p.QueryResult(5, 1, p.QueryStatus.FINAL, True, 32,
                          [p.GroupResult(0, [p.Span(1, [p.PageResult(p.PageState.RESIDENT, lease),
                                                        p.PageResult(p.PageState.READY)])])])),
        (3, p.QueryResult(5, 1, p.QueryStatus.PENDING, False, 16,
                          [p.GroupResult(0, [p.Span(0, [p.PageResult(p.PageState.RESERVED)]),
                                             p.Span(4, [p.PageResult(p.PageState.CANDIDATE)])])])),
        (5, p.Cancelled(5, False, 2)),
        (10, p.Released(5, True, 0)),
        (6, p.Reserved([p.Granted(1, 0, 8192), p.Refused(p.Refusal.ALREADY_RESIDENT)])),
        (7, p.Committed([p.SettleOutcome.SEALED, p.SettleOutcome.DISCARDED, p.SettleOutcome.NOT_FOUND])),
        (8, p.Aborted([p.SettleOutcome.ABORTED])),
        (9, p.RestoreAccepted(5, 2)),
        (11, p.StatsReply([p.Counter("query_hits", 3), p.Counter("leases", 0)])),
        (12, p.Prepared(6, p.PrepareOutcome.TRIMMED, 2, 1, 1200, 8192)),
        (13, p.Hinted(p.HintKind.PIN, 1, 2, 3)),
        (15, p.Contained(True, [p.PageLocation.SSD, p.PageLocation.ABSENT, p.PageLocation.DRAM])),
        (15, p.Contained(False, [])),
        (0, p.Completion(5, 1, p.CompletionEvent.RESTORE_DONE, p.Outcome.FAILED, p.ErrorCode.INTERNAL)),
        (0, p.Completion(5, 1, p.CompletionEvent.QUERY_SETTLED, p.Outcome.OK)),
        (0, p.Error(p.ErrorCode.MALFORMED, "")),
        (9, p.Error(p.ErrorCode.NOT_FOUND, "no such operation ✓")),
    ]


class WorkedExamples(unittest.TestCase):
    def test_doc_has_the_examples(self):
        self.assertEqual(sorted(doc_examples()), ["CONTAINED", "CONTAINS", "DESCRIPTOR_ARENAS", "DESCRIPTOR_ARENAS_OK",
                                                  "DESCRIPTOR_REFUSED", "DESCRIPTOR_REGION", "ERROR", "HINT", "HINTED", "QUERY",
                                                  "QUERY_POLL", "REGISTERED", "REGISTER_REGION"])

    def test_registered_and_register_region(self):
        ticket = bytes(range(0x10, 0x20))
        registered = p.Registered(1, 1, p.DEFAULT_LIMITS, ticket, "/run/okv/m.sock.fd", [p.ArenaFile(4096 + 16 * 65536, 65536)])
        data = doc_examples()["REGISTERED"]
        self.assertEqual(p.encode(1, registered), data)
        self.assertEqual(p.FrameDecoder(p.DEFAULT_LIMITS, p.Direction.TO_CLIENT).decode(data).frame, registered)
        region = p.RegisterRegion(None, 65536, 16384, 4, bytes(range(0xa0, 0xb0)))
        self.assertEqual(p.encode(2, region), doc_examples()["REGISTER_REGION"])
        self.assertEqual(round_trip(self, doc_examples()["REGISTER_REGION"]).frame, region)

    def test_descriptor_socket_messages(self):
        ticket = bytes(range(0x10, 0x20))
        self.assertEqual(p.arenas_request(ticket), doc_examples()["DESCRIPTOR_ARENAS"])
        self.assertEqual(p.region_request(), doc_examples()["DESCRIPTOR_REGION"])
        self.assertEqual(p.decode_exchange_reply(doc_examples()["DESCRIPTOR_ARENAS_OK"]), p.ExchangeReply(0, 1, None))
        self.assertEqual(p.decode_exchange_reply(doc_examples()["DESCRIPTOR_REFUSED"]),
                         p.ExchangeReply(p.ErrorCode.TICKET_REFUSED, 0, None))

    def test_query_poll(self):
        data = doc_examples()["QUERY_POLL"]
        self.assertEqual(p.encode(7, p.QueryPoll(3, 1)), data)
        result = round_trip(self, data)
        self.assertEqual((result.request_id, result.frame), (7, p.QueryPoll(3, 1)))

    def test_query(self):
        data = doc_examples()["QUERY"]
        query = p.Query(3, 2, p.CompletionTarget.HOST_READY, 100, 0,
                        [p.QueryGroup(0, p.KeyForm.BLOCK_HASH, [b"\x01" * 8, b"\x02" * 8])], 2000)
        self.assertEqual(p.encode(9, query), data)
        self.assertEqual(round_trip(self, data).frame, query)

    def test_hint_and_hinted(self):
        hint = p.Hint(p.HintKind.PIN, [p.QueryGroup(0, p.KeyForm.BLOCK_HASH, [b"\x01" * 8, b"\x02" * 8])], 30000)
        self.assertEqual(p.encode(5, hint), doc_examples()["HINT"])
        self.assertEqual(round_trip(self, doc_examples()["HINT"]).frame, hint)
        hinted = p.Hinted(p.HintKind.PIN, 2, 0, 0)
        self.assertEqual(p.encode(5, hinted), doc_examples()["HINTED"])
        self.assertEqual(round_trip(self, doc_examples()["HINTED"]).frame, hinted)

    def test_contains_and_contained(self):
        contains = p.Contains([p.QueryGroup(0, p.KeyForm.BLOCK_HASH, [b"\x01" * 8, b"\x02" * 8])])
        self.assertEqual(p.encode(5, contains), doc_examples()["CONTAINS"])
        self.assertEqual(round_trip(self, doc_examples()["CONTAINS"]).frame, contains)
        contained = p.Contained(False, [p.PageLocation.DRAM, p.PageLocation.ABSENT])
        self.assertEqual(p.encode(5, contained), doc_examples()["CONTAINED"])
        self.assertEqual(round_trip(self, doc_examples()["CONTAINED"]).frame, contained)
        data = bytearray(doc_examples()["CONTAINED"])
        data[-1] = 7  # no such location
        with self.assertRaises(p.MalformedFrame) as refused:
            p.FrameDecoder(p.DEFAULT_LIMITS, p.Direction.TO_CLIENT).decode(bytes(data))
        self.assertIn("location", str(refused.exception))

    def test_hint_duration_fits_its_kind(self):
        group = [p.QueryGroup(0, p.KeyForm.BLOCK_HASH, [b"\x01" * 8])]
        with self.assertRaises(p.ProtocolError):
            p.Hint(p.HintKind.PIN, group)  # a PIN of no time
        with self.assertRaises(p.ProtocolError):
            p.Hint(p.HintKind.UNPIN, group, 10)
        data = bytearray(p.encode(5, p.Hint(p.HintKind.DEMOTE, group)))
        struct.pack_into("<I", data, 20, 7)  # duration_millis of a DEMOTE
        with self.assertRaises(p.MalformedFrame) as refused:
            TO_MANAGER.decode(bytes(data))
        self.assertEqual(refused.exception.code, p.ErrorCode.MALFORMED)
        data[16] = 9  # no such kind
        with self.assertRaises(p.MalformedFrame):
            TO_MANAGER.decode(bytes(data))

    def test_error(self):
        data = doc_examples()["ERROR"]
        error = p.Error(p.ErrorCode.NOT_FOUND, "no such operation")
        self.assertEqual(p.encode(9, error), data)
        self.assertEqual(round_trip(self, data).frame, error)

    def test_header_is_struct_notation_of_the_doc(self):
        data = p.encode(7, p.QueryPoll(3, 1))
        self.assertEqual(struct.unpack_from("<IHHQ", data), (28, 2, 0x0004, 7))


class JavaCorpus(unittest.TestCase):
    """Every valid-* file of the Java seed corpus: the Python decoder decodes each frame and
    re-encodes identical bytes."""

    def files(self, prefix):
        found = sorted(glob.glob(os.path.join(CORPUS, prefix + "*")))
        self.assertTrue(found, f"no {prefix}* files under {CORPUS}")
        return found

    def test_every_valid_file_round_trips(self):
        types = set()
        for path in self.files("valid-"):
            with self.subTest(os.path.basename(path)), open(path, "rb") as f:
                data = f.read()
                pos = 0
                while pos < len(data):
                    (length,) = struct.unpack_from("<I", data, pos)
                    result = round_trip(self, data[pos:pos + length])
                    types.add(result.frame.TYPE)
                    pos += length
        self.assertEqual(types, set(p.FrameType), "the corpus has a frame of every type")

    def test_valid_file_stream_decodes_frame_by_frame(self):
        with open(os.path.join(CORPUS, "valid-stream-two-requests"), "rb") as f:
            frames = p.decode_all(f.read(), p.Direction.TO_MANAGER)
        self.assertEqual([d.frame for d in frames], [p.QueryPoll(3, 1), p.Stats()])

    def test_every_malformed_file_is_refused_not_crashed(self):
        for path in self.files("malformed-"):
            with self.subTest(os.path.basename(path)), open(path, "rb") as f:
                data = f.read()
                refused = 0
                for decoder in (TO_MANAGER, TO_CLIENT):
                    pos = 0
                    while pos < len(data):
                        try:
                            result = decoder.decode(data[pos:])
                        except p.MalformedFrame as e:
                            refused += 1
                            if not e.skippable:
                                break
                            pos += e.skip_bytes
                            continue
                        if isinstance(result, p.NeedBytes):
                            refused += 1
                            break
                        pos += result.consumed
                self.assertGreater(refused, 0)


class RoundTrips(unittest.TestCase):
    def test_every_frame_type_round_trips(self):
        seen = set()
        for request_id, frame in sample_frames():
            with self.subTest(frame.TYPE.name):
                data = p.encode(request_id, frame)
                self.assertEqual(struct.unpack_from("<I", data)[0], len(data))
                result = round_trip(self, data)
                if not isinstance(frame, p.Register):  # RecoveryContract compares by identity
                    self.assertEqual(result.frame, frame)
                seen.add(frame.TYPE)
        self.assertEqual(seen, set(p.FrameType))

    def test_every_prefix_needs_bytes(self):
        for request_id, frame in sample_frames():
            data = p.encode(request_id, frame)
            decoder = TO_CLIENT if frame.TYPE & 0x8000 else TO_MANAGER
            for cut in range(len(data)):
                result = decoder.decode(data[:cut])
                self.assertIsInstance(result, p.NeedBytes, f"{frame.TYPE.name} cut at {cut}")
                self.assertEqual(result.count, (4 - cut) if cut < 4 else len(data) - cut)

    def test_random_split_stream_decodes_in_order(self):
        rng = random.Random(SEED)
        frames = sample_frames()
        rng.shuffle(frames)
        to_client = [(i, f) for i, f in frames if f.TYPE & 0x8000]
        stream = b"".join(p.encode(i, f) for i, f in to_client)
        buf, got, pos = bytearray(), [], 0
        while pos < len(stream):
            step = rng.randint(1, 40)
            buf += stream[pos:pos + step]
            pos += step
            while True:
                result = TO_CLIENT.decode(buf)
                if isinstance(result, p.NeedBytes):
                    break
                got.append((result.request_id, result.frame))
                del buf[:result.consumed]
        self.assertEqual(got, to_client, f"seed {SEED}")

    def test_contract_encoding(self):
        data = p.contract_bytes(CONTRACT)
        self.assertEqual(data[:16], b"OKRC" + struct.pack("<III", 1, 16, 3))
        self.assertEqual(data[16:32], struct.pack("<IIII", 1, 0, 0, 0))
        self.assertEqual(data[32:48], struct.pack("<IIII", 2, 1, 4096, 4))
        self.assertEqual(data[48:], struct.pack("<IIII", 3, 2, 0, 0))
        self.assertEqual(p.contract_bytes(p.decode_contract(data)), data)
        for bad in (data[:-1], b"XKRC" + data[4:], data[:12] + struct.pack("<I", 0) + data[16:],
                    data[:16] + struct.pack("<IIII", 1, 0, 7, 0) + data[32:],
                    data[:16] + struct.pack("<IIII", 9, 0, 0, 0) + data[32:]):
            with self.assertRaises(p.ProtocolError):
                p.decode_contract(bad)


class PrepareFrames(unittest.TestCase):
    """PREPARE carries QUERY's demand behind its own header (5.11); PREPARED is never a hit (6.12)."""

    QUERY = p.Query(9, 0, p.CompletionTarget.HOST_READY, 65, 16,
                    [p.QueryGroup(0, p.KeyForm.BLOCK_HASH, [b"\x01" * 8, b"\x02" * 8]),
                     p.QueryGroup(2, p.KeyForm.STATE_KEY, [bytes(range(32))])])

    def test_prepare_lays_out_the_query_demand_behind_its_own_header(self):
        prepare = p.Prepare.of(self.QUERY, 2500, 200)
        data = p.encode(3, prepare)
        self.assertEqual(struct.unpack_from("<HH", data, 4), (p.VERSION, 0x000C))
        self.assertEqual(struct.unpack_from("<QIBBHQQ", data, p.HEADER_BYTES), (9, 2500, 200, 0, 2, 65, 16))
        query = p.encode(3, self.QUERY)
        self.assertEqual(data[p.HEADER_BYTES + 32:], query[p.HEADER_BYTES + 40:], "the groups are QUERY's bytes")
        self.assertEqual(round_trip(self, data).frame, prepare)

    def test_prepared_round_trips_and_its_fields_sit_where_the_table_says(self):
        prepared = p.Prepared(9, p.PrepareOutcome.ACCEPTED, 4, 2, 1500, 4 * 8192)
        data = p.encode(3, prepared)
        self.assertEqual(struct.unpack_from("<QBBHIIIQ", data, p.HEADER_BYTES), (9, 1, 0, 0, 4, 2, 1500, 4 * 8192))
        self.assertEqual(round_trip(self, data).frame, prepared)

    def test_bad_values_are_refused(self):
        with self.assertRaises(p.ProtocolError):
            p.Prepare.of(self.QUERY, 0, 256)
        with self.assertRaises(p.ProtocolError):
            p.Prepare(1, -1, 0, 10, 0, self.QUERY.groups)
        with self.assertRaises(p.ProtocolError):
            p.Prepared(1, p.PrepareOutcome.REFUSED, 1, 0, 0, 0)
        data = bytearray(p.encode(3, p.Prepared(9, p.PrepareOutcome.TRIMMED, 1, 0, 0, 8192)))
        data[p.HEADER_BYTES + 8] = 4  # no such outcome
        with self.assertRaises(p.MalformedFrame) as caught:
            TO_CLIENT.decode(bytes(data))
        self.assertEqual(caught.exception.code, p.ErrorCode.MALFORMED)


class Refusals(unittest.TestCase):
    def refused(self, data, code, skippable, decoder=TO_CLIENT):
        with self.assertRaises(p.MalformedFrame) as caught:
            decoder.decode(data)
        self.assertEqual(caught.exception.code, code, caught.exception.message)
        self.assertEqual(caught.exception.skippable, skippable)
        if skippable:
            self.assertEqual(caught.exception.skip_bytes, struct.unpack_from("<I", data)[0])
        return caught.exception

    def test_length_below_header_is_not_skippable(self):
        self.refused(struct.pack("<I", 15) + bytes(20), p.ErrorCode.MALFORMED, False)

    def test_length_over_limit_is_refused_from_four_bytes(self):
        small = p.FrameDecoder(p.Limits(max_frame_bytes=64), p.Direction.TO_CLIENT)
        self.refused(struct.pack("<I", 65), p.ErrorCode.TOO_LARGE, False, small)
        self.refused(struct.pack("<I", 0xFFFFFFFF), p.ErrorCode.TOO_LARGE, False)

    def test_bad_version_type_direction_and_request_id(self):
        good = bytearray(p.encode(4, p.RegionRegistered(1)))
        bad_version = bytearray(good)
        bad_version[4] = 1  # version 1 (arenas named by /proc path) is refused like any other
        e = self.refused(bytes(bad_version), p.ErrorCode.UNSUPPORTED_VERSION, True)
        self.assertEqual(e.request_id, 4)
        unknown = bytearray(good)
        unknown[6:8] = struct.pack("<H", 0x8004)
        self.refused(bytes(unknown), p.ErrorCode.UNKNOWN_OPERATION, True)
        self.refused(p.encode(1, p.Stats()), p.ErrorCode.UNKNOWN_OPERATION, True)  # wrong direction
        zero_id = bytearray(good)
        zero_id[8:16] = bytes(8)
        self.refused(bytes(zero_id), p.ErrorCode.MALFORMED, True)
        completion = bytearray(p.encode(0, p.Completion(1, 0, p.CompletionEvent.DRAINED, p.Outcome.OK)))
        completion[8] = 1
        self.refused(bytes(completion), p.ErrorCode.MALFORMED, True)

    def test_body_violations_are_skippable_malformed(self):
        def patched(frame, rid, offset, raw):
            data = bytearray(p.encode(rid, frame))
            data[offset:offset + len(raw)] = raw
            return bytes(data)

        released = p.Released(5, True, 1)
        self.refused(patched(released, 1, 25, b"\x01"), p.ErrorCode.MALFORMED, True)  # pad
        self.refused(patched(released, 1, 24, b"\x02"), p.ErrorCode.MALFORMED, True)  # flag
        self.refused(patched(released, 1, 28, b"\xff\xff\xff\xff"), p.ErrorCode.MALFORMED, True)  # > 2^31-1
        self.refused(patched(released, 1, 16, b"\xff" * 8), p.ErrorCode.MALFORMED, True)  # > 2^63-1
        data = p.encode(1, released) + b"\x00"
        data = struct.pack("<I", len(data)) + data[4:]
        self.refused(data, p.ErrorCode.MALFORMED, True)  # trailing byte
        data = p.encode(1, released)[:-1]
        data = struct.pack("<I", len(data)) + data[4:]
        self.refused(data, p.ErrorCode.MALFORMED, True)  # truncated field
        error = p.encode(1, p.Error(p.ErrorCode.BUSY, "ab"))
        self.refused(error[:20] + b"\xc3\x28", p.ErrorCode.MALFORMED, True)  # invalid UTF-8
        self.refused(patched(p.Error(p.ErrorCode.BUSY, "ab"), 1, 16, b"\x63\x00"), p.ErrorCode.MALFORMED, True)
        completion = p.Completion(1, 0, p.CompletionEvent.DRAINED, p.Outcome.OK)
        self.refused(patched(completion, 0, 30, b"\x05\x00"), p.ErrorCode.MALFORMED, True)
        self.refused(patched(completion, 0, 28, b"\x09"), p.ErrorCode.MALFORMED, True)

    def test_a_publish_reserve_tenant_label_is_one_to_64_bytes(self):
        plain = p.encode(6, p.PublishReserve([p.PublishPage(0, p.KeyForm.BLOCK_HASH, b"\x01", 4096)]))
        for n in (0, 65):
            data = plain + struct.pack("<H", n) + b"x" * n
            data = struct.pack("<I", len(data)) + data[4:]
            self.refused(data, p.ErrorCode.MALFORMED, True, TO_MANAGER)
        with self.assertRaises(p.ProtocolError):
            p.PublishReserve([p.PublishPage(0, p.KeyForm.BLOCK_HASH, b"\x01", 4096)], "y" * 65)

    def test_final_hit_with_a_reserved_page_is_malformed(self):
        pending = p.QueryResult(5, 1, p.QueryStatus.PENDING, True, 32,
                                [p.GroupResult(0, [p.Span(0, [p.PageResult(p.PageState.RESERVED)])])])
        data = bytearray(p.encode(3, pending))
        data[28] = p.QueryStatus.FINAL
        self.refused(bytes(data), p.ErrorCode.MALFORMED, True)

    def test_query_result_rules_hold_for_what_is_decoded(self):
        # frames the encoder writes from objects built past their checks, each breaking one rule
        # that the dataclasses enforce; the decoder must refuse each as MALFORMED (and skippable)
        raw = p._decoded
        lease = p.Lease(0, 4096, 4096)

        def result(status, hit, groups, op=5):
            return raw(p.QueryResult, op, 1, status, hit, 32, tuple(groups))

        def group(gid, *spans):
            return raw(p.GroupResult, gid, tuple(spans))

        def span(first, *states):
            return raw(p.Span, first, tuple(raw(p.PageResult, s, lease if s == p.PageState.RESIDENT else None)
                                           for s in states))
        resident, miss = p.PageState.RESIDENT, p.PageState.MISS
        cases = {
            "operation id 0": result(p.QueryStatus.FINAL, True, [group(0, span(0, resident))], op=0),
            "a FINAL miss with a RESIDENT page": result(p.QueryStatus.FINAL, False, [group(0, span(0, resident))]),
            "a FINAL hit with a MISS page": result(p.QueryStatus.FINAL, True, [group(0, span(0, miss))]),
            "duplicate group ids": result(p.QueryStatus.PENDING, False, [group(0, span(0, miss)), group(0, span(0, miss))]),
            "overlapping spans": result(p.QueryStatus.PENDING, False, [group(0, span(0, miss, miss), span(1, miss))]),
            "an empty span": result(p.QueryStatus.PENDING, False, [group(0, span(0))]),
            "a lease of 0 bytes": result(p.QueryStatus.FINAL, True, [group(0, raw(p.Span, 0, (
                raw(p.PageResult, resident, raw(p.Lease, 0, 0, 0)),)))]),
            "an arena index past 2^31-1 inside a run of leases": result(p.QueryStatus.FINAL, True, [group(0, raw(
                p.Span, 0, (raw(p.PageResult, resident, lease), raw(p.PageResult, resident, raw(p.Lease, 1 << 31, 0, 9)),
                            raw(p.PageResult, resident, lease))))]),
        }
        for what, frame in cases.items():
            with self.subTest(what):
                self.refused(p.encode(3, frame), p.ErrorCode.MALFORMED, True)
        good = p.QueryResult(5, 1, p.QueryStatus.FINAL, True, 32, [p.GroupResult(0, [p.Span(0, [
            p.PageResult(resident, lease), p.PageResult(resident, p.Lease(1, 8192, 4096))]), p.Span(5, [
            p.PageResult(p.PageState.READY)])]), p.GroupResult(7, [])])
        decoded = TO_CLIENT.decode(p.encode(3, good)).frame
        self.assertEqual(decoded, good)
        self.assertEqual(hash(decoded), hash(good))

    def test_counts_over_budget_are_too_large_before_allocation(self):
        small = p.FrameDecoder(p.Limits(max_ids_per_settle=2), p.Direction.TO_CLIENT)
        committed = p.encode(1, p.Committed([p.SettleOutcome.SEALED] * 3))
        self.refused(committed, p.ErrorCode.TOO_LARGE, True, small)
        huge = bytearray(p.encode(1, p.Committed([p.SettleOutcome.SEALED])))
        huge[16:20] = struct.pack("<I", 4000)  # under the budget, but the bytes are not there
        self.refused(bytes(huge), p.ErrorCode.MALFORMED, True)
        long_message = p.encode(1, p.Error(p.ErrorCode.BUSY, "x" * 200))
        tiny = p.FrameDecoder(p.Limits(max_string_bytes=100), p.Direction.TO_CLIENT)
        self.refused(long_message, p.ErrorCode.TOO_LARGE, True, tiny)

    def test_query_limits(self):
        query = p.Query(1, 0, p.CompletionTarget.HOST_READY, 64, 0,
                        [p.QueryGroup(g, p.KeyForm.BLOCK_HASH, [b"\x07" * 8] * 3) for g in range(3)])
        data = p.encode(1, query)
        self.refused(data, p.ErrorCode.TOO_LARGE, True,
                     p.FrameDecoder(p.Limits(max_groups_per_query=2), p.Direction.TO_MANAGER))
        self.refused(data, p.ErrorCode.TOO_LARGE, True,
                     p.FrameDecoder(p.Limits(max_pages_per_query=8), p.Direction.TO_MANAGER))
        bad_key = bytearray(data)
        bad_key[60] = p.KeyForm.STATE_KEY  # a STATE_KEY group of 8-byte hashes (key_form: body 44)
        self.refused(bytes(bad_key), p.ErrorCode.MALFORMED, True, TO_MANAGER)

    def test_query_prefill_rate_and_peer_wait_are_u31s(self):
        query = p.Query(1, 0, p.CompletionTarget.HOST_READY, 64, 0,
                        [p.QueryGroup(0, p.KeyForm.BLOCK_HASH, [b"\x07" * 8])], 1500, 250)
        data = p.encode(1, query)
        self.assertEqual(struct.unpack_from("<I", data, 16 + 32)[0], 1500)
        self.assertEqual(struct.unpack_from("<I", data, 16 + 36)[0], 250)
        self.assertEqual(round_trip(self, data).frame, query)
        for offset in (32, 36):
            huge = bytearray(data)
            struct.pack_into("<I", huge, 16 + offset, 0x80000000)
            self.refused(bytes(huge), p.ErrorCode.MALFORMED, True, TO_MANAGER)
        with self.assertRaises(p.ProtocolError):
            p.Query(1, 0, p.CompletionTarget.HOST_READY, 64, 0, [p.QueryGroup(0, p.KeyForm.BLOCK_HASH, [b"x"])], -1)
        with self.assertRaises(p.ProtocolError):
            p.Query(1, 0, p.CompletionTarget.HOST_READY, 64, 0, [p.QueryGroup(0, p.KeyForm.BLOCK_HASH, [b"x"])], 0, -1)

    def test_values_that_cannot_be_built(self):
        with self.assertRaises(p.ProtocolError):
            p.Query(1, 0, p.CompletionTarget.HOST_READY, 10, 10, [p.QueryGroup(0, p.KeyForm.BLOCK_HASH, [b"x"])])
        with self.assertRaises(p.ProtocolError):
            p.PageResult(p.PageState.RESIDENT)
        with self.assertRaises(p.ProtocolError):
            p.Restore(1, 0, [p.RestorePage(0, 1, 0), p.RestorePage(0, 2, 0)])
        with self.assertRaises(p.ProtocolError):
            p.Aborted([p.SettleOutcome.SEALED])
        with self.assertRaises(p.ProtocolError):
            p.encode(0, p.Stats())
        with self.assertRaises(p.ProtocolError):
            p.encode(1, p.Completion(1, 0, p.CompletionEvent.DRAINED, p.Outcome.OK))
        with self.assertRaises(p.ProtocolError):
            p.Register("i", 0, NS, RecoveryContract(32, [FullGroup(0)]))

    def test_random_garbage_never_escapes_as_another_exception(self):
        rng = random.Random(SEED)
        frames = [p.encode(i, f) for i, f in sample_frames()]
        for _ in range(3000):
            data = bytearray(rng.choice(frames))
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            for decoder in (TO_CLIENT, TO_MANAGER):
                try:
                    result = decoder.decode(bytes(data))
                except p.MalformedFrame:
                    continue
                except Exception as e:  # pragma: no cover - the failure message is the point
                    self.fail(f"seed {SEED}: {type(e).__name__}: {e} on {bytes(data).hex()}")
                if isinstance(result, p.Decoded):
                    self.assertEqual(p.encode(result.request_id, result.frame),
                                     bytes(data[:result.consumed]), f"seed {SEED}")


if __name__ == "__main__":
    unittest.main()
