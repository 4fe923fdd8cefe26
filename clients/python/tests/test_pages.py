"""ManagerPages, the adapters' facade, against a real Manager process: bytes round trip; two
namespaces never see each other's pages; a gap ends the present prefix; a page only on SSD is
PENDING and then read whole; a page only on SSD that was prepared is FINAL at once for the lookup
that takes the prepare over, and a cancelled prepare holds nothing; and every Manager failure (no Manager, a Manager that never answers, a
killed Manager, a restarted one) is a miss within the timeout, counted, then a reconnect."""

import os
import socket
import tempfile
import threading
import time
import unittest

from orbitkv.identity import EngineIdentity
from orbitkv import protocol
from orbitkv.client import OrbitKvError, PageParts
from orbitkv.pages import MAX_PARKED_OPERATIONS, ManagerPages
from orbitkv.protocol import ErrorCode
from tests.test_manager import JAR, ManagerProcess, wait_for

PAGE_BYTES = 64 * 1024


def identity(**changes):
    fields = dict(model_id="test/pages", dtype="bfloat16", kv_dtype="auto", page_tokens=16, kv_layout="test:flat")
    fields.update(changes)
    return EngineIdentity(**fields).namespace()


def names(n, tag=b"p"):
    return [tag + i.to_bytes(4, "little") + bytes(27) for i in range(n)]


def image(i):
    return bytes([(i * 7 + 1) % 256]) * (PAGE_BYTES - 1) + bytes([i % 256])


def read_all(store, page_names, wait_s=None):
    got = {}
    count = store.read_into(page_names, lambda i, view: got.__setitem__(i, bytes(view)), wait_s)
    return count, [got[i] for i in range(count)]


@unittest.skipUnless(JAR, "ORBITKV_JAR is not set: run through `bin/orbitkv test`")
class ManagerPagesTest(unittest.TestCase):

    @classmethod
    def setUpClass(cls):
        cls.manager = ManagerProcess()

    @classmethod
    def tearDownClass(cls):
        cls.manager.stop()

    def test_pages_written_by_one_store_are_read_by_another_byte_for_byte(self):
        writer, reader = ManagerPages(self.manager.socket, identity()), ManagerPages(self.manager.socket, identity())
        try:
            page_names = names(4, b"rt")
            self.assertEqual(writer.write([(n, image(i)) for i, n in enumerate(page_names)]), [True] * 4)
            self.assertEqual(writer.write([(page_names[0], image(0))]), [True], "already resident is stored")
            self.assertEqual(sum(bin(b).count("1") for bits in writer._client._written for b in bits), 4,
                             "each of the four granted slots was mapped once before its first copy")
            self.assertEqual(reader.contains(page_names), 4)
            count, pages = read_all(reader, page_names)
            self.assertEqual(count, 4)
            self.assertEqual(pages, [image(i) for i in range(4)])
            stats = reader.snapshot()
            self.assertEqual((stats["pages_read"], stats["connects"]), (4, 1))
            self.assertEqual(writer.snapshot()["write_already_resident"], 1)
        finally:
            writer.close()
            reader.close()

    def test_a_page_in_parts_is_stored_as_their_concatenation_and_an_oversized_one_is_refused_whole(self):
        writer, reader = ManagerPages(self.manager.socket, identity()), ManagerPages(self.manager.socket, identity())
        try:
            page_names = names(3, b"parts")
            whole = [image(i) for i in range(3)]
            # a K run and a V run of unequal lengths, from bytes, a bytearray and a 2-byte-item view
            split = [PageParts([w[:1000], bytearray(w[1000:PAGE_BYTES // 2]), memoryview(w[PAGE_BYTES // 2:]).cast("H")])
                     for w in whole]
            self.assertEqual([len(s) for s in split], [PAGE_BYTES] * 3)
            self.assertEqual(writer.write([(n, s) for n, s in zip(page_names, split)]), [True] * 3)
            self.assertEqual(read_all(reader, page_names), (3, whole), "the parts, in order, are the page")
            largest = max(a.slot_bytes for a in writer._client.registered.arenas)
            too_large = PageParts([bytes(largest), b"x"])
            self.assertEqual(writer.write([(names(1, b"big")[0], too_large)]), [False])
            self.assertEqual(writer.snapshot()["write_too_large"], 1, "refused by its total length, before any copy")
        finally:
            writer.close()
            reader.close()

    def test_another_namespace_or_a_gap_ends_the_hit(self):
        a = ManagerPages(self.manager.socket, identity())
        other = ManagerPages(self.manager.socket, identity(kv_dtype="fp8_e4m3"))
        try:
            page_names = names(4, b"gap")
            a.write([(n, image(i)) for i, n in enumerate(page_names) if i != 2])
            self.assertEqual(a.contains(page_names), 2, "page 2 is missing: the prefix ends there")
            self.assertEqual(other.contains(page_names), 0, "another KV dtype is another namespace")
            self.assertEqual(read_all(other, page_names)[0], 0)
        finally:
            a.close()
            other.close()

    def test_a_page_above_the_largest_slot_is_refused_and_the_connection_stays(self):
        store = ManagerPages(self.manager.socket, identity())
        try:
            big, small = names(2, b"big")
            self.assertEqual(store.write([(big, bytes(3 << 20))]), [False])  # the largest slot is 2 MiB
            self.assertEqual(store.write([(small, image(1))]), [True])
            stats = store.snapshot()
            self.assertEqual((stats["write_refused"], stats["write_too_large"], stats["connects"],
                              stats["failures_error"]), (1, 1, 1, 0))
        finally:
            store.close()

    def test_each_page_on_its_own_in_one_pipelined_batch(self):
        store = ManagerPages(self.manager.socket, identity())
        try:
            page_names = names(6, b"each")
            store.write([(n, image(i)) for i, n in enumerate(page_names) if i in (0, 2, 3)])
            before = self.manager.metric_sum("orbitkv_manager_contains_pages_total")
            self.assertEqual(store.present_each(page_names), [True, False, True, True, False, False])
            self.assertEqual(self.manager.metric_sum("orbitkv_manager_contains_pages_total") - before, 6,
                             "one CONTAINS named the six pages")
            self.assertEqual((store._parked, len(store._client._operations)), ([], 0),
                             "a presence check creates no operation, so there is nothing to park or release")
            short = [b"each-s-1", b"each-s-2"]  # 8-byte names ride in a CONTAINS of their own width
            store.write([(short[1], image(9))])
            self.assertEqual(store.present_each([short[0], page_names[0], short[1], page_names[1]]),
                             [False, True, True, False])
            got = {}
            found = store.read_each(page_names, lambda i, view: got.__setitem__(i, bytes(view)))
            self.assertEqual(found, [True, False, True, True, False, False])
            self.assertEqual(got, {0: image(0), 2: image(2), 3: image(3)})
            self.assertEqual(store._client.stats()["leases"], 0)
            self.assertEqual(len(store._client._operations), len(store._parked),
                             "the client keeps state only for the parked misses' operations")
        finally:
            store.close()

    def test_a_manager_that_predates_contains_is_asked_with_one_query_per_name(self):
        store = ManagerPages(self.manager.socket, identity(), retry_after_s=0)
        try:
            page_names = names(3, b"old")
            store.write([(page_names[1], image(1))])
            client = store._connected()
            refusals = []

            def refuse(groups):  # what a Manager without CONTAINS answers: the type is unknown to it
                refusals.append(groups)
                raise OrbitKvError(ErrorCode.UNKNOWN_OPERATION, "frame type 0x000e is unknown")
            client.contains = refuse
            before = self.manager.metric_sum("orbitkv_manager_queries_total")
            self.assertEqual(store.present_each(page_names), [False, True, False])
            self.assertEqual(store.present_each(page_names), [False, True, False])
            self.assertEqual(len(refusals), 1, "asked once; the store remembers the Manager's answer")
            self.assertEqual(self.manager.metric_sum("orbitkv_manager_queries_total") - before, 6, "one QUERY per name")
            stats = store.snapshot()
            self.assertEqual((stats["lookups"], stats["lookup_pages"], stats["failures_error"], stats["connects"]),
                             (2, 6, 0, 1), "counted once per call, not a failure, the connection kept")
            store._failed(client, "failures_error", ConnectionError("a test drops the connection"))
            named = self.manager.metric_sum("orbitkv_manager_contains_pages_total")
            self.assertEqual(store.present_each(page_names), [False, True, False])
            self.assertEqual(self.manager.metric_sum("orbitkv_manager_contains_pages_total") - named, 3,
                             "a new connection asks with CONTAINS again (the Manager may have been upgraded)")
        finally:
            store.close()

    def test_at_an_engines_pace_parked_misses_and_unread_replies_stay_right(self):
        # one lookup per request, seconds apart: the parked operation outlives the pause, the
        # RELEASEs written without waiting are drained by the idle reader meanwhile, a page
        # published between two requests is a hit at the next
        store = ManagerPages(self.manager.socket, identity())
        try:
            page_names = names(2, b"pace")
            self.assertEqual(store.contains(page_names), 0)
            (op, _), = store._parked
            time.sleep(1.5)
            self.assertEqual(store.contains(page_names), 0)
            self.assertEqual(store._parked, [(op, 1)], "the same operation, asked again at the next revision")
            self.assertEqual(store.write([(n, image(i)) for i, n in enumerate(page_names)]), [True, True])
            time.sleep(1.5)
            self.assertEqual(store.present_each(page_names), [True, True])
            time.sleep(1.5)
            client = store._client
            self.assertEqual(len(client._pending), 0, "the idle reader read the RELEASED replies no call waited for")
            self.assertEqual(client.stats()["leases"], 0)
            self.assertEqual(store.contains(page_names), 2)
            stats = store.snapshot()
            self.assertEqual((stats["failures_error"], stats["failures_timeout"], stats["connects"]), (0, 0, 1))
        finally:
            store.close()

    def test_a_missed_lookup_parks_its_operation_and_the_next_lookup_replaces_it(self):
        store = ManagerPages(self.manager.socket, identity())
        try:
            page_names = names(3, b"park")
            self.assertEqual(store.contains(page_names), 0)
            self.assertEqual(len(store._parked), 1, "the miss's operation is kept, not released")
            (op, revision), = store._parked
            store.write([(n, image(i)) for i, n in enumerate(page_names)])
            got = {}
            self.assertEqual(store.read_into(page_names, lambda i, view: got.__setitem__(i, bytes(view))), 3,
                             "the next lookup asks again at the next revision and finds what was published since")
            self.assertEqual(got, {i: image(i) for i in range(3)})
            self.assertEqual(store._parked, [], "a hit is released, never parked")
            wait_for(lambda: store._client.stats()["leases"] == 0, "the hit's leases released")
            self.assertNotIn(op, store._client._operations._ops, "the hit's RELEASE ended the parked operation")
            misses = [[os.urandom(32)] for _ in range(MAX_PARKED_OPERATIONS + 10)]
            self.assertEqual(store.read_each([m[0] for m in misses], lambda i, view: None), [False] * len(misses))
            self.assertEqual(len(store._parked), MAX_PARKED_OPERATIONS, "parking is bounded")
            for m in misses[:5]:
                self.assertEqual(store.contains(m), 0)
            self.assertEqual(len(store._parked), MAX_PARKED_OPERATIONS, "lookups reuse parked operations")
            self.assertEqual(store._client.stats()["leases"], 0, "a miss holds nothing")
            self.assertEqual(store.snapshot()["failures_error"], 0)
        finally:
            store.close()

    def test_a_store_keeps_no_lease_after_a_lookup_it_closed(self):
        store = ManagerPages(self.manager.socket, identity())
        try:
            page_names = names(2, b"lease")
            store.write([(n, image(i)) for i, n in enumerate(page_names)])
            for _ in range(3):
                lookup = store.lookup(page_names)
                self.assertEqual(lookup.pages, 2)
                lookup.close()
                lookup.close()  # idempotent
            self.assertEqual(store._client.stats()["leases"], 0)
        finally:
            store.close()


def publish_through_ssd(test, store, manager, page_names):
    """Publishes ``page_names`` (write-through), 32 at a time, each batch on SSD before the next (a
    full write-through queue would skip pages)."""
    for start in range(0, len(page_names), 32):
        batch = page_names[start:start + 32]
        deadline = time.monotonic() + 20  # NO_SPACE while the SSD writer catches up: publish again
        while not all(store.write([(n, image(start + i)) for i, n in enumerate(batch)])):
            test.assertLess(time.monotonic(), deadline, f"batch at {start} was never stored")
            time.sleep(0.05)
        wait_for(lambda: manager.metric_sum("orbitkv_ssd_writes_total") >= start + len(batch), "write-through", 30)


@unittest.skipUnless(JAR, "ORBITKV_JAR is not set: run through `bin/orbitkv test`")
@unittest.skipUnless(JAR, "ORBITKV_JAR is not set: run through `bin/orbitkv test`")
class ContainsSlicingTest(unittest.TestCase):
    """A presence check larger than one frame the Manager accepts goes out in frames that fit."""

    MAX_FRAME = 4096

    def test_a_batch_past_the_frame_limit_is_asked_in_frames_that_fit(self):
        manager = ManagerProcess(extra_args=["--set", f"maxFrameBytes={self.MAX_FRAME}"])
        store = ManagerPages(manager.socket, identity())
        try:
            wide = [bytes([i % 256, i // 256]) + bytes(62) for i in range(200)]  # 64-byte names
            stored = set(range(0, 200, 7))
            self.assertEqual(store.write([(wide[i], image(i)) for i in sorted(stored)]), [True] * len(stored))
            client = store._client
            self.assertEqual(client.registered.limits.max_frame_bytes, self.MAX_FRAME)
            sizes, contains = [], client.contains

            def measured(groups):
                sizes.append(len(protocol.encode(1, protocol.Contains(tuple(groups)))))
                return contains(groups)
            client.contains = measured
            self.assertEqual(store.present_each(wide), [i in stored for i in range(200)])
            per_frame = (self.MAX_FRAME - protocol.CONTAINS_ONE_GROUP_BYTES) // 64
            self.assertEqual(per_frame, 63, "premise: 64 names would not fit one frame")
            self.assertEqual(len(sizes), 4, f"200 names in frames of at most 63: {sizes}")
            self.assertTrue(all(size <= self.MAX_FRAME for size in sizes), sizes)
            self.assertGreater(max(sizes) + 64, self.MAX_FRAME, "one name more would not fit: the frames are full")
            self.assertEqual(store.snapshot()["failures_error"], 0)
        finally:
            store.close()
            manager.stop()


class StagingTest(unittest.TestCase):

    def test_a_page_only_on_ssd_is_pending_then_read_whole(self):
        manager = ManagerProcess(dram_bytes="16m", ssd_bytes="64m", extra_args=["--ssd-policy", "write-through"])
        store = ManagerPages(manager.socket, identity(), timeout_s=10)
        try:
            page_names = names(384, b"ssd")  # 24 MiB through a 16 MiB DRAM tier: the first pages leave DRAM
            publish_through_ssd(self, store, manager, page_names)
            first = page_names[:2]
            deadline = time.monotonic() + 20
            lookup = store.lookup(first)
            while not lookup.pending and time.monotonic() < deadline:  # until the write-through copies landed
                lookup.close()
                time.sleep(0.05)
                lookup = store.lookup(first)
            self.assertTrue(lookup.pending, "the first pages are only on SSD: staging them is PENDING")
            got = {}
            self.assertEqual(lookup.read_into(lambda i, v: got.__setitem__(i, bytes(v))), 2)
            self.assertEqual([got[0], got[1]], [image(0), image(1)])
            self.assertGreaterEqual(store.snapshot()["pending"], 1)
        finally:
            store.close()
            manager.stop()


@unittest.skipUnless(JAR, "ORBITKV_JAR is not set: run through `bin/orbitkv test`")
class PrepareTest(unittest.TestCase):

    def test_a_prepared_page_from_ssd_is_final_for_its_lookup_and_a_cancelled_one_holds_nothing(self):
        manager = ManagerProcess(dram_bytes="16m", ssd_bytes="64m", extra_args=["--ssd-policy", "write-through"])
        store = ManagerPages(manager.socket, identity(), timeout_s=10, max_prepares=2)
        try:
            page_names = names(384, b"prep")  # 24 MiB through a 16 MiB DRAM tier: the first pages leave DRAM
            publish_through_ssd(self, store, manager, page_names)
            # RELEASEs are written without waiting for their answers: none of the earlier leases is left
            wait_for(lambda: manager.leases() == 0, "the publishing lookups' leases to be released", 10)
            first, second = page_names[:4], page_names[4:8]
            op = store.prepare(first, first_use_ms=0, priority=5)
            self.assertGreater(op, 0)
            wait_for(lambda: manager.metric_sum("orbitkv_manager_prepared_pages_held") == 4,
                     "the four SSD pages staged and held for the prepare", 20)
            self.assertEqual(manager.leases(), 0, "a prepare leases nothing")
            lookup = store.lookup(first, prepared=op)
            self.assertFalse(lookup.pending, "the prepared pages are in DRAM: FINAL at once")
            got = {}
            self.assertEqual(lookup.read_into(lambda i, v: got.__setitem__(i, bytes(v))), 4)
            self.assertEqual([got[i] for i in range(4)], [image(i) for i in range(4)])
            self.assertEqual(manager.metric_sum("orbitkv_prepare_pages_released_total", 'outcome="consumed"'), 4)
            self.assertEqual(manager.metric_sum("orbitkv_manager_prepared_pages_held"), 0)

            op2 = store.prepare(second)
            wait_for(lambda: manager.metric_sum("orbitkv_manager_prepared_pages_held") == 4, "second prepare", 20)
            self.assertTrue(store.cancel_prepare(op2))
            self.assertFalse(store.cancel_prepare(op2), "ended once")
            wait_for(lambda: manager.metric_sum("orbitkv_manager_speculation_held_bytes") == 0,
                     "the cancelled prepare's bytes back in the budget")
            self.assertEqual(manager.metric_sum("orbitkv_prepare_pages_released_total", 'outcome="unused"'), 4)

            self.assertGreater(store.prepare(page_names[8:9], first_use_ms=60_000), 0)
            self.assertGreater(store.prepare(page_names[9:10], first_use_ms=60_000), 0)
            self.assertEqual(store.prepare(page_names[10:11]), 0, "max_prepares live: a counted no-op")
            stats = store.snapshot()
            self.assertEqual((stats["prepares"], stats["prepare_pages"], stats["prepare_skipped"]), (4, 10, 1))
            self.assertEqual((stats["prepare_taken_over"], stats["prepare_cancelled"]), (1, 1))
            self.assertEqual(stats["pending"], 0, "no lookup had to wait for SSD")
        finally:
            store.close()
            manager.stop()

    def test_prepare_with_no_manager_is_a_counted_no_op(self):
        store = ManagerPages(os.path.join(tempfile.gettempdir(), f"okv-none-{os.getpid()}.sock"), identity(),
                             timeout_s=0.5, retry_after_s=5.0)
        try:
            self.assertEqual(store.prepare(names(3)), 0)
            self.assertEqual(store.prepare(names(3)), 0)
            self.assertFalse(store.cancel_prepare(1))
            self.assertEqual(store.lookup(names(3), prepared=1).pages, 0)
            stats = store.snapshot()
            self.assertEqual((stats["prepare_skipped"], stats["prepares"], stats["failures_connect"]), (2, 0, 1))
        finally:
            store.close()


class FailureTest(unittest.TestCase):

    def test_no_manager_is_a_miss_at_once_then_a_skip_until_the_retry_time(self):
        now = [100.0]
        store = ManagerPages(os.path.join(tempfile.gettempdir(), f"okv-none-{os.getpid()}.sock"), identity(),
                             timeout_s=0.5, retry_after_s=5.0, clock=lambda: now[0])
        started = time.monotonic()
        self.assertEqual(store.contains(names(3)), 0)
        self.assertEqual(store.write([(names(1)[0], image(0))]), [False])
        self.assertEqual(read_all(store, names(3))[0], 0)
        self.assertLess(time.monotonic() - started, 0.5)
        stats = store.snapshot()
        self.assertEqual((stats["failures_connect"], stats["skipped_down"]), (1, 2))
        now[0] += 5.0
        store.contains(names(1))
        self.assertEqual(store.snapshot()["failures_connect"], 2, "after retry_after_s it tries again")
        now[0] += 5.0
        store.contains(names(1))
        self.assertEqual(store.snapshot()["failures_connect"], 2, "a second failure in a row doubles the window")
        now[0] += 5.0
        store.contains(names(1))
        self.assertEqual(store.snapshot()["failures_connect"], 3)

    def test_a_manager_that_never_answers_costs_one_timeout_then_misses(self):
        path = os.path.join(tempfile.mkdtemp(prefix="okv-mute-"), "m.sock")
        mute = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        mute.bind(path)
        mute.listen(8)
        accepted = []
        threading.Thread(target=lambda: accepted.append(mute.accept()[0]), daemon=True).start()
        store = ManagerPages(path, identity(), timeout_s=0.3, retry_after_s=60)
        try:
            started = time.monotonic()
            self.assertEqual(store.contains(names(2)), 0)
            self.assertEqual(store.contains(names(2)), 0)
            elapsed = time.monotonic() - started
            self.assertLess(elapsed, 2.0, "one bounded wait, then misses without waiting")
            self.assertGreaterEqual(elapsed, 0.3)
            stats = store.snapshot()
            self.assertEqual((stats["failures_connect"], stats["skipped_down"]), (1, 1))
        finally:
            store.close()
            mute.close()
            for connection in accepted:
                connection.close()

    @unittest.skipUnless(JAR, "ORBITKV_JAR is not set: run through `bin/orbitkv test`")
    def test_a_killed_manager_is_a_miss_and_a_restarted_one_serves_again(self):
        path = os.path.join(tempfile.mkdtemp(prefix="okv-restart-"), "m.sock")
        manager = ManagerProcess(socket_path=path)
        store = ManagerPages(path, identity(), timeout_s=2, retry_after_s=0.2)
        try:
            page_names = names(2, b"kill")
            self.assertEqual(store.write([(n, image(i)) for i, n in enumerate(page_names)]), [True, True])
            manager.proc.kill()
            manager.proc.wait(30)
            self.assertEqual(store.contains(page_names), 0)
            self.assertEqual(store.write([(page_names[0], image(0))]), [False])
            self.assertGreaterEqual(store.snapshot()["failures_error"] + store.snapshot()["failures_connect"], 1)
            manager.stop()
            os.unlink(path) if os.path.exists(path) else None
            manager = ManagerProcess(socket_path=path)
            deadline = time.monotonic() + 10
            while not all(store.write([(n, image(i)) for i, n in enumerate(page_names)])):
                self.assertLess(time.monotonic(), deadline, "the store did not reconnect")
                time.sleep(0.1)
            self.assertEqual(read_all(store, page_names)[1], [image(0), image(1)])
            self.assertGreaterEqual(store.snapshot()["connects"], 2)
        finally:
            store.close()
            manager.stop()


if __name__ == "__main__":
    unittest.main()
