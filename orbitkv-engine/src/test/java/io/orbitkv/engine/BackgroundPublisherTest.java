package io.orbitkv.engine;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import io.orbitkv.client.PageToPublish;
import io.orbitkv.client.PublishOutcome;
import io.orbitkv.state.StateKey;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.junit.jupiter.api.Test;

/**
 * {@link BackgroundPublisher} against a sink the test controls (a latch holds a publish in
 * flight), so that "queued", "in flight" and "closed" are states the test reaches by waiting on
 * the publisher's own counters, never by sleeping.
 */
class BackgroundPublisherTest {

    private static final long PAGE = 4096;
    private static final Duration WAIT = Duration.ofSeconds(20);

    /** A sink that seals every page, after {@link #gate} opens; records what it saw, first byte of each image. */
    private static final class GatedSink implements Function<List<PageToPublish>, List<PublishOutcome>> {
        final CountDownLatch gate = new CountDownLatch(1);
        final List<Byte> seen = Collections.synchronizedList(new ArrayList<>());

        @Override
        public List<PublishOutcome> apply(List<PageToPublish> pages) {
            try {
                if (!gate.await(30, TimeUnit.SECONDS)) throw new IllegalStateException("gate never opened");
            } catch (InterruptedException e) {
                throw new IllegalStateException(e);
            }
            List<PublishOutcome> out = new ArrayList<>();
            for (PageToPublish p : pages) {
                seen.add(p.image().get(java.lang.foreign.ValueLayout.JAVA_BYTE, 0));
                out.add(PublishOutcome.SEALED);
            }
            return out;
        }
    }

    private static List<StateKey> keys(int seed, int n) {
        return SyntheticKeys.of(new byte[32], seed, n);
    }

    private static KvPageStore.PublishReport offer(BackgroundPublisher p, int seed, int pages) {
        return p.offer(0, keys(seed, pages), PAGE, (i, slot) -> slot.fill((byte) (seed * 16 + i)));
    }

    private static BackgroundPublisher start(long budget, Function<List<PageToPublish>, List<PublishOutcome>> sink) {
        return new BackgroundPublisher("test-publisher", budget, sink, e -> false);
    }

    @Test
    void batchesArePublishedInOrderAndAwaitPublishedSeesThemSettled() throws Exception {
        GatedSink sink = new GatedSink();
        sink.gate.countDown();
        try (BackgroundPublisher p = start(1 << 20, sink)) {
            assertThat(offer(p, 1, 2)).isEqualTo(KvPageStore.PublishReport.queued(2));
            assertThat(offer(p, 2, 3)).isEqualTo(KvPageStore.PublishReport.queued(3));
            assertThat(p.awaitPublished(WAIT)).isTrue();
            assertThat(sink.seen).containsExactly((byte) 16, (byte) 17, (byte) 32, (byte) 33, (byte) 34);
            PublishStats s = p.stats();
            assertThat(s.sealed()).isEqualTo(5);
            assertThat(s.pagesQueued()).isEqualTo(5);
            assertThat(s.heldBytes()).isZero();
            assertThat(s.queuedBytes()).isZero();
            assertThat(s.queuedBytesHighWater()).isBetween(2 * PAGE, 5 * PAGE);
        }
    }

    @Test
    void aBatchOverTheByteBudgetIsDroppedAndCountedWhileTheQueueIsFull() throws Exception {
        GatedSink sink = new GatedSink();
        try (BackgroundPublisher p = start(4 * PAGE, sink)) {
            offer(p, 1, 2);
            // the publisher took batch 1 and waits at the gate: nothing queued, 2 pages held
            await().atMost(WAIT).until(() -> p.stats().queuedBytes() == 0 && p.stats().heldBytes() == 2 * PAGE);
            assertThat(offer(p, 2, 3)).isEqualTo(KvPageStore.PublishReport.queued(3));
            // 3 pages queued of a 4-page budget: a 2-page batch does not fit and is dropped
            assertThat(offer(p, 3, 2)).isEqualTo(new KvPageStore.PublishReport(0, 0, 2));
            assertThat(p.stats().droppedFull()).isEqualTo(2);
            assertThat(p.stats().queuedBytesHighWater()).isEqualTo(3 * PAGE);
            // one batch larger than the whole budget never fits
            assertThat(offer(p, 4, 5).refused()).isEqualTo(5);
            sink.gate.countDown();
            assertThat(p.awaitPublished(WAIT)).isTrue();
            PublishStats s = p.stats();
            assertThat(s.sealed()).isEqualTo(5);
            assertThat(s.droppedFull()).isEqualTo(7);
            assertThat(s.heldBytes()).isZero();
            // the budget is free again
            assertThat(offer(p, 5, 4).queued()).isEqualTo(4);
            assertThat(p.awaitPublished(WAIT)).isTrue();
        }
    }

    @Test
    void closeAbandonsQueuedBatchesFinishesTheOneInFlightAndFreesEverything() throws Exception {
        GatedSink sink = new GatedSink();
        BackgroundPublisher p = start(1 << 20, sink);
        offer(p, 1, 2);
        await().atMost(WAIT).until(() -> p.stats().queuedBytes() == 0 && p.stats().heldBytes() == 2 * PAGE);
        offer(p, 2, 3);
        offer(p, 3, 1);
        assertThat(p.stats().heldBytes()).isEqualTo(6 * PAGE);
        Thread closer = Thread.ofPlatform().start(p::close);
        // close frees the queued batches at once and then waits for the one in flight
        await().atMost(WAIT).until(() -> p.stats().droppedClosed() == 4);
        assertThat(p.stats().heldBytes()).isEqualTo(2 * PAGE);
        assertThat(closer.isAlive()).isTrue();
        sink.gate.countDown();
        closer.join(WAIT.toMillis());
        assertThat(closer.isAlive()).isFalse();
        PublishStats s = p.stats();
        assertThat(s.sealed()).isEqualTo(2);
        assertThat(s.heldBytes()).isZero();
        assertThat(s.queuedBytes()).isZero();
        assertThat(p.awaitPublished(Duration.ZERO)).isTrue();
        // after close an offer is dropped, counted, and holds nothing
        assertThat(offer(p, 4, 1).refused()).isEqualTo(1);
        assertThat(p.stats().heldBytes()).isZero();
        p.close();   // idempotent
    }

    @Test
    void awaitKeysPublishedWaitsOnlyForTheBatchesHoldingThoseKeys() throws Exception {
        GatedSink sink = new GatedSink();
        try (BackgroundPublisher p = start(1 << 20, sink)) {
            offer(p, 1, 2);
            await().atMost(WAIT).until(() -> p.stats().queuedBytes() == 0 && p.stats().heldBytes() == 2 * PAGE);
            offer(p, 2, 3);
            // keys nobody queued: no wait
            assertThat(p.awaitKeysPublished(keys(9, 4), Duration.ZERO)).isTrue();
            // a key of the queued batch (2) and one of the batch in flight (1): not settled while the gate is shut
            assertThat(p.awaitKeysPublished(List.of(keys(2, 3).get(2)), Duration.ofMillis(20))).isFalse();
            assertThat(p.awaitKeysPublished(List.of(keys(1, 2).get(0)), Duration.ofMillis(20))).isFalse();
            sink.gate.countDown();
            assertThat(p.awaitKeysPublished(keys(2, 3), WAIT)).isTrue();
            assertThat(p.stats().sealed()).isEqualTo(5);
        }
    }

    @Test
    void aFailingPublishIsCountedAndTheThreadKeepsPublishing() throws Exception {
        List<Integer> calls = Collections.synchronizedList(new ArrayList<>());
        Function<List<PageToPublish>, List<PublishOutcome>> sink = pages -> {
            calls.add(pages.size());
            if (calls.size() == 1) throw new UncheckedIOException(new IOException("the Manager is gone"));
            if (calls.size() == 2) throw new IllegalStateException("a bug in the sink");
            return Collections.nCopies(pages.size(), PublishOutcome.ALREADY_RESIDENT);
        };
        try (BackgroundPublisher p = start(1 << 20, sink)) {
            offer(p, 1, 2);
            offer(p, 2, 1);
            offer(p, 3, 3);
            assertThat(p.awaitPublished(WAIT)).isTrue();
            PublishStats s = p.stats();
            assertThat(s.errors()).isEqualTo(2);
            assertThat(s.droppedFailed()).isEqualTo(3);
            assertThat(s.alreadyPresent()).isEqualTo(3);
            assertThat(s.heldBytes()).isZero();
        }
    }

    @Test
    void aWriterThatThrowsLeavesNothingQueuedOrHeld() {
        GatedSink sink = new GatedSink();
        sink.gate.countDown();
        try (BackgroundPublisher p = start(1 << 20, sink)) {
            assertThatThrownBy(() -> p.offer(0, keys(1, 3), PAGE, (i, slot) -> {
                if (i == 2) throw new IllegalStateException("engine export failed");
            })).isInstanceOf(IllegalStateException.class);
            PublishStats s = p.stats();
            assertThat(s.heldBytes()).isZero();
            assertThat(s.queuedBytes()).isZero();
            assertThat(s.pagesQueued()).isZero();
        }
    }
}
