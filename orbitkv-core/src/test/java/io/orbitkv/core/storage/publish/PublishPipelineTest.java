package io.orbitkv.core.storage.publish;

import io.orbitkv.core.storage.dram.AcquireResult;
import io.orbitkv.core.storage.dram.CommitResult;
import io.orbitkv.core.storage.dram.Lease;
import io.orbitkv.core.storage.dram.Reservation;
import io.orbitkv.core.storage.dram.SlotRef;
import io.orbitkv.state.StateKey;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CompletableFuture;


import static io.orbitkv.core.storage.publish.PublishFixture.BLOCK;
import static io.orbitkv.core.storage.publish.PublishFixture.NS;
import static io.orbitkv.core.storage.publish.PublishFixture.hasCanary;
import static io.orbitkv.core.storage.publish.PublishFixture.key;
import static io.orbitkv.core.storage.publish.PublishFixture.page;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

class PublishPipelineTest {

    private static final Duration WAIT = Duration.ofSeconds(10);

    @TempDir
    Path dir;

    private PublishFixture f;

    @AfterEach
    void close() {
        if (f != null) f.close();
    }

    private PublishFixture open(PublishConfig config, int dramSlots) throws IOException {
        f = new PublishFixture(dir, config, dramSlots);
        return f;
    }

    private Lease acquire(StateKey key) {
        AcquireResult r = f.dram.acquire(key, NS);
        assertThat(r).isInstanceOf(Lease.class);
        return (Lease) r;
    }

    @Test
    void theSealQueueIsBoundedInBytesAndAFullQueueIsBusyNotBlocking() throws IOException {
        open(PublishFixture.config(new SsdAdmissionPolicy.OnEvict()).withSealQueue(2L * BLOCK + 100, 64), 8);
        assertThat(f.pipeline.publish(key(1), NS, PageSource.weak(page(key(1), BLOCK), BLOCK)))
                .isEqualTo(new PublishResult.Queued(BLOCK));
        assertThat(f.pipeline.publish(key(2), NS, PageSource.weak(page(key(2), BLOCK), BLOCK)))
                .isEqualTo(new PublishResult.Queued(2L * BLOCK));
        assertThat(f.pipeline.publish(key(3), NS, PageSource.weak(page(key(3), BLOCK), BLOCK)))
                .isInstanceOf(PublishResult.Busy.class);
        assertThat(f.registry.get("orbitkv.publish.seal.busy").counter().count()).isEqualTo(1.0);
        assertThat(f.registry.get("orbitkv.publish.seal.queue.bytes").gauge().value()).isEqualTo(2.0 * BLOCK);
        assertThat(f.registry.get("orbitkv.publish.seal.queue.depth").gauge().value()).isEqualTo(2.0);
        assertThat(f.dram.contains(key(1))).as("nothing enters DRAM before sealing").isFalse();

        assertThat(f.pipeline.sealQueued(1)).isEqualTo(1);
        // Room again for one block, and sealing put the first one in DRAM with its bytes.
        assertThat(f.pipeline.publish(key(3), NS, PageSource.weak(page(key(3), BLOCK), BLOCK)))
                .isInstanceOf(PublishResult.Queued.class);
        assertThat(f.pipeline.sealQueued(10)).isEqualTo(2);
        for (int i = 1; i <= 3; i++) {
            try (Lease lease = acquire(key(i))) {
                assertThat(hasCanary(lease.segment(), key(i))).isTrue();
            }
        }
        assertThat(f.pipeline.sealQueueBytes()).isZero();
    }

    @Test
    void aSourceReclaimedBeforeItsTurnIsDroppedAndCounted() throws IOException {
        open(PublishFixture.config(new SsdAdmissionPolicy.WriteThrough()), 8);
        PublishFixture.ReclaimableSource gone = new PublishFixture.ReclaimableSource(page(key(1), BLOCK));
        PublishFixture.ReclaimableSource kept = new PublishFixture.ReclaimableSource(page(key(2), BLOCK));
        f.pipeline.publish(key(1), NS, gone);
        f.pipeline.publish(key(2), NS, kept);
        gone.reclaim();
        assertThat(f.pipeline.sealQueued(10)).isEqualTo(2);
        assertThat(f.dram.contains(key(1))).isFalse();
        assertThat(f.dram.contains(key(2))).isTrue();
        assertThat(gone.closed).isTrue();
        assertThat(kept.closed).isTrue();
        assertThat(f.count("orbitkv.publish.seal.dropped", "reason", "source_gone")).isEqualTo(1.0);
        assertThat(f.dram.usage().reservedBytes()).isZero();
    }

    @Test
    void aWeakSourceIsGoneOnceTheProducerDropsItAndTheCollectorRuns() throws IOException {
        open(PublishFixture.config(new SsdAdmissionPolicy.WriteThrough()), 8);
        PageSource source = PageSource.weak(page(key(1), BLOCK), BLOCK); // no strong reference kept
        f.pipeline.publish(key(1), NS, source);
        await().atMost(WAIT).until(() -> {
            System.gc();
            return source.tryOpen().isEmpty();
        });
        f.pipeline.sealQueued(1);
        assertThat(f.dram.contains(key(1))).isFalse();
        assertThat(f.count("orbitkv.publish.seal.dropped", "reason", "source_gone")).isEqualTo(1.0);
    }

    @Test
    void writeThroughWritesEachBlockOnceWithItsBytes() throws IOException {
        open(PublishFixture.config(new SsdAdmissionPolicy.WriteThrough()), 8);
        f.publishAndSeal(key(1));
        await().atMost(WAIT).until(() -> f.ssd.contains(key(1)));
        // The same key again: already resident, no second seal and no second write.
        f.publishAndSeal(key(1));
        f.pipeline.onCommitted(key(1), NS, 999, BLOCK); // even a repeated commit notice finds it stored
        await().atMost(WAIT).until(() -> f.dispatcher.inFlight() == 0 && f.pipeline.writeQueuedBytes() == 0);
        assertThat(f.ssdWrites()).isEqualTo(1.0);
        assertThat(f.count("orbitkv.publish.seal.sealed", "result", "already_resident")).isEqualTo(1.0);
        assertThat(f.count("orbitkv.publish.ssd.skipped", "reason", "already_stored")).isEqualTo(1.0);
        assertThat(hasCanary(f.readFromSsd(key(1)).orElseThrow(), key(1))).isTrue();
        // Zero-copy writes: the DRAM slot went to the device as is.
        assertThat(f.registry.get("orbitkv.ssd.bounce.copies").counter().count()).isZero();
        assertThat(f.dram.usage().leases()).isZero();
    }

    /** A zero-copy commit (the engine wrote the slot) counts as the sealer's copy does: bytes by tier and result. */
    @Test
    void aZeroCopyCommitCountsAsASealedBlockWithItsBytes() throws IOException {
        open(PublishFixture.config(new SsdAdmissionPolicy.OnEvict()), 8);
        f.publishAndSeal(key(1));
        Reservation mine = (Reservation) f.dram.reserve(key(2), NS, BLOCK);
        PublishFixture.writeCanary(mine.segment(), key(2));

        assertThat(f.pipeline.commitAndAdmit(mine)).isInstanceOf(CommitResult.Inserted.class);
        assertThat(f.pipeline.commitAndAdmit(mine)).as("settled once").isInstanceOf(CommitResult.NotOpen.class);

        assertThat(f.count("orbitkv.publish.seal.sealed", "result", "inserted")).isEqualTo(2.0);
        assertThat(f.count("orbitkv.publish.seal.sealed", "result", "duplicate")).isZero();
        assertThat(f.count("orbitkv.publish.bytes", "tier", "dram")).isEqualTo(2.0 * BLOCK);
        try (Lease lease = acquire(key(2))) {
            assertThat(hasCanary(lease.segment(), key(2))).isTrue();
        }
    }

    @Test
    void onEvictWritesOnlyWhenDramEvictsAndWritesTheEvictedBytes() throws IOException {
        open(PublishFixture.config(new SsdAdmissionPolicy.OnEvict()), 5);
        f.publishAndSeal(key(1));
        assertThat(f.dispatcher.depth(false) + f.dispatcher.inFlight()).isZero();
        SlotRef slotOf1;
        try (Lease lease = acquire(key(1))) {
            slotOf1 = lease.slotRef();
        }
        // Hold the dispatcher's only submission slot so the eviction's write waits in the lane.
        CompletableFuture<Void> hold = new CompletableFuture<>();
        f.dispatcher.submitRead(new IoOp() {
            @Override
            public CompletableFuture<?> start() {
                return hold;
            }

            @Override
            public void drop(DropReason reason) {
            }
        });
        assertThat(f.dram.evict(key(1))).isTrue();
        // The evicting thread only hands the image over; admission runs on the sealing thread.
        assertThat(f.dispatcher.depth(false)).isZero();
        assertThat(f.pipeline.admitEvicted()).isEqualTo(1);
        assertThat(f.dispatcher.depth(false)).isEqualTo(1);
        // The retained image's slot is not free: new blocks go elsewhere and cannot overwrite it.
        assertThat(f.dram.usage().evictedLeasedBytes()).isEqualTo(16 * 1024);
        f.publishAndSeal(key(2));
        f.publishAndSeal(key(3));
        try (Lease l2 = acquire(key(2)); Lease l3 = acquire(key(3))) {
            assertThat(l2.slotRef().offsetBytes()).isNotEqualTo(slotOf1.offsetBytes());
            assertThat(l3.slotRef().offsetBytes()).isNotEqualTo(slotOf1.offsetBytes());
        }
        hold.complete(null);
        await().atMost(WAIT).until(() -> f.ssd.contains(key(1)));
        await().atMost(WAIT).until(() -> f.dram.usage().evictedLeasedBytes() == 0);
        MemorySegment onSsd = f.readFromSsd(key(1)).orElseThrow();
        assertThat(hasCanary(onSsd, key(1))).isTrue();
        // Now the slot is reused by the next block, and the SSD copy still holds key 1's bytes.
        f.publishAndSeal(key(4));
        try (Lease l4 = acquire(key(4))) {
            assertThat(l4.slotRef().offsetBytes()).isEqualTo(slotOf1.offsetBytes());
            assertThat(hasCanary(l4.segment(), key(4))).isTrue();
        }
        assertThat(hasCanary(f.readFromSsd(key(1)).orElseThrow(), key(1))).isTrue();
        assertThat(f.ssd.contains(key(2))).as("not evicted, not written").isFalse();
        assertThat(f.ssdWrites()).isEqualTo(1.0);
    }

    @Test
    void onEvictWritesAPageAgainOnlyWhenItsExtentIsInTheOldestPartOfTheRing() throws IOException {
        open(PublishFixture.config(new SsdAdmissionPolicy.OnEvict()), 5);
        f.publishAndSeal(key(1));
        assertThat(f.dram.evict(key(1))).isTrue();
        f.pipeline.admitEvicted();
        await().atMost(WAIT).until(() -> f.ssd.contains(key(1)));
        long first = ssdGeneration(key(1));

        // Read back and evicted again while its extent is the ring's newest: not written twice.
        f.publishAndSeal(key(1));
        assertThat(f.dram.evict(key(1))).isTrue();
        f.pipeline.admitEvicted();
        assertThat(f.count("orbitkv.publish.ssd.skipped", "reason", "already_stored")).isEqualTo(1.0);
        assertThat(f.count("orbitkv.publish.ssd.refreshed", null, null)).isZero();

        // Other pages push the head on until key 1's extent lies in the older half, not yet reached.
        long ring = f.ssd.capacityBytes();
        int fillers = 0;
        while (!f.ssd.isAgeing(key(1), PublishFixture.DIGEST, 0.5)) {
            StateKey k = key(1000 + fillers++);
            assertThat(f.ssd.write(PublishFixture.DIGEST, k, page(k, BLOCK), BLOCK).join())
                    .isInstanceOf(io.orbitkv.core.storage.ssd.WriteResult.Committed.class);
            assertThat((long) fillers * BLOCK).as("reached the older half within one lap").isLessThan(ring);
        }
        assertThat(f.ssd.contains(key(1))).isTrue();
        long eventsBefore = f.residency.lastSequence();

        f.publishAndSeal(key(1));
        assertThat(f.dram.evict(key(1))).isTrue();
        f.pipeline.admitEvicted();
        await().atMost(WAIT).until(() -> f.count("orbitkv.publish.ssd.written", "result", "committed") == 2.0);
        assertThat(f.count("orbitkv.publish.ssd.refreshed", null, null)).isEqualTo(1.0);
        assertThat(ssdGeneration(key(1))).isGreaterThan(first);
        assertThat(f.ssd.isAgeing(key(1), PublishFixture.DIGEST, 0.5)).as("now at the young end").isFalse();
        assertThat(hasCanary(f.readFromSsd(key(1)).orElseThrow(), key(1))).isTrue();
        // A follower applying the events in order ends with key 1 on SSD: the old generation's
        // REMOVED comes before the new one's ADDED.
        var events = f.residency.readFrom(eventsBefore + 1, 4096).events().stream()
                .filter(e -> e.key().equals(key(1)) && e.medium() == io.orbitkv.core.storage.residency.ResidencyEvent.Medium.SSD)
                .map(e -> e.kind() + "@" + e.generation()).toList();
        assertThat(events).containsExactly("REMOVED@" + first, "ADDED@" + ssdGeneration(key(1)));
    }

    private long ssdGeneration(StateKey key) {
        try (var pin = (io.orbitkv.core.storage.ssd.Pin) f.ssd.pin(key, PublishFixture.DIGEST)) {
            return pin.generation();
        }
    }

    @Test
    void reuseAwareWritesAfterNHitsAndNotBefore() throws IOException {
        open(PublishFixture.config(new SsdAdmissionPolicy.ReuseAware(3)), 8);
        f.publishAndSeal(key(1));
        for (int hit = 1; hit <= 2; hit++) {
            try (Lease lease = acquire(key(1))) {
                f.pipeline.onDramHit(lease);
            }
        }
        assertThat(f.pipeline.writeQueuedBytes()).isZero();
        assertThat(f.count("orbitkv.publish.ssd.admitted", null, null)).isZero();
        assertThat(f.ssd.contains(key(1))).isFalse();
        try (Lease lease = acquire(key(1))) {
            f.pipeline.onDramHit(lease);
        }
        await().atMost(WAIT).until(() -> f.ssd.contains(key(1)));
        // More hits do not write again.
        for (int hit = 0; hit < 5; hit++) {
            try (Lease lease = acquire(key(1))) {
                f.pipeline.onDramHit(lease);
            }
        }
        await().atMost(WAIT).until(() -> f.dispatcher.inFlight() == 0);
        assertThat(f.ssdWrites()).isEqualTo(1.0);
        assertThat(hasCanary(f.readFromSsd(key(1)).orElseThrow(), key(1))).isTrue();
    }

    @Test
    void underWriteThroughABlockOverTheRateWaitsLeasedAndGoesWhenTheBucketRefills() throws IOException {
        // 12 KiB per second, one block of burst: the first block passes, the next two wait for tokens.
        open(PublishFixture.config(new SsdAdmissionPolicy.WriteThrough())
                .withWriteBudget(BLOCK, BLOCK, 1L << 20), 8);
        for (int i = 1; i <= 3; i++) f.publishAndSeal(key(i));
        assertThat(f.count("orbitkv.publish.ssd.admitted", null, null)).isEqualTo(1.0);
        assertThat(f.count("orbitkv.publish.ssd.skipped", "reason", "over_rate")).as("write-through waits").isZero();
        assertThat(f.pipeline.writeThroughQueueDepth()).isEqualTo(2);
        assertThat(f.registry.get("orbitkv.publish.ssd.writethrough.queue.depth").gauge().value()).isEqualTo(2.0);
        assertThat(f.dram.contains(key(2))).isTrue();
        // One second later the bucket holds one block again: the oldest waiting block goes.
        f.clock.addAndGet(1_000_000_000L);
        assertThat(f.pipeline.admitWriteThrough()).isEqualTo(1);
        await().atMost(WAIT).until(() -> f.ssd.contains(key(2)));
        assertThat(f.ssd.contains(key(3))).isFalse();
        assertThat(f.pipeline.writeThroughQueueDepth()).isEqualTo(1);
        // A clean stop writes what still waits, ignoring the rate.
        f.pipeline.close();
        await().atMost(WAIT).until(() -> f.ssd.contains(key(3)));
        await().atMost(WAIT).until(() -> f.dram.usage().leases() == 0);
    }

    @Test
    void underWriteThroughAFullWriteQueueHoldsTheNextBlockUntilThereIsRoom() throws IOException {
        open(PublishFixture.config(new SsdAdmissionPolicy.WriteThrough())
                .withWriteBudget(Long.MAX_VALUE, 1L << 30, BLOCK), 8);
        CompletableFuture<Void> hold = holdDispatcher();
        f.publishAndSeal(key(1));
        f.publishAndSeal(key(2));
        assertThat(f.count("orbitkv.publish.ssd.skipped", "reason", "queue_full")).isZero();
        assertThat(f.pipeline.writeQueuedBytes()).isEqualTo(BLOCK);
        assertThat(f.pipeline.writeThroughQueueDepth()).isEqualTo(1);
        hold.complete(null);
        // The first write's end admits the second (no sealer thread runs here).
        await().atMost(WAIT).until(() -> f.ssd.contains(key(1)) && f.ssd.contains(key(2)));
        await().atMost(WAIT).until(() -> f.pipeline.writeQueuedBytes() == 0 && f.dram.usage().leases() == 0);
    }

    @Test
    void underWriteThroughABlockEvictedBeforeItsWriteIsStillWrittenFromItsLeasedSlot() throws IOException {
        open(PublishFixture.config(new SsdAdmissionPolicy.WriteThrough()), 8);
        CompletableFuture<Void> hold = holdDispatcher();
        f.publishAndSeal(key(1));
        assertThat(f.dispatcher.depth(false)).isEqualTo(1);
        assertThat(f.dram.evict(key(1))).isTrue();
        assertThat(f.dram.usage().evictedLeasedBytes()).as("the write's lease parks the slot").isPositive();
        hold.complete(null);
        await().atMost(WAIT).until(() -> f.ssd.contains(key(1)));
        assertThat(hasCanary(f.readFromSsd(key(1)).orElseThrow(), key(1))).isTrue();
        assertThat(f.count("orbitkv.publish.ssd.dropped", "reason", "source_gone")).isZero();
        await().atMost(WAIT).until(() -> f.dram.usage().leases() == 0 && f.dram.usage().evictedLeasedBytes() == 0);
        assertThat(f.pipeline.writeQueuedBytes()).isZero();
    }

    @Test
    void underWriteThroughAFullLaneDropsNothingTheNextBlockWaits() throws IOException {
        open(PublishFixture.config(new SsdAdmissionPolicy.WriteThrough()).withLanes(4, 2, 4), 8);
        CompletableFuture<Void> hold = holdDispatcher();
        for (int i = 1; i <= 3; i++) f.publishAndSeal(key(i));
        assertThat(f.count("orbitkv.publish.ssd.dropped", "reason", "lane_full")).isZero();
        assertThat(f.dispatcher.depth(false)).isEqualTo(2);
        assertThat(f.pipeline.writeThroughQueueDepth()).isEqualTo(1);
        hold.complete(null);
        await().atMost(WAIT).until(() -> f.ssd.contains(key(1)) && f.ssd.contains(key(2)) && f.ssd.contains(key(3)));
        await().atMost(WAIT).until(() -> f.pipeline.writeQueuedBytes() == 0);
    }

    @Test
    void underOnEvictHandOversWaitForLaneRoomInsteadOfDisplacingEachOther() throws IOException {
        // Lane of 1 write: the first hand-over is admitted, the next two wait in the hand-over queue
        // (their DRAM slots parked) where the lane used to drop the oldest as lane_full.
        f = new PublishFixture(dir, PublishFixture.config(new SsdAdmissionPolicy.OnEvict()).withLanes(4, 1, 4), 8, 3);
        CompletableFuture<Void> hold = holdDispatcher();
        for (int i = 1; i <= 3; i++) f.publishAndSeal(key(i));
        for (int i = 1; i <= 3; i++) assertThat(f.dram.evict(key(i))).isTrue();
        assertThat(f.pipeline.admitEvicted()).isEqualTo(1);
        assertThat(f.pipeline.admitEvicted()).as("the lane is full: the others wait").isZero();
        assertThat(f.registry.get("orbitkv.publish.ssd.handover.queue.bytes").gauge().value()).isEqualTo(2.0 * BLOCK);
        assertThat(f.dram.usage().evictedLeasedBytes()).isEqualTo(3L * 16 * 1024);
        hold.complete(null);
        // No sealing thread runs here: admit as the sealer would, each time a write ends.
        await().atMost(WAIT).until(() -> {
            f.pipeline.admitEvicted();
            return f.ssd.contains(key(1)) && f.ssd.contains(key(2)) && f.ssd.contains(key(3));
        });
        for (int i = 1; i <= 3; i++) assertThat(hasCanary(f.readFromSsd(key(i)).orElseThrow(), key(i))).isTrue();
        assertThat(f.count("orbitkv.publish.ssd.dropped", "reason", "lane_full")).isZero();
        assertThat(f.registry.get("orbitkv.publish.ssd.handover.queue.bytes").gauge().value()).isZero();
        await().atMost(WAIT).until(() -> f.dram.usage().evictedLeasedBytes() == 0 && f.pipeline.writeQueuedBytes() == 0);
    }

    @Test
    void underWriteThroughTheSealerStopsWhileTheWriteThroughQueueIsFull() throws IOException {
        // Lane 1: one admitted write, one waiting entry; the third block stays in the seal queue.
        open(PublishFixture.config(new SsdAdmissionPolicy.WriteThrough()).withLanes(4, 1, 4), 8);
        CompletableFuture<Void> hold = holdDispatcher();
        f.publishAndSeal(key(1));
        f.publishAndSeal(key(2));
        assertThat(f.pipeline.publish(key(3), NS, PageSource.weak(page(key(3), BLOCK), BLOCK)))
                .isInstanceOf(PublishResult.Queued.class);
        assertThat(f.pipeline.sealQueued(16)).as("no write room: not sealed").isZero();
        assertThat(f.pipeline.sealQueueDepth()).isEqualTo(1);
        hold.complete(null);
        await().atMost(WAIT).until(() -> f.ssd.contains(key(1)) && f.ssd.contains(key(2)));
        await().atMost(WAIT).until(() -> f.pipeline.writeThroughQueueDepth() == 0);
    }

    /** Occupies the dispatcher's only submission slot until the returned future completes. */
    private CompletableFuture<Void> holdDispatcher() {
        CompletableFuture<Void> hold = new CompletableFuture<>();
        f.dispatcher.submitRead(new IoOp() {
            @Override
            public CompletableFuture<?> start() {
                return hold;
            }

            @Override
            public void drop(DropReason reason) {
            }
        });
        return hold;
    }
}
