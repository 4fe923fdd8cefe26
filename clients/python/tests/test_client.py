"""orbitkv.client against a scripted stand-in Manager (exact frame sequences of docs/protocol.md,
real shared files, no Manager logic): arenas mapped and written where granted, COMPLETIONs routed
to the waiting call, ERROR raised as OrbitKvError, pipelined replies matched by request id."""

import os
import random
import socket
import struct
import tempfile
import threading
import time
import unittest

from orbitkv import protocol as p
from orbitkv.client import Client, OrbitKvError, PageToPublish, PublishOutcome
from orbitkv.state import FullGroup, Namespace, RecoveryContract

NS = Namespace("m", "r", "sha256:w", "sha256:t", "", "bf16", "nhd", 16, 1, 0, 1, 0, 1)
CONTRACT = RecoveryContract(16, [FullGroup(0)])
SLOT = 4096


TICKET = bytes([7] * 16)


class ScriptedManager:
    """Accepts one connection; answers each request with ``script(request_id, request)``: a list
    of (request id, frame) written back in order (0 for COMPLETION). Beside it a scripted
    descriptor socket (protocol 6.11) passes ``arena_fds`` for :data:`TICKET` and keeps region
    descriptors handed over (``region_fds``)."""

    def __init__(self, directory, script, arena_fds=()):
        self.path = os.path.join(directory, "manager.sock")
        self.descriptor_path = os.path.abspath(self.path + ".fd")
        self.arena_fds = list(arena_fds)
        self.region_fds = []
        self.received = []
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(self.path)
        self.server.listen(1)
        self.descriptors = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.descriptors.bind(self.descriptor_path)
        self.descriptors.listen(4)
        self.thread = threading.Thread(target=self._serve, args=(script,), daemon=True)
        self.thread.start()
        self.descriptor_thread = threading.Thread(target=self._serve_descriptors, daemon=True)
        self.descriptor_thread.start()

    def registered(self, epoch, arenas):
        return p.Registered(7, epoch, p.DEFAULT_LIMITS, TICKET, self.descriptor_path, arenas)

    def _serve_descriptors(self):
        while True:
            try:
                conn, _ = self.descriptors.accept()
            except OSError:
                return
            with conn:
                data, fds, _, _ = socket.recv_fds(conn, p.EXCHANGE_BYTES, 1)
                op = struct.unpack_from("<H", data, 6)[0]
                if op == p.OP_REGION and len(fds) == 1:
                    self.region_fds.append(fds[0])
                    socket.send_fds(conn, [p.EXCHANGE_MAGIC + struct.pack("<HH", 0, 0) + bytes([9] * 16)], [])
                elif op == p.OP_ARENAS and data[8:] == TICKET:
                    socket.send_fds(conn, [p.EXCHANGE_MAGIC + struct.pack("<HH", 0, len(self.arena_fds)) + bytes(16)],
                                    self.arena_fds)
                else:
                    conn.sendall(p.EXCHANGE_MAGIC + struct.pack("<HH", p.ErrorCode.TICKET_REFUSED, 0) + bytes(16))

    def drop_connection(self):
        """Closes the accepted connection as a Manager that goes away would."""
        self.conn.shutdown(socket.SHUT_RDWR)

    def _serve(self, script):
        decoder = p.FrameDecoder(p.DEFAULT_LIMITS, p.Direction.TO_MANAGER)
        conn, _ = self.server.accept()
        self.conn = conn
        buf = bytearray()
        with conn:
            while True:
                try:
                    chunk = conn.recv(65536)
                except OSError:
                    return
                if not chunk:
                    return
                buf += chunk
                while True:
                    result = decoder.decode(buf)
                    if isinstance(result, p.NeedBytes):
                        break
                    del buf[:result.consumed]
                    self.received.append(result.frame)
                    conn.sendall(b"".join(p.encode(i, f) for i, f in script(result.request_id, result.frame)))

    def close(self):
        self.server.close()
        self.descriptors.shutdown(socket.SHUT_RDWR)
        self.descriptors.close()
        self.thread.join(5)
        self.descriptor_thread.join(5)
        for fd in self.region_fds:
            os.close(fd)


class ClientAgainstScript(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        # the arena is a memfd the scripted descriptor socket passes; the test sees it through its own descriptor
        self.arena_fd = os.memfd_create("test-arena")
        os.ftruncate(self.arena_fd, 16 * SLOT)
        self.addCleanup(os.close, self.arena_fd)
        self.arena = f"/proc/self/fd/{self.arena_fd}"

    def start(self, script):
        def full(request_id, request):
            if isinstance(request, p.Register):
                return [(request_id, manager.registered(request.epoch, [p.ArenaFile(16 * SLOT, SLOT)]))]
            return script(request_id, request)
        manager = ScriptedManager(self.tmp.name, full, [self.arena_fd])
        self.addCleanup(manager.close)
        client = Client(manager.path, timeout=5)
        self.addCleanup(client.close)
        client.register("engine-0", 1, NS, CONTRACT)
        return manager, client

    def test_publish_writes_granted_slots_and_commits_only_those(self):
        def script(rid, request):
            if isinstance(request, p.PublishReserve):
                return [(rid, p.Reserved([p.Granted(11, 0, 2 * SLOT), p.Refused(p.Refusal.NO_SPACE)]))]
            return [(rid, p.Committed([p.SettleOutcome.SEALED]))]
        manager, client = self.start(script)
        outcomes = client.publish([PageToPublish(0, b"\x01" * 8, b"abc" * 100), PageToPublish(0, b"\x02" * 8, b"z")])
        self.assertEqual(outcomes, [PublishOutcome.SEALED, PublishOutcome.NO_SPACE])
        with open(self.arena, "rb") as f:
            data = f.read()
        self.assertEqual(data[2 * SLOT:2 * SLOT + 300], b"abc" * 100)
        self.assertEqual(data[2 * SLOT + 300], 0)
        self.assertEqual(manager.received[-1], p.PublishCommit([11]))

    def test_pending_query_settles_on_completion_then_reads_lease(self):
        lease = p.Lease(0, 3 * SLOT, 5)
        with open(self.arena, "r+b") as f:
            f.seek(3 * SLOT)
            f.write(b"hello")

        def result(op, rev, status):
            page = p.PageResult(p.PageState.RESIDENT, lease) if status == p.QueryStatus.FINAL \
                else p.PageResult(p.PageState.RESERVED)
            return p.QueryResult(op, rev, status, True, 16, [p.GroupResult(0, [p.Span(0, [page])])])

        def script(rid, request):
            if isinstance(request, p.Query):
                return [(rid, result(request.operation_id, request.revision, p.QueryStatus.PENDING)),
                        (0, p.Completion(request.operation_id, request.revision, p.CompletionEvent.QUERY_SETTLED,
                                         p.Outcome.OK))]
            if isinstance(request, p.QueryPoll):
                return [(rid, result(request.operation_id, request.revision, p.QueryStatus.FINAL))]
            return [(rid, p.Released(request.operation_id, False, 1)),
                    (0, p.Completion(request.operation_id, 2, p.CompletionEvent.DRAINED, p.Outcome.OK))]
        _, client = self.start(script)
        first = client.query(5, {0: [b"\x01" * 8]}, prompt_tokens=20, revision=2)
        self.assertEqual(first.status, p.QueryStatus.PENDING)
        settled = client.wait_settled(first)
        self.assertTrue(settled.hit)
        (_, page), = settled.group(0).pages()
        view = client.read_lease(page.lease)
        self.assertEqual(bytes(view), b"hello")
        self.assertTrue(view.readonly)
        view.release()
        self.assertEqual(client.release(5).pages_released, 1)
        self.assertEqual(len(client._operations), 0)

    def test_restore_waits_for_restore_done(self):
        region_path = os.path.join(self.tmp.name, "region")

        def script(rid, request):
            if isinstance(request, p.RegisterRegion):
                return [(rid, p.RegionRegistered(4))]
            with open(region_path, "r+b") as f:  # the "Manager" copies, then reports
                f.seek(request.pages[0].destination_page * 1024)
                f.write(b"restored")
            return [(rid, p.RestoreAccepted(request.operation_id, 1)),
                    (0, p.Completion(request.operation_id, 0, p.CompletionEvent.RESTORE_DONE, p.Outcome.OK))]
        manager, client = self.start(script)
        region = client.register_region(region_path, 1024, 2)
        done = client.restore(9, region, [(0, 3, 1)])
        self.assertEqual((done.event, done.outcome), (p.CompletionEvent.RESTORE_DONE, p.Outcome.OK))
        self.assertEqual(region.page(1)[:8], b"restored")
        self.assertEqual(manager.received[1], p.RegisterRegion(region_path, 2048, 1024, 2))

    def test_error_is_raised_and_the_connection_goes_on(self):
        def script(rid, request):
            if isinstance(request, p.Stats):
                return [(rid, p.StatsReply([p.Counter("leases", 0)]))]
            return [(rid, p.Error(p.ErrorCode.NOT_FOUND, "no such operation"))]
        _, client = self.start(script)
        with self.assertRaises(OrbitKvError) as caught:
            client.poll(3, 0)
        self.assertEqual(caught.exception.code, p.ErrorCode.NOT_FOUND)
        self.assertEqual(client.stats(), {"leases": 0})

    def test_hint_sends_its_groups_and_returns_the_counts(self):
        def script(rid, request):
            return [(rid, p.Hinted(request.kind, 1, len(request.groups[0].hashes) - 1, 0))]
        manager, client = self.start(script)
        group = p.QueryGroup(0, p.KeyForm.BLOCK_HASH, [b"\x01" * 8, b"\x02" * 8])
        self.assertEqual(client.hint(p.HintKind.PIN, [group], 2000), p.Hinted(p.HintKind.PIN, 1, 1, 0))
        self.assertEqual(manager.received[-1], p.Hint(p.HintKind.PIN, (group,), 2000))
        self.assertEqual(client.hint(p.HintKind.DROP, [group]).kind, p.HintKind.DROP)

    def test_pipelined_requests_are_matched_by_request_id(self):
        def script(rid, request):
            return [(rid, p.QueryResult(request.operation_id, request.revision, p.QueryStatus.FINAL, False, 0, []))]
        _, client = self.start(script)
        waiters = [client.send(p.QueryPoll(op, op % 5)) for op in range(1, 101)]
        for op, w in enumerate(waiters, start=1):
            r = w.wait(5, "QUERY_RESULT")
            self.assertEqual((r.operation_id, r.revision), (op, op % 5))

    def test_release_nowait_writes_the_releases_and_forgets_each_operation_when_it_ends(self):
        def script(rid, request):
            if isinstance(request, p.Release):
                if request.operation_id == 1:
                    return [(rid, p.Released(1, True, 1))]
                if request.operation_id == 2:  # still draining: its entry must wait for DRAINED
                    return [(rid, p.Released(2, False, 1)), (0, p.Completion(2, 0, p.CompletionEvent.DRAINED, p.Outcome.OK))]
                return [(rid, p.Error(p.ErrorCode.UNKNOWN_OPERATION, "no such operation"))]
            return [(rid, p.StatsReply([p.Counter("leases", 0)]))]
        manager, client = self.start(script)
        client.release_nowait([1, 2, 3])
        self.assertEqual(client.stats(), {"leases": 0}, "a refused RELEASE does not fail the connection")
        self.assertEqual([type(f).__name__ for f in manager.received[1:]], ["Release", "Release", "Release", "Stats"])
        self.assertEqual(len(client._operations), 0, "released operations leave no routing state")
        self.assertFalse(client.failed)

    def test_threads_calling_at_once_each_get_their_own_reply(self):
        # replies come late and out of step with the callers, so the read role passes between them
        rng = random.Random(7)

        def script(rid, request):
            time.sleep(rng.random() / 2000)
            return [(rid, p.QueryResult(request.operation_id, request.revision, p.QueryStatus.FINAL, False, 0, []))]
        _, client = self.start(script)
        wrong: list = []

        def caller(base):
            for k in range(150):
                op = base * 1000 + k + 1
                r = client.poll(op, k % 7)
                if (r.operation_id, r.revision) != (op, k % 7):
                    wrong.append((op, r))
        threads = [threading.Thread(target=caller, args=(t,)) for t in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        self.assertFalse(any(t.is_alive() for t in threads), "every caller got all its replies")
        self.assertEqual(wrong, [])
        self.assertEqual(client._followers, {}, "no caller is left waiting for the read role")

    def test_a_lost_connection_is_noticed_without_a_call(self):
        manager, client = self.start(lambda rid, request: [])
        self.assertFalse(client.failed)
        manager.drop_connection()
        deadline = time.monotonic() + 5
        while not client.failed and time.monotonic() < deadline:
            time.sleep(0.005)
        self.assertTrue(client.failed, "the idle reader saw the Manager close the connection")
        with self.assertRaises(ConnectionError):
            client.stats()

    def test_unsolicited_stale_epoch_fails_pending_calls(self):
        _, client = self.start(lambda rid, request: [(0, p.Error(p.ErrorCode.STALE_EPOCH, "epoch 2 registered"))])
        with self.assertRaises(OrbitKvError) as caught:
            client.stats()
        self.assertEqual(caught.exception.code, p.ErrorCode.STALE_EPOCH)


if __name__ == "__main__":
    unittest.main()


class PeerWaitBound(unittest.TestCase):
    """peer_wait_for follows the Java client's PeerWait.millisFor."""

    def test_recompute_time_at_the_measured_rate_bounded(self):
        from orbitkv.client import PEER_WAIT_MAX_MILLIS, PEER_WAIT_UNKNOWN_RATE_MILLIS, peer_wait_for
        self.assertEqual(peer_wait_for(3000, 1500), 2000)
        self.assertEqual(peer_wait_for(1, 1500), 1)
        self.assertEqual(peer_wait_for(0, 1500), 1)
        self.assertEqual(peer_wait_for(10 ** 9, 1), PEER_WAIT_MAX_MILLIS)
        self.assertEqual(peer_wait_for(4096, 0), PEER_WAIT_UNKNOWN_RATE_MILLIS)
        with self.assertRaises(ValueError):
            peer_wait_for(-1, 10)
