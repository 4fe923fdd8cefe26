package io.orbitkv.core.engine;

import io.orbitkv.core.query.RemotePages;
import io.orbitkv.core.query.SessionScope;
import io.orbitkv.core.storage.StageResult;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.Hashes;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.PageLocation;
import io.orbitkv.state.protocol.ProtocolLimits;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;

import static io.orbitkv.state.protocol.PageLocation.ABSENT;
import static io.orbitkv.state.protocol.PageLocation.DRAM;
import static io.orbitkv.state.protocol.PageLocation.SSD;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * CONTAINS through a session of a real Manager core (DRAM arenas, SSD files): each named page is
 * reported where its namespace holds it now, in the order named; a page being written, another
 * namespace's page and a page nobody published are ABSENT alike; nothing is leased, staged or
 * held afterwards; {@code peers} says whether absent pages may be on peers.
 */
class ManagerContainsTest {

    static final Namespace A = ManagerFixture.namespace("model-a");
    static final Namespace B = ManagerFixture.namespace("model-b");

    @TempDir
    Path dir;
    ManagerFixture m;

    @AfterEach
    void close() {
        if (m != null) m.close();
    }

    /** One BLOCK_HASH group (id {@code group}) naming {@code pages} of {@code prompt}, in that order. */
    static Request.Contains names(int group, long prompt, long... pages) {
        List<byte[]> hashes = new ArrayList<>();
        for (long p : pages) hashes.add(Client.hash(prompt, group, p));
        return new Request.Contains(List.of(new Request.QueryGroup(group, KeyForm.BLOCK_HASH, Hashes.of(hashes))));
    }

    static Request.Contains keys(Namespace ns, long prompt, long... pages) {
        List<StateKey> keys = new ArrayList<>();
        for (long p : pages) keys.add(Client.key(ns, prompt, 0, p));
        return new Request.Contains(List.of(new Request.QueryGroup(0, KeyForm.STATE_KEY, Hashes.ofKeys(keys))));
    }

    double counted(PageLocation at) {
        return m.registry.get("orbitkv.manager.contains.pages").tag("location", at.name().toLowerCase()).counter().count();
    }

    @Test
    void eachPageIsReportedWhereItsNamespaceHoldsItNowAndNothingIsLeasedOrStaged() throws IOException {
        m = ManagerFixture.open(dir);
        try (Client a = m.register("a", 1, A, ManagerFixture.FULL); Client b = m.register("b", 1, B, ManagerFixture.FULL)) {
            m.onSsdOnly(a, A, 1, 0, 1);
            a.publish(2, 0, 0);
            Reply reserved = a.send(new Request.PublishReserve(List.of(new Request.PublishPage(0, KeyForm.BLOCK_HASH,
                    Hashes.of(List.of(Client.hash(3, 0, 0))), ManagerFixture.PAGE_BYTES))));
            long reservation = ((Reply.Granted) ((Reply.Reserved) reserved).outcomes().getFirst()).reservationId();

            Request.Contains mixed = new Request.Contains(List.of(
                    new Request.QueryGroup(0, KeyForm.BLOCK_HASH, Hashes.of(List.of(Client.hash(2, 0, 0),
                            Client.hash(1, 0, 1), Client.hash(9, 0, 0), Client.hash(3, 0, 0), Client.hash(1, 0, 0))))));
            assertThat(a.send(mixed)).as("DRAM, SSD only, never published, being written, SSD only")
                    .isEqualTo(new Reply.Contained(false, List.of(DRAM, SSD, ABSENT, ABSENT, SSD)));
            assertThat(a.send(keys(A, 2, 0, 5))).as("the same pages by their STATE_KEYs")
                    .isEqualTo(new Reply.Contained(false, List.of(DRAM, ABSENT)));

            assertThat(b.send(names(0, 2, 0))).as("b's block hash names b's own key")
                    .isEqualTo(new Reply.Contained(false, List.of(ABSENT)));
            assertThat(b.send(keys(A, 1, 0, 1))).as("a's keys from b, as keys nobody holds")
                    .isEqualTo(b.send(keys(A, 99, 0, 1))).isEqualTo(new Reply.Contained(false, List.of(ABSENT, ABSENT)));
            assertThat(Client.error(a.send(names(3, 1, 0)))).as("a group the contract lacks")
                    .isEqualTo(ErrorCode.NAMESPACE_MISMATCH);

            assertThat(m.store.dram().contains(Client.key(A, 1, 0, 0))).as("nothing was staged into DRAM").isFalse();
            assertThat(m.core.status().leases()).as("nothing was leased").isZero();
            assertThat(counted(DRAM)).isEqualTo(2);
            assertThat(counted(SSD)).isEqualTo(2);
            assertThat(counted(ABSENT)).isEqualTo(8);

            a.send(new Request.PublishCommit(List.of(reservation)));
            assertThat(a.send(names(0, 3, 0))).as("committed").isEqualTo(new Reply.Contained(false, List.of(DRAM)));
        }
        m.assertNothingHeld();
    }

    @Test
    void aManagerWithPeersSaysSoSoThatAnAbsentPageIsAskedForWithAQuery() throws IOException {
        RemotePages peers = new RemotePages() { // peers exist, and none holds anything
            @Override
            public long stagingBytes(StateKey key, SessionScope scope) {
                return RemotePages.NONE.stagingBytes(key, scope);
            }

            @Override
            public CompletableFuture<StageResult> fetch(StateKey key, SessionScope scope) {
                return RemotePages.NONE.fetch(key, scope);
            }

            @Override
            public boolean discoverable() {
                return true;
            }
        };
        m = new ManagerFixture(dir, 64, ProtocolLimits.DEFAULTS, ManagerBounds.DEFAULTS, peers);
        try (Client a = m.register("a", 1, A, ManagerFixture.FULL)) {
            a.publish(1, 0, 0);
            assertThat(a.send(names(0, 1, 0, 1))).isEqualTo(new Reply.Contained(true, List.of(DRAM, ABSENT)));
        }
    }
}
