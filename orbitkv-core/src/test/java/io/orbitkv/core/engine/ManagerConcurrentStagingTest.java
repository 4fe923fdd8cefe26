package io.orbitkv.core.engine;

import io.orbitkv.state.Namespace;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.protocol.CompletionEvent;
import io.orbitkv.state.protocol.PageState;
import io.orbitkv.state.protocol.ProtocolLimits;
import io.orbitkv.state.protocol.QueryStatus;
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
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/**
 * Sixteen queries at once over pages that are only on SSD, more distinct keys in total (128) than
 * the store stages at once (the fixture's {@code maxInflightStages} = 64) and more than DRAM's
 * reserved-bytes budget holds (16 slots): every page is served, none becomes a final miss, and the
 * in-flight table never passes its bound. Before the staging queue and parking, 112 of the 128
 * stagings were answered Busy and every query settled at one page.
 */
class ManagerConcurrentStagingTest {

    static final Namespace NS = ManagerFixture.namespace("model-a");
    static final int QUERIES = 16;
    static final int PAGES = 8;
    static final int MAX_INFLIGHT_STAGES = 64; // ManagerFixture's TieredStoreConfig

    @TempDir
    Path dir;
    ManagerFixture m;

    @AfterEach
    void close() {
        if (m != null) m.close();
    }

    @Test
    void sixteenConcurrentQueriesOfSsdPagesAreAllServedWithinTheStagingBound() throws Exception {
        m = new ManagerFixture(dir, 4 * QUERIES * PAGES, ProtocolLimits.DEFAULTS, ManagerBounds.DEFAULTS);
        long[] pages = new long[PAGES];
        for (int p = 0; p < PAGES; p++) pages[p] = p;
        try (Client publisher = m.register("publisher", 1, NS, ManagerFixture.FULL)) {
            for (int q = 0; q < QUERIES; q++) publisher.publish(100 + q, 0, pages);
            List<StateKey> keys = new ArrayList<>();
            for (int q = 0; q < QUERIES; q++) for (long p : pages) keys.add(Client.key(NS, 100 + q, 0, p));
            await().atMost(RecordingSink.WAIT).until(() -> keys.stream().allMatch(m.store.ssd()::contains));
        }
        m.restart(); // DRAM is empty, every page is on SSD only

        List<Client> clients = new ArrayList<>();
        for (int q = 0; q < QUERIES; q++) clients.add(m.register("e" + q, 1, NS, ManagerFixture.FULL));
        AtomicInteger peakInflight = new AtomicInteger();
        AtomicBoolean sampling = new AtomicBoolean(true);
        Thread sampler = Thread.ofPlatform().start(() -> {
            while (sampling.get()) peakInflight.accumulateAndGet(m.store.inflightStagings(), Math::max);
        });
        CountDownLatch go = new CountDownLatch(1);
        List<CompletableFuture<Reply.QueryResult>> results = new ArrayList<>();
        for (int q = 0; q < QUERIES; q++) {
            Client c = clients.get(q);
            long prompt = 100 + q;
            results.add(CompletableFuture.supplyAsync(() -> {
                try {
                    go.await();
                } catch (InterruptedException e) {
                    throw new IllegalStateException(e);
                }
                Reply.QueryResult first = c.queryFull(1, prompt, PAGES);
                if (first.status() == QueryStatus.FINAL) return first;
                c.sink.await(1, CompletionEvent.QUERY_SETTLED);
                return (Reply.QueryResult) c.send(new Request.QueryPoll(1, 0));
            }, command -> Thread.ofPlatform().start(command)));
        }
        go.countDown();
        for (int q = 0; q < QUERIES; q++) {
            Reply.QueryResult r = results.get(q).get(RecordingSink.WAIT.toSeconds(), TimeUnit.SECONDS);
            assertThat(r.status()).isEqualTo(QueryStatus.FINAL);
            assertThat(r.boundaryTokens()).as("query %d: every page is on SSD", q)
                    .isEqualTo((long) PAGES * ManagerFixture.PAGE_TOKENS);
            assertThat(ManagerCoreTest.states(r, 0)).containsOnly(PageState.RESIDENT);
            clients.get(q).assertBytes(r, 100 + q);
        }
        sampling.set(false);
        sampler.join();
        assertThat(m.registry.get("orbitkv.tiered.stage").tag("result", "busy").counter().count())
                .as("no staging refused below the limits").isZero();
        assertThat(peakInflight.get()).as("keys staged at once").isLessThanOrEqualTo(MAX_INFLIGHT_STAGES);
        // Both waits were used: keys past the table's 64 queued, and stagings past the fixture's DRAM
        // reserved-bytes budget (16 slots) parked until another staging's commit returned its bytes.
        assertThat(m.registry.get("orbitkv.tiered.stage.queued").counter().count()).isPositive();
        assertThat(m.registry.get("orbitkv.tiered.stage.parked").counter().count()).isPositive();
        for (Client c : clients) {
            c.send(new Request.Release(1));
            c.close();
        }
        m.assertNothingHeld();
    }
}
