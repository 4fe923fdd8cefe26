package io.orbitkv.core.engine;

import io.orbitkv.core.query.RemotePages;
import io.orbitkv.core.storage.dram.CommitResult;
import io.orbitkv.core.storage.dram.Reservation;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.Hashes;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.ProtocolLimits;
import io.orbitkv.state.protocol.QueryStatus;
import io.orbitkv.state.protocol.Refusal;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import io.orbitkv.state.protocol.SettleOutcome;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/** Ownership: disconnects, epochs, namespaces, publish settling, and every bounded table. */
class ManagerSessionTest {

    static final Namespace NS = ManagerFixture.namespace("model-a");
    static final Namespace OTHER = ManagerFixture.namespace("model-b");

    @TempDir
    Path dir;
    ManagerFixture m;

    @AfterEach
    void close() {
        if (m != null) m.close();
    }

    @Test
    void aDisconnectReleasesLeasesReservationsAndRegions() throws IOException {
        m = ManagerFixture.open(dir);
        Client c = m.register("e1", 1, NS, ManagerFixture.FULL);
        c.publish(1, 0, 0, 1, 2);
        assertThat(c.queryFull(1, 1, 3).hit()).isTrue();
        Reply.Reserved open = (Reply.Reserved) c.send(new Request.PublishReserve(List.of(new Request.PublishPage(0,
                KeyForm.BLOCK_HASH, Hashes.of(List.of(Client.hash(1, 0, 9))), 1000))));
        assertThat(open.outcomes().getFirst()).isInstanceOf(Reply.Granted.class);
        Path regionFile = Files.write(dir.resolve("region"), new byte[ManagerFixture.SLOT]);
        assertThat(c.send(new Request.RegisterRegion(regionFile.toString(), ManagerFixture.SLOT, ManagerFixture.SLOT, 1)))
                .isInstanceOf(Reply.RegionRegistered.class);
        ManagerStatus before = m.core.status();
        assertThat(before.leases()).isEqualTo(3);
        assertThat(before.reservations()).isEqualTo(1);
        assertThat(before.regions()).isEqualTo(1);
        assertThat(before.dram().reservedBytes()).isEqualTo(ManagerFixture.SLOT);

        c.close();
        m.assertNothingHeld();
        ManagerStatus after = m.core.status();
        assertThat(after.regions()).isZero();
        assertThat(after.sessions()).isZero();
        assertThat(after.dram().leasedBytes()).isZero();
        assertThat(m.store.dram().contains(Client.key(NS, 1, 0, 0))).as("sealed pages stay cached").isTrue();
    }

    @Test
    void aHigherEpochFencesThePreviousIncarnationAndRegistersAfterItsDrain() throws IOException {
        m = ManagerFixture.open(dir);
        Client old = m.register("e1", 1, NS, ManagerFixture.FULL);
        old.publish(1, 0, 0, 1);
        assertThat(old.queryFull(1, 1, 2).hit()).isTrue();
        assertThat(m.core.status().leases()).isEqualTo(2);

        try (Client lower = m.connect(); Client same = m.connect()) {
            assertThat(Client.error(lower.register("e1", 0, NS, ManagerFixture.FULL))).isEqualTo(ErrorCode.STALE_EPOCH);
            assertThat(Client.error(same.register("e1", 1, NS, ManagerFixture.FULL))).isEqualTo(ErrorCode.STALE_EPOCH);
        }
        assertThat(old.sink.fenced).isNull();

        try (Client next = m.register("e1", 2, NS, ManagerFixture.FULL)) {
            assertThat(old.sink.fenced).isEqualTo(ErrorCode.STALE_EPOCH);
            assertThat(m.core.status().leases()).as("drained before REGISTERED").isZero();
            assertThat(Client.error(old.send(new Request.QueryPoll(1, 0)))).isEqualTo(ErrorCode.STALE_EPOCH);
            Reply.QueryResult r = next.queryFull(1, 1, 2);
            assertThat(r.hit()).as("a restarted engine hits the Manager's cache").isTrue();
            next.assertBytes(r, 1);
            assertThat(m.core.status().instances()).singleElement()
                    .satisfies(i -> assertThat(i.epoch()).isEqualTo(2));
        }
        old.close();
        try (Client reconnect = m.register("e1", 2, NS, ManagerFixture.FULL)) {
            assertThat(reconnect.registered.epoch()).as("same epoch after the connection closed").isEqualTo(2);
        }
        m.assertNothingHeld();
    }

    @Test
    void aFailingPeerDutyIsCountedAndTheQuarantineStillFreesOnTheSameTick() throws IOException {
        RemotePages failingDuty = new RemotePages() {
            @Override
            public long stagingBytes(StateKey key, io.orbitkv.core.query.SessionScope scope) {
                return RemotePages.NONE.stagingBytes(key, scope);
            }

            @Override
            public java.util.concurrent.CompletableFuture<io.orbitkv.core.storage.StageResult> fetch(
                    StateKey key, io.orbitkv.core.query.SessionScope scope) {
                return RemotePages.NONE.fetch(key, scope);
            }

            @Override
            public int onTick(long nowNanos) {
                throw new IllegalStateException("peer duty bug");
            }
        };
        m = new ManagerFixture(dir, 64, ProtocolLimits.DEFAULTS, ManagerBounds.DEFAULTS, failingDuty);
        Client zombie = m.register("e1", 1, NS, ManagerFixture.FULL);
        zombie.send(new Request.PublishReserve(List.of(new Request.PublishPage(0, KeyForm.BLOCK_HASH,
                Hashes.of(List.of(Client.hash(1, 0, 0))), ManagerFixture.PAGE_BYTES))));
        zombie.session.close();
        assertThat(m.core.quarantinedBytes()).isEqualTo(ManagerFixture.SLOT);

        m.advance(2 * m.config.publishQuarantineNanos());
        assertThat(m.core.quarantinedBytes()).as("the quarantine duty ran although the peer duty threw").isZero();
        assertThat(m.core.backgroundErrors("peer-routes", false)).isGreaterThanOrEqualTo(1);
        assertThat(m.registry.get("orbitkv.manager.background.errors").tag("duty", "peer-routes").counter().count())
                .isGreaterThanOrEqualTo(1);
        assertThat(m.core.backgroundErrors("publish-quarantine", false)).isZero();
        zombie.close();
        m.assertNothingHeld();
    }

    @Test
    void aClosedSessionsUnsealedSlotIsQuarantinedUntilItsGraceEnds() throws IOException {
        m = ManagerFixture.open(dir);
        long grace = m.config.publishQuarantineNanos();
        Client zombie = m.register("e1", 1, NS, ManagerFixture.FULL);
        Reply.Granted granted = (Reply.Granted) ((Reply.Reserved) zombie.send(new Request.PublishReserve(List.of(
                new Request.PublishPage(0, KeyForm.BLOCK_HASH, Hashes.of(List.of(Client.hash(1, 0, 0))),
                        ManagerFixture.PAGE_BYTES))))).outcomes().getFirst();
        zombie.session.close();

        try (Client next = m.register("e1", 1, NS, ManagerFixture.FULL)) {
            next.publish(2, 0, 0, 1, 2, 3);
            // The fenced incarnation keeps writing into its old grant: no sealed page may change.
            zombie.write(granted, new byte[ManagerFixture.PAGE_BYTES]);
            Reply.QueryResult r = next.queryFull(1, 2, 4);
            assertThat(r.hit()).isTrue();
            next.assertBytes(r, 2);
            next.send(new Request.Release(1));
            assertThat(m.core.quarantinedBytes()).isEqualTo(ManagerFixture.SLOT);
            assertThat(m.core.status().reservations()).as("no session holds it").isZero();

            m.advance(grace / 2);
            assertThat(m.core.quarantinedBytes()).as("still inside the grace").isEqualTo(ManagerFixture.SLOT);
            m.advance(grace);
            assertThat(m.core.quarantinedBytes()).isZero();
            assertThat(m.store.dram().usage().reservedBytes()).isZero();
            assertThat(m.registry.get("orbitkv.manager.publish.quarantine.bytes").gauge().value()).isZero();
        }
        zombie.close();
        m.assertNothingHeld();
    }

    @Test
    void aSameEpochRegisterWaitsForThePreviousConnectionsCloseAndIsAdmitted() throws Exception {
        // A grace as long as the test's own waits: the close below may come late on a loaded machine,
        // and only a REGISTER that stops waiting for it (or never waits) fails the test.
        m = new ManagerFixture(dir, 64, ProtocolLimits.DEFAULTS,
                ManagerBounds.DEFAULTS.withReconnectGraceNanos(RecordingSink.WAIT.toNanos()));
        Client old = m.register("e1", 1, NS, ManagerFixture.FULL);
        try (Client again = m.connect()) {
            java.util.concurrent.CompletableFuture<Reply> reply = new java.util.concurrent.CompletableFuture<>();
            Thread.ofPlatform().start(() -> reply.complete(again.register("e1", 1, NS, ManagerFixture.FULL)));
            // The REGISTER is waiting for the old connection's close once it is a dependent of that close.
            java.util.concurrent.CompletableFuture<Void> oldClosed = ((EngineSession) old.session).closedSignal();
            await().atMost(RecordingSink.WAIT).until(() -> oldClosed.getNumberOfDependents() > 0 || reply.isDone());
            assertThat(reply).as("the REGISTER waits for the old connection's close").isNotDone();
            old.session.close();
            assertThat(reply.get()).as("the old connection's close arrived inside the grace")
                    .isInstanceOf(Reply.Registered.class);
            assertThat(m.registry.get("orbitkv.manager.register.reconnect.waits").counter().count()).isEqualTo(1);
        }
        old.close();
        m.assertNothingHeld();
    }

    @Test
    void aClientOnlySeesKeysOfTheNamespaceItRegistered() throws IOException {
        m = ManagerFixture.open(dir);
        try (Client a = m.register("a", 1, NS, ManagerFixture.FULL); Client b = m.register("b", 1, OTHER, ManagerFixture.FULL)) {
            a.publish(1, 0, 0, 1);
            assertThat(a.queryFull(1, 1, 2).hit()).isTrue();
            assertThat(b.queryFull(1, 1, 2).hit()).as("same block hashes, other namespace").isFalse();

            List<StateKey> keysOfA = List.of(Client.key(NS, 1, 0, 0), Client.key(NS, 1, 0, 1));
            Request.Query byKey = new Request.Query(2, 0, CompletionTarget.HOST_READY, 33, 0,
                    List.of(new Request.QueryGroup(0, KeyForm.STATE_KEY, Hashes.ofKeys(keysOfA))));
            assertThat(((Reply.QueryResult) a.send(byKey)).hit()).as("a's own keys by value").isTrue();
            assertThat(((Reply.QueryResult) b.send(byKey)).hit()).as("a's keys in DRAM, asked by b").isFalse();
            a.send(new Request.Release(1));
            a.send(new Request.Release(2));

            for (StateKey k : keysOfA) {
                await().atMost(RecordingSink.WAIT).until(() -> m.store.ssd().contains(k));
                m.store.dram().evict(k);
            }
            Reply.QueryResult fromSsd = (Reply.QueryResult) b.send(new Request.Query(3, 0, CompletionTarget.HOST_READY,
                    33, 0, List.of(new Request.QueryGroup(0, KeyForm.STATE_KEY, Hashes.ofKeys(keysOfA)))));
            assertThat(fromSsd.status()).isEqualTo(QueryStatus.FINAL);
            assertThat(fromSsd.hit()).as("a's keys on SSD, asked by b").isFalse();
            assertThat(m.store.dram().contains(keysOfA.getFirst())).as("nothing was staged for b").isFalse();
        }
        m.assertNothingHeld();
    }

    @Test
    void anotherNamespaceCanNeitherProbeNorPrePublishAClientsKeys() throws IOException {
        m = ManagerFixture.open(dir);
        try (Client a = m.register("a", 1, NS, ManagerFixture.FULL); Client b = m.register("b", 1, OTHER, ManagerFixture.FULL)) {
            byte[] forged = Client.image(99, 0, 0, ManagerFixture.PAGE_BYTES);

            // Probe: a's page 0 is resident; b naming its key by value is answered as if it were absent.
            assertThat(a.publish(1, 0, 0)).containsExactly(SettleOutcome.SEALED);
            StateKey page0 = Client.key(NS, 1, 0, 0);
            assertThat(publishByKey(b, page0, forged)).as("b's publish of a's resident key").isEqualTo(SettleOutcome.SEALED);
            assertThat(leasedBytes(b, 1, page0)).as("b reads back its own bytes").isEqualTo(forged);
            b.send(new Request.Release(1));

            // Pre-publish: b publishes a's future page 1 first; a's own publish and query still work.
            // a's page 0 is still resident in a's namespace (b's publish added beside it), so only
            // page 1 is granted again.
            assertThat(publishByKey(b, Client.key(NS, 1, 0, 1), forged)).isEqualTo(SettleOutcome.SEALED);
            assertThat(a.publish(1, 0, 0, 1)).containsExactly(SettleOutcome.SEALED);
            Reply.QueryResult hit = a.queryFull(2, 1, 2);
            assertThat(hit.hit()).isTrue();
            assertThat(hit.groups().getFirst().spans().getFirst().pages()).hasSize(2);
            a.assertBytes(hit, 1);
            a.send(new Request.Release(2));

            // The SSD copy: b's extent of a's key does not keep a's page off the SSD.
            StateKey page2 = Client.key(NS, 1, 0, 2);
            assertThat(publishByKey(b, page2, forged)).isEqualTo(SettleOutcome.SEALED);
            await().atMost(RecordingSink.WAIT).until(() -> m.store.ssd().contains(page2));
            m.store.dram().evict(page2);
            assertThat(a.publish(1, 0, 2)).containsExactly(SettleOutcome.SEALED);
            NamespaceDigest digestOfA = NamespaceDigest.ofBytes(NS.digest());
            await().atMost(RecordingSink.WAIT).until(() -> m.store.ssd().contains(page2, digestOfA));
        }
        m.assertNothingHeld();
    }

    /** Publishes {@code key} by value (STATE_KEY form) and returns its commit outcome; the reservation must be granted. */
    private static SettleOutcome publishByKey(Client c, StateKey key, byte[] bytes) {
        Reply.Reserved reserved = (Reply.Reserved) c.send(new Request.PublishReserve(List.of(
                new Request.PublishPage(0, KeyForm.STATE_KEY, Hashes.ofKeys(List.of(key)), bytes.length))));
        assertThat(reserved.outcomes()).as("reserve of %s", key).singleElement().isInstanceOf(Reply.Granted.class);
        Reply.Granted granted = (Reply.Granted) reserved.outcomes().getFirst();
        c.write(granted, bytes);
        return ((Reply.Committed) c.send(new Request.PublishCommit(List.of(granted.reservationId())))).outcomes().getFirst();
    }

    /** Queries one page by value (HOST_READY) as operation {@code op} and returns the leased bytes. */
    private static byte[] leasedBytes(Client c, long op, StateKey key) {
        Reply.QueryResult r = (Reply.QueryResult) c.send(new Request.Query(op, 0, CompletionTarget.HOST_READY,
                ManagerFixture.PAGE_TOKENS + 1, 0, List.of(new Request.QueryGroup(0, KeyForm.STATE_KEY,
                        Hashes.ofKeys(List.of(key))))));
        assertThat(r.hit()).as("query of %s", key).isTrue();
        Reply.PageResult page = r.groups().getFirst().spans().getFirst().pages().getFirst();
        assertThat(page).isInstanceOf(Reply.Resident.class);
        return c.read(((Reply.Resident) page).lease());
    }

    @Test
    void publishSettlesSealedAlreadyResidentDiscardedAbortedAndNotFound() throws IOException {
        m = ManagerFixture.open(dir);
        try (Client a = m.register("a", 1, NS, ManagerFixture.FULL); Client b = m.register("b", 1, NS, ManagerFixture.FULL)) {
            Request.PublishReserve page0 = new Request.PublishReserve(List.of(new Request.PublishPage(0,
                    KeyForm.BLOCK_HASH, Hashes.of(List.of(Client.hash(1, 0, 0))), ManagerFixture.PAGE_BYTES)));
            Reply.Granted ga = (Reply.Granted) ((Reply.Reserved) a.send(page0)).outcomes().getFirst();
            assertThat(((Reply.Reserved) b.send(page0)).outcomes()).as("the same key from another connection, while a publishes it")
                    .containsExactly(new Reply.Refused(Refusal.ALREADY_RESIDENT));
            a.write(ga, Client.image(1, 0, 0, ManagerFixture.PAGE_BYTES));
            assertThat(((Reply.Committed) a.send(new Request.PublishCommit(List.of(ga.reservationId())))).outcomes())
                    .containsExactly(SettleOutcome.SEALED);
            assertThat(((Reply.Reserved) a.send(page0)).outcomes()).containsExactly(new Reply.Refused(Refusal.ALREADY_RESIDENT));

            // DISCARDED: the key became resident by another path (a staging, a peer read; here the tier itself)
            // while the engine's reservation was open.
            Request.PublishReserve page3 = new Request.PublishReserve(List.of(new Request.PublishPage(0,
                    KeyForm.BLOCK_HASH, Hashes.of(List.of(Client.hash(1, 0, 3))), ManagerFixture.PAGE_BYTES)));
            Reply.Granted gb = (Reply.Granted) ((Reply.Reserved) b.send(page3)).outcomes().getFirst();
            int namespaceId = m.namespaces.id(NamespaceDigest.ofBytes(NS.digest())).orElseThrow();
            Reservation direct = (Reservation) m.store.dram().reserve(Client.key(NS, 1, 0, 3), namespaceId,
                    ManagerFixture.PAGE_BYTES);
            assertThat(m.store.dram().commit(direct)).isInstanceOf(CommitResult.Inserted.class);
            b.write(gb, Client.image(1, 0, 3, ManagerFixture.PAGE_BYTES));
            assertThat(((Reply.Committed) b.send(new Request.PublishCommit(List.of(gb.reservationId(), 999L)))).outcomes())
                    .containsExactly(SettleOutcome.DISCARDED, SettleOutcome.NOT_FOUND);

            // One RESERVE naming a key twice: one grant; after its abort the key may be reserved again.
            Request.PublishPage page4 = new Request.PublishPage(0, KeyForm.BLOCK_HASH,
                    Hashes.of(List.of(Client.hash(1, 0, 4))), ManagerFixture.PAGE_BYTES);
            List<Reply.ReserveOutcome> twice = ((Reply.Reserved) b.send(new Request.PublishReserve(List.of(page4, page4))))
                    .outcomes();
            assertThat(twice).hasSize(2);
            assertThat(twice.get(0)).isInstanceOf(Reply.Granted.class);
            assertThat(twice.get(1)).isEqualTo(new Reply.Refused(Refusal.ALREADY_RESIDENT));
            assertThat(((Reply.Aborted) b.send(new Request.PublishAbort(List.of(((Reply.Granted) twice.get(0)).reservationId()))))
                    .outcomes()).containsExactly(SettleOutcome.ABORTED);
            Reply.Granted again = (Reply.Granted) ((Reply.Reserved) a.send(new Request.PublishReserve(List.of(page4))))
                    .outcomes().getFirst();
            a.send(new Request.PublishAbort(List.of(again.reservationId())));

            // A connection that closes with the key reserved gives the key up (its slot goes to the quarantine).
            Request.PublishReserve page5 = new Request.PublishReserve(List.of(new Request.PublishPage(0,
                    KeyForm.BLOCK_HASH, Hashes.of(List.of(Client.hash(1, 0, 5))), ManagerFixture.PAGE_BYTES)));
            try (Client c = m.register("c", 1, NS, ManagerFixture.FULL)) {
                assertThat(((Reply.Reserved) c.send(page5)).outcomes().getFirst()).isInstanceOf(Reply.Granted.class);
            }
            await().atMost(RecordingSink.WAIT).until(() -> {
                if (!(((Reply.Reserved) a.send(page5)).outcomes().getFirst() instanceof Reply.Granted g)) return false;
                a.send(new Request.PublishAbort(List.of(g.reservationId())));
                return true;
            });

            Request.PublishReserve page1 = new Request.PublishReserve(List.of(new Request.PublishPage(0,
                    KeyForm.BLOCK_HASH, Hashes.of(List.of(Client.hash(1, 0, 1))), 100)));
            Reply.Granted g1 = (Reply.Granted) ((Reply.Reserved) a.send(page1)).outcomes().getFirst();
            assertThat(((Reply.Aborted) a.send(new Request.PublishAbort(List.of(g1.reservationId())))).outcomes())
                    .containsExactly(SettleOutcome.ABORTED);
            assertThat(((Reply.Aborted) a.send(new Request.PublishAbort(List.of(g1.reservationId())))).outcomes())
                    .containsExactly(SettleOutcome.NOT_FOUND);
            assertThat(Client.error(a.send(new Request.PublishReserve(List.of(new Request.PublishPage(7,
                    KeyForm.BLOCK_HASH, Hashes.of(List.of(Client.hash(1, 7, 1))), 100))))))
                    .isEqualTo(ErrorCode.NAMESPACE_MISMATCH);
            assertThat(Client.error(a.send(new Request.PublishReserve(List.of(new Request.PublishPage(0,
                    KeyForm.BLOCK_HASH, Hashes.of(List.of(Client.hash(1, 0, 2))), ManagerFixture.SLOT + 1))))))
                    .isEqualTo(ErrorCode.TOO_LARGE);
        }
        m.assertNothingHeld();
    }

    @Test
    void everyBoundedTableAnswersBusyAndRecovers() throws IOException {
        ProtocolLimits tight = new ProtocolLimits(4 << 20, 64, 65_536, 4_096, 4_096, 65_536, 256, 256, 4_096,
                2, 1, 1, 1);
        m = new ManagerFixture(dir, 64, tight, ManagerBounds.DEFAULTS.withMaxLeases(3));
        Client c = m.register("e1", 1, NS, ManagerFixture.FULL);
        Client second = m.register("e2", 1, NS, ManagerFixture.FULL);
        // connections
        OpenResult third = m.core.openSession(new RecordingSink(), java.util.Optional.of(ManagerFixture.self()));
        assertThat(third).isEqualTo(new OpenResult.Refused(ErrorCode.BUSY, "maxConnections 2 reached"));
        second.close();
        assertThat(m.core.openSession(new RecordingSink(), java.util.Optional.of(ManagerFixture.self()))).isInstanceOf(OpenResult.Opened.class);

        // operations per connection (one reservation at a time: maxReservationsPerConnection = 1)
        for (long p = 0; p < 4; p++) assertThat(c.publish(1, 0, p)).containsExactly(SettleOutcome.SEALED);
        assertThat(c.queryFull(1, 1, 1).hit()).isTrue();
        assertThat(Client.error(c.send(Client.query(2, 0, CompletionTarget.HOST_READY, 17, 0, 1, new int[] {0}, 1))))
                .isEqualTo(ErrorCode.BUSY);
        c.send(new Request.Release(1));
        // the global lease table (3 leases)
        assertThat(Client.error(c.send(Client.query(2, 0, CompletionTarget.HOST_READY, 65, 0, 1, new int[] {0}, 4))))
                .isEqualTo(ErrorCode.BUSY);
        assertThat(m.core.status().leases()).as("a refused query holds nothing").isZero();
        assertThat(c.queryFull(2, 1, 3).hit()).isTrue();
        c.send(new Request.Release(2));

        // reservations per connection: the second entry is refused, not the request
        Reply.Reserved two = (Reply.Reserved) c.send(new Request.PublishReserve(List.of(
                new Request.PublishPage(0, KeyForm.BLOCK_HASH, Hashes.of(List.of(Client.hash(2, 0, 0))), 100),
                new Request.PublishPage(0, KeyForm.BLOCK_HASH, Hashes.of(List.of(Client.hash(2, 0, 1))), 100))));
        assertThat(two.outcomes().get(1)).isEqualTo(new Reply.Refused(Refusal.BUSY));
        c.send(new Request.PublishAbort(List.of(((Reply.Granted) two.outcomes().getFirst()).reservationId())));
        assertThat(c.publish(2, 0, 1)).containsExactly(SettleOutcome.SEALED);

        // regions per connection
        Path file = Files.write(dir.resolve("region"), new byte[4096]);
        Reply.RegionRegistered r1 = (Reply.RegionRegistered) c.send(new Request.RegisterRegion(file.toString(), 4096, 4096, 1));
        assertThat(r1.regionId()).isNotNegative();
        assertThat(Client.error(c.send(new Request.RegisterRegion(file.toString(), 4096, 4096, 1)))).isEqualTo(ErrorCode.BUSY);

        List<String> tables = new ArrayList<>();
        for (String t : List.of("connections", "operations", "leases", "reservations", "regions")) {
            if (m.registry.get("orbitkv.manager.busy").tag("table", t).counter().count() >= 1) tables.add(t);
        }
        assertThat(tables).containsExactly("connections", "operations", "leases", "reservations", "regions");
        c.close();
        m.assertNothingHeld();
    }
}
