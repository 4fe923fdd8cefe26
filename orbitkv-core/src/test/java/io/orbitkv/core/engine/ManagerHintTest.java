package io.orbitkv.core.engine;

import io.orbitkv.core.storage.dram.DramEviction;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.HintKind;
import io.orbitkv.state.protocol.Hashes;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.LongStream;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/**
 * HINT through a session of a real Manager core (DRAM arenas, SSD files): pins hold pages against
 * another namespace's flood until their time ends (the core's clock moved by the test), within the
 * pinned-byte budget, and outlive the session that made them; DROP removes pages from DRAM and
 * SSD; hints naming another namespace's keys change nothing and are answered as for absent keys.
 */
class ManagerHintTest {

    static final Namespace A = ManagerFixture.namespace("model-a");
    static final Namespace B = ManagerFixture.namespace("model-b");
    /** DRAM slots of the fixture: the flood below publishes more than twice as many pages. */
    static final int SLOTS = 32;

    @TempDir
    Path dir;
    ManagerFixture m;

    @AfterEach
    void close() {
        if (m != null) m.close();
    }

    static Request.Hint blockHint(HintKind kind, int millis, long prompt, int pages) {
        return new Request.Hint(kind, millis, List.of(new Request.QueryGroup(0, KeyForm.BLOCK_HASH,
                Client.hashes(prompt, 0, pages))));
    }

    /** A hint naming pages {@code [0, pages)} of {@code prompt} by their StateKeys in namespace {@code ns}. */
    static Request.Hint keyHint(HintKind kind, int millis, Namespace ns, long prompt, int pages) {
        List<StateKey> keys = new ArrayList<>();
        for (int i = 0; i < pages; i++) keys.add(Client.key(ns, prompt, 0, i));
        return new Request.Hint(kind, millis, List.of(new Request.QueryGroup(0, KeyForm.STATE_KEY, Hashes.ofKeys(keys))));
    }

    int nsId(Namespace ns) {
        return m.namespaces.id(io.orbitkv.state.NamespaceDigest.ofBytes(ns.digest())).orElseThrow();
    }

    boolean inDram(Namespace ns, long prompt, int page) {
        return m.store.dram().contains(Client.key(ns, prompt, 0, page));
    }

    /** Publishes 2 × {@link #SLOTS} pages of prompt {@code prompt} in {@code c}'s namespace, 4 at a time. */
    static void flood(Client c, long prompt) {
        for (long first = 0; first < 2 * SLOTS; first += 4) c.publish(prompt, 0, LongStream.range(first, first + 4).toArray());
    }

    /**
     * Floods with {@code b}'s pages, a new prompt each round, until {@code gone} holds (a flood's
     * publishes can be refused while earlier pages wait for their SSD writes, so one round may not
     * turn the tier over).
     */
    static void floodUntil(Client b, java.util.function.BooleanSupplier gone) {
        long[] prompt = {1_000};
        await().atMost(RecordingSink.WAIT).until(() -> {
            flood(b, prompt[0]++);
            return gone.getAsBoolean();
        });
    }

    @Test
    void pinnedPagesOutliveAFloodAndTheirSessionUntilTheirTimeEnds() throws IOException {
        m = new ManagerFixture(dir, SLOTS, DramEviction.LRU);
        Client b = m.register("b", 1, B, ManagerFixture.FULL);
        try (Client a = m.register("a", 1, A, ManagerFixture.FULL)) {
            a.publish(1, 0, 0, 1, 2, 3);
            a.publish(2, 0, 0, 1);
            assertThat(a.send(blockHint(HintKind.PIN, 60_000, 1, 4))).isEqualTo(new Reply.Hinted(HintKind.PIN, 4, 0, 0));
            assertThat(a.send(blockHint(HintKind.PIN, 60_000, 7, 2)))
                    .as("pages nobody published").isEqualTo(new Reply.Hinted(HintKind.PIN, 0, 2, 0));
        }
        assertThat(m.core.hintPins()).as("pins belong to the namespace, not the session").isEqualTo(4);
        floodUntil(b, () -> !inDram(A, 2, 0) && !inDram(A, 2, 1)); // the unpinned pages of the same namespace
        for (int p = 0; p < 4; p++) assertThat(inDram(A, 1, p)).as("pinned page %d", p).isTrue();
        assertThat(m.core.hintPinnedBytes(nsId(A)))
                .isEqualTo(4L * ManagerFixture.SLOT);

        m.advance(TimeUnit.SECONDS.toNanos(59));
        assertThat(m.core.hintPins()).as("not yet expired").isEqualTo(4);
        m.advance(TimeUnit.SECONDS.toNanos(2));
        assertThat(m.core.hintPins()).isZero();
        assertThat(m.registry.get("orbitkv.manager.hint.pins.ended").tag("reason", "expired").counter().count()).isEqualTo(4);
        floodUntil(b, () -> !inDram(A, 1, 0) && !inDram(A, 1, 1) && !inDram(A, 1, 2) && !inDram(A, 1, 3));
        assertThat(m.registry.get("orbitkv.manager.hint.pages").tag("kind", "pin").tag("outcome", "applied").counter().count())
                .isEqualTo(4);
        b.close();
        m.assertNothingHeld();
    }

    @Test
    void aPinPastTheNamespacesBudgetIsRefusedPageByPage() throws IOException {
        m = new ManagerFixture(dir, SLOTS, DramEviction.LRU);
        m.core.useHintBounds(new HintBounds(TimeUnit.MINUTES.toNanos(1), 2L * ManagerFixture.SLOT, 1024));
        try (Client a = m.register("a", 1, A, ManagerFixture.FULL); Client b = m.register("b", 1, B, ManagerFixture.FULL)) {
            a.publish(1, 0, 0, 1, 2, 3);
            b.publish(1, 0, 0, 1);
            assertThat(a.send(blockHint(HintKind.PIN, 1_000, 1, 4))).isEqualTo(new Reply.Hinted(HintKind.PIN, 2, 0, 2));
            assertThat(a.send(blockHint(HintKind.PIN, 5_000, 1, 2)))
                    .as("a repeated pin extends, taking no more budget").isEqualTo(new Reply.Hinted(HintKind.PIN, 2, 0, 0));
            assertThat(b.send(blockHint(HintKind.PIN, 1_000, 1, 2)))
                    .as("each namespace has its own budget").isEqualTo(new Reply.Hinted(HintKind.PIN, 2, 0, 0));
            m.advance(TimeUnit.SECONDS.toNanos(2));
            assertThat(m.core.hintPins()).as("b's pins ended, a's were extended").isEqualTo(2);
            assertThat(a.send(blockHint(HintKind.UNPIN, 0, 1, 4))).isEqualTo(new Reply.Hinted(HintKind.UNPIN, 2, 2, 0));
            assertThat(m.core.hintPins()).isZero();
            assertThat(m.core.hintPinnedBytes(nsId(A))).isZero();
            assertThat(a.send(blockHint(HintKind.PIN, 1_000, 1, 4))).as("the budget came back")
                    .isEqualTo(new Reply.Hinted(HintKind.PIN, 2, 0, 2));
            assertThat(Client.error(a.send(new Request.Hint(HintKind.DEMOTE, 0, List.of(new Request.QueryGroup(9,
                    KeyForm.BLOCK_HASH, Client.hashes(1, 9, 1)))))))
                    .as("a group the contract lacks").isEqualTo(ErrorCode.NAMESPACE_MISMATCH);
        }
    }

    @Test
    void aDropRemovesPagesFromDramAndSsdAndALaterQueryMisses() throws IOException {
        m = ManagerFixture.open(dir);
        try (Client a = m.register("a", 1, A, ManagerFixture.FULL)) {
            a.publish(1, 0, 0, 1, 2);
            m.awaitOnSsd(A, 1, 0, 1, 2);
            assertThat(a.send(blockHint(HintKind.PIN, 10_000, 1, 3))).isEqualTo(new Reply.Hinted(HintKind.PIN, 3, 0, 0));
            assertThat(a.send(blockHint(HintKind.DROP, 0, 1, 4))).isEqualTo(new Reply.Hinted(HintKind.DROP, 3, 1, 0));
            for (int p = 0; p < 3; p++) {
                StateKey key = Client.key(A, 1, 0, p);
                assertThat(m.store.dram().contains(key)).isFalse();
                assertThat(m.store.ssd().contains(key)).isFalse();
            }
            assertThat(m.core.hintPins()).as("a drop ends the pins").isZero();
            Reply.QueryResult r = a.queryFull(1, 1, 3);
            assertThat(r.hit()).isFalse();
            a.send(new Request.Release(1));
        }
        m.assertNothingHeld();
    }

    @Test
    void hintsNamingAnotherNamespacesKeysChangeNothingAndAreAnsweredAsForAbsentKeys() throws IOException {
        m = ManagerFixture.open(dir);
        try (Client a = m.register("a", 1, A, ManagerFixture.FULL); Client b = m.register("b", 1, B, ManagerFixture.FULL)) {
            a.publish(1, 0, 0, 1, 2, 3);
            m.awaitOnSsd(A, 1, 0, 1, 2, 3);
            for (HintKind kind : HintKind.values()) {
                int millis = kind == HintKind.PIN ? 60_000 : 0;
                Reply foreign = b.send(keyHint(kind, millis, A, 1, 4));
                Reply absent = b.send(keyHint(kind, millis, A, 99, 4));
                assertThat(foreign).as(kind + " of a's keys").isEqualTo(absent).isEqualTo(new Reply.Hinted(kind, 0, 4, 0));
            }
            assertThat(m.core.hintPins()).isZero();
            for (int p = 0; p < 4; p++) {
                StateKey key = Client.key(A, 1, 0, p);
                assertThat(m.store.dram().contains(key)).as("page %d in DRAM", p).isTrue();
                assertThat(m.store.ssd().contains(key)).as("page %d on SSD", p).isTrue();
            }
            Reply.QueryResult r = a.queryFull(1, 1, 4);
            assertThat(r.boundaryTokens()).isEqualTo(4L * ManagerFixture.PAGE_TOKENS);
            a.send(new Request.Release(1));
            assertThat(a.send(keyHint(HintKind.DROP, 0, A, 1, 4)))
                    .as("a's own STATE_KEYs drop").isEqualTo(new Reply.Hinted(HintKind.DROP, 4, 0, 0));
        }
        m.assertNothingHeld();
    }

    @Test
    void aDropWhileThePagesSsdWritesAreQueuedKeepsThemOffTheSsd() throws IOException {
        m = ManagerFixture.open(dir);
        java.util.concurrent.CompletableFuture<Void> hold = m.holdSsdIo(); // the writes below queue behind it
        try (Client a = m.register("a", 1, A, ManagerFixture.FULL)) {
            a.publish(1, 0, 0, 1, 2);
            assertThat(a.send(blockHint(HintKind.DROP, 0, 1, 3))).isEqualTo(new Reply.Hinted(HintKind.DROP, 3, 0, 0));
            hold.complete(null);
            await().atMost(RecordingSink.WAIT).untilAsserted(() -> {
                assertThat(m.registry.get("orbitkv.publish.ssd.written").tag("result", "committed").counter().count())
                        .as("the queued writes ran").isEqualTo(3);
                for (int p = 0; p < 3; p++) {
                    assertThat(m.store.ssd().contains(Client.key(A, 1, 0, p))).as("page %d on SSD", p).isFalse();
                }
            });
            Reply.QueryResult r = a.queryFull(1, 1, 3);
            assertThat(r.hit()).isFalse();
            a.send(new Request.Release(1));
        }
        m.assertNothingHeld();
    }
}
