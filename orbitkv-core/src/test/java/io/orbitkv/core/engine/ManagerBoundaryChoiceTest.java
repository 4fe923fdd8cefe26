package io.orbitkv.core.engine;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.cost.BoundaryChoice;
import io.orbitkv.core.cost.ByteCount;
import io.orbitkv.core.cost.CostConfig;
import io.orbitkv.core.cost.CostKey;
import io.orbitkv.core.cost.CostObserver;
import io.orbitkv.core.cost.Lookup;
import io.orbitkv.core.cost.Observation;
import io.orbitkv.core.cost.Terminal;
import io.orbitkv.core.cost.Timeline;
import io.orbitkv.core.query.RemotePages;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.protocol.CompletionEvent;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.ProtocolLimits;
import io.orbitkv.state.protocol.QueryStatus;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/**
 * Boundary choice by first-token estimate at the Manager level: 8 published
 * pages, pages 0-3 still in DRAM, pages 4-7 on SSD only. The longest legal boundary (128 tokens)
 * needs 4 SSD stagings; the longest DRAM-only one is 64 tokens.
 */
class ManagerBoundaryChoiceTest {

    static final Namespace NS = ManagerFixture.namespace("model-b");
    static final long PROMPT = 11;
    static final int PAGES = 8;
    static final long PROMPT_TOKENS = (long) PAGES * ManagerFixture.PAGE_TOKENS + 1;
    static final long SLOW_READ_NANOS = TimeUnit.MILLISECONDS.toNanos(50);

    @TempDir
    Path dir;
    ManagerFixture m;
    CostObserver cost;

    @AfterEach
    void close() {
        if (m != null) m.close();
    }

    Client open(CostObserver observer) throws IOException {
        cost = observer;
        m = new ManagerFixture(dir, 64, ProtocolLimits.DEFAULTS, ManagerBounds.DEFAULTS, RemotePages.NONE, observer);
        Client c = m.register("e1", 1, NS, ManagerFixture.FULL);
        c.publish(PROMPT, 0, 0, 1, 2, 3, 4, 5, 6, 7);
        for (long p = 0; p < PAGES; p++) {
            StateKey key = Client.key(NS, PROMPT, 0, p);
            await().atMost(RecordingSink.WAIT).until(() -> m.store.ssd().contains(key));
            if (p >= 4) {
                await().atMost(RecordingSink.WAIT).until(() -> m.store.dram().evict(key) || !m.store.dram().contains(key));
            }
        }
        m.assertNothingHeld();
        return c;
    }

    /** The registry the observer's meters live in (not the fixture's). */
    final SimpleMeterRegistry costRegistry = new SimpleMeterRegistry();

    CostObserver observing() {
        return CostObserver.create(CostConfig.defaults(true), costRegistry, System::nanoTime);
    }

    /** Four successful SSD route samples of {@code nanos} each for one staged page: a warm estimate. */
    void warmSsdReads(long nanos) {
        CostKey key = m.store.ssd().readRouteKey(ManagerFixture.PAGE_BYTES);
        for (int i = 0; i < 4; i++) {
            long done = System.nanoTime();
            cost.record(new Observation(key, Terminal.SUCCEEDED, new Timeline(done - nanos, done - nanos, done - nanos, done),
                    ByteCount.known(ManagerFixture.PAGE_BYTES), ByteCount.known(ManagerFixture.PAGE_BYTES + 4096L)));
        }
        assertThat(m.store.ssd().readEstimate(ManagerFixture.PAGE_BYTES)).isInstanceOf(Lookup.Warm.class);
    }

    static Request.Query query(long op, int prefillTokensPerSecond) {
        return new Request.Query(op, 0, CompletionTarget.HOST_READY, PROMPT_TOKENS, 0, prefillTokensPerSecond,
                List.of(new Request.QueryGroup(0, KeyForm.BLOCK_HASH, Client.hashes(PROMPT, 0, PAGES))));
    }

    /** The FINAL result: {@code first} itself, or the poll after its QUERY_SETTLED. */
    static Reply.QueryResult awaitFinal(Client c, Reply.QueryResult first) {
        if (first.status() == QueryStatus.FINAL) return first;
        c.sink.await(first.operationId(), CompletionEvent.QUERY_SETTLED);
        return (Reply.QueryResult) c.send(new Request.QueryPoll(first.operationId(), first.revision()));
    }

    double ssdReads() {
        return m.registry.get("orbitkv.ssd.reads").counter().count();
    }

    @Test
    void slowSsdAndFastPrefillServeTheShorterDramBoundaryAtOnce() throws IOException {
        try (Client c = open(observing())) {
            warmSsdReads(SLOW_READ_NANOS);
            double readsBefore = ssdReads();
            // 4 waves of 50 ms (one I/O thread) = 200 ms to stage; recomputing 64 more tokens at
            // 100,000 tokens/s costs 0.64 ms.
            Reply.QueryResult r = (Reply.QueryResult) c.send(query(1, 100_000));
            assertThat(r.status()).isEqualTo(QueryStatus.FINAL);
            assertThat(r.hit()).isTrue();
            assertThat(r.boundaryTokens()).isEqualTo(4L * ManagerFixture.PAGE_TOKENS);
            assertThat(r.groups().getFirst().spans().getFirst().pages()).hasSize(4)
                    .allMatch(p -> p instanceof Reply.Resident);
            c.assertBytes(r, PROMPT);
            assertThat(ssdReads()).as("no staging was started").isEqualTo(readsBefore);
            assertThat(cost.boundaryStatus().shortened()).isEqualTo(1);
            assertThat(costRegistry.get("orbitkv.cost.boundary").tag("basis", "shortened_by_estimate").counter().count())
                    .isEqualTo(1);
            c.send(new Request.Release(1));
            m.assertNothingHeld();
        }
    }

    @Test
    void withoutAPrefillRateTheLongestBoundaryIsStaged() throws IOException {
        try (Client c = open(observing())) {
            warmSsdReads(SLOW_READ_NANOS);
            Reply.QueryResult first = (Reply.QueryResult) c.send(query(1, 0));
            assertThat(first.status()).isEqualTo(QueryStatus.PENDING);
            Reply.QueryResult settled = awaitFinal(c, first);
            assertThat(settled.boundaryTokens()).isEqualTo((long) PAGES * ManagerFixture.PAGE_TOKENS);
            c.assertBytes(settled, PROMPT);
            assertThat(cost.boundaryStatus().shortened()).isZero();
            assertThat(cost.boundaryStatus().keptLongest()).containsEntry(BoundaryChoice.Basis.NO_PREFILL_RATE, 1L);
            c.send(new Request.Release(1));
            m.assertNothingHeld();
        }
    }

    @Test
    void withoutWarmEstimatesTheLongestBoundaryIsStaged() throws IOException {
        try (Client c = open(observing())) {
            Reply.QueryResult settled = awaitFinal(c, (Reply.QueryResult) c.send(query(1, 100_000)));
            assertThat(settled.boundaryTokens()).isEqualTo((long) PAGES * ManagerFixture.PAGE_TOKENS);
            assertThat(cost.boundaryStatus().keptLongest()).containsEntry(BoundaryChoice.Basis.NO_ESTIMATE, 1L);
            c.send(new Request.Release(1));
            m.assertNothingHeld();
        }
    }

    @Test
    void fastSsdAndSlowPrefillKeepTheLongestBoundary() throws IOException {
        try (Client c = open(observing())) {
            // 4 × 100 µs to stage against 64 tokens at 1,000 tokens/s = 64 ms to recompute.
            warmSsdReads(TimeUnit.MICROSECONDS.toNanos(100));
            Reply.QueryResult settled = awaitFinal(c, (Reply.QueryResult) c.send(query(1, 1_000)));
            assertThat(settled.boundaryTokens()).isEqualTo((long) PAGES * ManagerFixture.PAGE_TOKENS);
            assertThat(cost.boundaryStatus().keptLongest()).containsEntry(BoundaryChoice.Basis.LONGEST_BY_ESTIMATE, 1L);
            c.send(new Request.Release(1));
            m.assertNothingHeld();
        }
    }

    @Test
    void withObservationsOffNothingIsChosenOrCounted() throws IOException {
        try (Client c = open(CostObserver.disabled())) {
            Reply.QueryResult settled = awaitFinal(c, (Reply.QueryResult) c.send(query(1, 100_000)));
            assertThat(settled.boundaryTokens()).isEqualTo((long) PAGES * ManagerFixture.PAGE_TOKENS);
            assertThat(cost.boundaryStatus().shortened()).isZero();
            assertThat(cost.boundaryStatus().keptLongest()).isEmpty();
            c.send(new Request.Release(1));
            m.assertNothingHeld();
        }
    }
}
