package io.orbitkv.core.storage;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.namespace.NamespaceTable;
import io.orbitkv.core.storage.dram.DramTierConfig;
import io.orbitkv.core.storage.dram.Lease;
import io.orbitkv.core.storage.dram.SizeClass;
import io.orbitkv.core.storage.publish.IoOp;
import io.orbitkv.core.storage.publish.PageSource;
import io.orbitkv.core.storage.publish.PublishConfig;
import io.orbitkv.core.storage.publish.PublishResult;
import io.orbitkv.core.storage.publish.SsdAdmissionPolicy;
import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.core.storage.ssd.SsdConfig;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

class TieredStoreTest {

    static final int NS = 3;
    static final NamespaceDigest DIGEST = new NamespaceDigest(0xabcdL, 4, 5, 6);
    static final int OTHER_NS = 2;
    static final NamespaceDigest OTHER_DIGEST = new NamespaceDigest(0xdcbaL, 6, 5, 4);
    static final int BLOCK = 20 * 1024; // not a 4 KiB multiple
    static final int SLOT = 32 * 1024;
    static final Duration WAIT = Duration.ofSeconds(10);

    @TempDir
    Path dir;

    final SimpleMeterRegistry registry = new SimpleMeterRegistry();
    TieredStore store;

    @AfterEach
    void close() {
        if (store != null) store.close();
    }

    TieredStore open(PublishConfig publish, int dramSlots) throws IOException {
        return open(publish, dramSlots, 64, TieredStoreConfig.DEFAULT_QUEUED_STAGES);
    }

    TieredStore open(PublishConfig publish, int dramSlots, int maxInflightStages, int maxQueuedStages) throws IOException {
        NamespaceTable namespaces = new NamespaceTable(4);
        namespaces.register(NS, DIGEST);
        namespaces.register(OTHER_NS, OTHER_DIGEST);
        DramTierConfig dram = new DramTierConfig(Files.createDirectories(dir.resolve("dram")), "tiered",
                List.of(new SizeClass(SLOT, dramSlots)), 8L * SLOT, 2L * SLOT, 64);
        SsdConfig ssd = SsdConfig.of(Files.createDirectories(dir.resolve("ssd"))).withMaxPayloadBytes(SLOT)
                .withFiles(2, 2L << 20).withIo(1, 64).withPinnedWaitNanos(TimeUnit.MILLISECONDS.toNanos(20))
                .withBuffers(64 * 1024, 64 * 1024);
        store = TieredStore.open(new TieredStoreConfig(dram, ssd, publish, 1 << 16, maxInflightStages, maxQueuedStages),
                namespaces, registry);
        return store;
    }

    static PublishConfig writeThrough() {
        return PublishConfig.defaults(new SsdAdmissionPolicy.WriteThrough());
    }

    static StateKey key(long i) {
        ByteBuffer b = ByteBuffer.allocate(StateKey.BYTES);
        for (int w = 0; w < 4; w++) b.putLong(mix(i * 4 + w + 0x51));
        return StateKey.ofBytes(b.array());
    }

    static long mix(long z) {
        z = (z ^ (z >>> 30)) * 0xBF58476D1CE4E5B9L;
        z = (z ^ (z >>> 27)) * 0x94D049BB133111EBL;
        return z ^ (z >>> 31);
    }

    static MemorySegment page(StateKey key) {
        // Its own automatic arena: once a weak source's page is collected, its memory is freed too.
        MemorySegment s = Arena.ofAuto().allocate(BLOCK, 4096);
        for (long o = 0; o < BLOCK; o++) s.set(ValueLayout.JAVA_BYTE, o, (byte) mix(key.prefix64() + o));
        return s;
    }

    static boolean hasCanary(MemorySegment s, StateKey key) {
        if (s.byteSize() != BLOCK) return false;
        for (long o = 0; o < BLOCK; o++) {
            if (s.get(ValueLayout.JAVA_BYTE, o) != (byte) mix(key.prefix64() + o)) return false;
        }
        return true;
    }

    /**
     * A weak source over {@code key}'s canary page whose page this test keeps strongly reachable
     * until it ends: publishing is asynchronous (the sealer thread), and a page collected before
     * its turn is dropped by design (see PublishPipelineTest's weak-source tests).
     */
    PageSource held(StateKey key) {
        MemorySegment p = page(key);
        heldPages.add(p);
        return PageSource.weak(p, BLOCK);
    }

    private final List<MemorySegment> heldPages = new ArrayList<>();

    /** Publishes {@code key}, waits until it is on SSD, then evicts it from DRAM. */
    void putOnSsdOnly(StateKey key) {
        assertThat(store.publish(key, NS, held(key))).isInstanceOf(PublishResult.Queued.class);
        await().atMost(WAIT).until(() -> store.ssd().contains(key));
        assertThat(store.dram().evict(key)).isTrue();
    }

    /**
     * A burst of sealed blocks with write-through, DRAM smaller than the burst and a write lane of
     * 4, then a clean stop: every block that was sealed is on SSD with its bytes after the stop
     * (a block DRAM refused is not sealed, and counted as {@code dram_full}).
     * Before write-through leased its images and waited for lane room, blocks were evicted before
     * their write ({@code source_gone}) and displaced from the full lane ({@code lane_full}).
     */
    @Test
    void everyBlockSealedUnderWriteThroughIsOnSsdAfterACleanStop() throws IOException {
        int blocks = 120; // 120 x 24 KiB extents fit the 4 MiB ring: none is overwritten
        open(writeThrough().withLanes(16, 4, 8), 16);
        io.micrometer.core.instrument.Counter inserted =
                registry.get("orbitkv.publish.seal.sealed").tag("result", "inserted").counter();
        io.micrometer.core.instrument.Counter laneFull =
                registry.get("orbitkv.publish.ssd.dropped").tag("reason", "lane_full").counter();
        io.micrometer.core.instrument.Counter sourceGone =
                registry.get("orbitkv.publish.ssd.dropped").tag("reason", "source_gone").counter();
        Set<StateKey> published = new java.util.HashSet<>();
        for (int i = 0; i < blocks; i++) {
            StateKey k = key(1000 + i);
            PageSource source = held(k);
            // A full seal queue is the push-back: the producer retries (at its own cadence) until queued.
            await().atMost(WAIT).pollInterval(Duration.ofMillis(1))
                    .until(() -> store.publish(k, NS, source) instanceof PublishResult.Queued);
            published.add(k);
        }
        await().atMost(WAIT).until(() -> store.pipeline().sealQueueDepth() == 0);
        io.micrometer.core.instrument.Counter dramFull =
                registry.get("orbitkv.publish.seal.dropped").tag("reason", "dram_full").counter();
        store.close(); // the clean stop
        // A block DRAM could not take (its slots parked by leased evictees) is not sealed, and counted.
        assertThat(inserted.count() + dramFull.count()).as("every block sealed or counted").isEqualTo(blocks);
        assertThat(inserted.count()).as("sealed blocks").isGreaterThan(blocks / 2);
        assertThat(laneFull.count()).as("lane_full").isZero();
        assertThat(sourceGone.count()).as("source_gone").isZero();
        store = null;

        open(writeThrough(), 16);
        assertThat(store.ssd().size()).as("every sealed block is on SSD").isEqualTo((int) inserted.count());
        assertThat(published).containsAll(store.ssd().residentKeys());
        for (StateKey k : store.ssd().residentKeys()) {
            StageResult r = store.stage(k, NS).join();
            assertThat(r).as("staged %s", k).isInstanceOf(StageResult.Staged.class);
            try (Lease lease = ((StageResult.Staged) r).lease()) {
                assertThat(hasCanary(lease.segment(), k)).isTrue();
            }
        }
    }

    @Test
    void pastTheInflightTableANewKeyWaitsInTheBoundedStagingQueueAndOnlyAFullQueueIsBusy() throws IOException {
        open(writeThrough(), 16, 1, 1);
        for (int i = 1; i <= 3; i++) putOnSsdOnly(key(i));
        CompletableFuture<Void> hold = holdDispatcher();
        CompletableFuture<StageResult> first = store.stage(key(1), NS); // takes the one table entry
        CompletableFuture<StageResult> second = store.stage(key(2), NS); // waits in the queue
        assertThat(store.queuedStagings()).isEqualTo(1);
        assertThat(registry.get("orbitkv.tiered.stage.queue.depth").gauge().value()).isEqualTo(1.0);
        assertThat(store.stage(key(3), NS).join()).as("past both bounds")
                .isEqualTo(new StageResult.Busy(StageResult.BusyReason.INFLIGHT_TABLE_FULL));
        assertThat(store.inflightStagings()).isEqualTo(1);
        hold.complete(null);
        for (CompletableFuture<StageResult> f : List.of(first, second)) {
            StageResult r = f.join();
            assertThat(r).isInstanceOf(StageResult.Staged.class);
            ((StageResult.Staged) r).lease().release();
        }
        assertThat(counter("orbitkv.tiered.stage", "result", "ssd_read")).isEqualTo(2);
        assertThat(registry.get("orbitkv.tiered.stage.queued").counter().count()).isEqualTo(1);
        assertThat(store.queuedStagings()).isZero();
        await().atMost(WAIT).until(() -> store.inflightStagings() == 0);
    }

    double counter(String name, String tag, String value) {
        return registry.get(name).tag(tag, value).counter().count();
    }

    double ssdReads() {
        return registry.get("orbitkv.ssd.reads").counter().count();
    }

    /** Occupies the dispatcher's only submission slot (ioThreads = 1) until the future completes. */
    CompletableFuture<Void> holdDispatcher() {
        CompletableFuture<Void> hold = new CompletableFuture<>();
        store.dispatcher().submitRead(new IoOp() {
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

    @Test
    void aPageOfOneNamespaceIsNeitherFoundNorStagedForAnother() throws IOException {
        open(writeThrough(), 16);
        store.publish(key(1), NS, held(key(1)));
        await().atMost(WAIT).until(() -> store.ssd().contains(key(1), DIGEST));
        assertThat(store.lookup(key(1), OTHER_NS, OTHER_DIGEST)).as("in DRAM").isEqualTo(new LookupResult.Miss(key(1)));
        store.dram().evict(key(1), NS);
        assertThat(store.lookup(key(1), OTHER_NS, OTHER_DIGEST)).as("on SSD").isEqualTo(new LookupResult.Miss(key(1)));
        assertThat(store.stage(key(1), OTHER_NS).join())
                .isEqualTo(new StageResult.Miss(key(1), StageResult.MissReason.NOT_FOUND));
        assertThat(store.dram().contains(key(1))).as("nothing was staged for the other namespace").isFalse();
        StageResult own = store.stage(key(1), NS).join();
        assertThat(own).isInstanceOf(StageResult.Staged.class);
        ((StageResult.Staged) own).lease().release();
    }

    @Test
    void lookupFindsDramThenSsdThenNothing() throws IOException {
        open(writeThrough(), 16);
        store.publish(key(1), NS, held(key(1)));
        await().atMost(WAIT).until(() -> store.ssd().contains(key(1)));
        switch (store.lookup(key(1), NS, DIGEST)) {
            case LookupResult.InDram(Lease lease) -> {
                assertThat(hasCanary(lease.segment(), key(1))).isTrue();
                lease.release();
            }
            case LookupResult.OnSsd other -> throw new AssertionError("expected DRAM: " + other);
            case LookupResult.Miss other -> throw new AssertionError("expected DRAM: " + other);
        }
        store.dram().evict(key(1));
        assertThat(store.lookup(key(1), NS, DIGEST)).isInstanceOfSatisfying(LookupResult.OnSsd.class, onSsd -> {
            assertThat(onSsd.pin().payloadBytes()).isEqualTo(BLOCK);
            onSsd.pin().close();
        });
        assertThat(store.lookup(key(2), NS, DIGEST)).isEqualTo(new LookupResult.Miss(key(2)));
    }

    @Test
    void stageReadsFromSsdStraightIntoADramSlotAndLeasesIt() throws IOException {
        open(writeThrough(), 16);
        putOnSsdOnly(key(1));
        StageResult r = store.stage(key(1), NS).join();
        assertThat(r).isInstanceOfSatisfying(StageResult.Staged.class, staged -> {
            assertThat(staged.source()).isEqualTo(StageResult.Source.SSD_READ);
            assertThat(hasCanary(staged.lease().segment(), key(1))).isTrue();
            staged.lease().release();
        });
        assertThat(registry.get("orbitkv.ssd.bounce.copies").counter().count()).as("O_DIRECT into the slot").isZero();
        assertThat(store.dram().contains(key(1))).isTrue();
        // Now it is a DRAM hit, with no further read.
        StageResult again = store.stage(key(1), NS).join();
        assertThat(again).isInstanceOfSatisfying(StageResult.Staged.class, staged -> {
            assertThat(staged.source()).isEqualTo(StageResult.Source.DRAM_HIT);
            staged.lease().release();
        });
        assertThat(ssdReads()).isEqualTo(1.0);
        assertThat(store.stage(key(9), NS).join()).isEqualTo(new StageResult.Miss(key(9), StageResult.MissReason.NOT_FOUND));
        // the staging's anchor lease is released by the finishing thread just after the callers' futures complete
        await().atMost(WAIT).until(() -> store.dram().usage().leases() == 0);
        assertThat(store.dram().usage().reservedBytes()).isZero();
    }

    @Test
    void concurrentStagingsOfOneKeyShareOneBackingRead() throws IOException {
        open(writeThrough(), 16);
        putOnSsdOnly(key(1));
        CompletableFuture<Void> hold = holdDispatcher();
        List<CompletableFuture<StageResult>> stagings = new ArrayList<>();
        for (int i = 0; i < 5; i++) stagings.add(store.stage(key(1), NS));
        assertThat(store.inflightStagings()).isEqualTo(1);
        assertThat(store.dispatcher().depth(true)).isEqualTo(1);
        hold.complete(null);
        List<Lease> leases = new ArrayList<>();
        for (CompletableFuture<StageResult> s : stagings) {
            StageResult r = s.join();
            assertThat(r).isInstanceOf(StageResult.Staged.class);
            leases.add(((StageResult.Staged) r).lease());
        }
        assertThat(ssdReads()).isEqualTo(1.0);
        assertThat(counter("orbitkv.tiered.stage", "result", "ssd_read")).isEqualTo(1.0);
        assertThat(counter("orbitkv.tiered.stage", "result", "shared_read")).isEqualTo(4.0);
        assertThat(Set.copyOf(leases)).hasSize(5);
        // The staging's own anchor lease is released by the finishing thread right after it
        // completes the callers' futures, so it may still be held for a moment here.
        await().atMost(WAIT).until(() -> store.dram().usage().leases() == 5);
        for (Lease l : leases) {
            assertThat(hasCanary(l.segment(), key(1))).isTrue();
            l.release();
        }
        assertThat(store.dram().usage().leases()).isZero();
        assertThat(store.inflightStagings()).isZero();
    }

    @Test
    void aCorruptExtentStagesAsAMissAndIsNeverServed() throws IOException {
        open(writeThrough(), 16);
        putOnSsdOnly(key(1));
        long payloadOffset = corruptPayloadOf(key(1));
        assertThat(payloadOffset).isNotNegative();
        StageResult r = store.stage(key(1), NS).join();
        assertThat(r).isEqualTo(new StageResult.Miss(key(1), StageResult.MissReason.CORRUPT));
        assertThat(store.dram().contains(key(1))).isFalse();
        assertThat(store.ssd().contains(key(1))).as("dropped from the SSD index").isFalse();
        assertThat(store.dram().usage().reservedBytes()).isZero();
        assertThat(registry.get("orbitkv.ssd.corrupt.dropped").tag("damage", "bad_payload_crc").counter().count())
                .isEqualTo(1.0);
        assertThat(store.stage(key(1), NS).join()).isEqualTo(new StageResult.Miss(key(1), StageResult.MissReason.NOT_FOUND));
    }

    /** Flips one byte in the middle of {@code key}'s payload on disk; returns the payload's file offset. */
    long corruptPayloadOf(StateKey key) throws IOException {
        byte[] prefix = new byte[64];
        MemorySegment.copy(page(key), ValueLayout.JAVA_BYTE, 0, prefix, 0, prefix.length);
        try (var files = Files.list(dir.resolve("ssd"))) {
            for (Path file : files.toList()) {
                byte[] all = Files.readAllBytes(file);
                for (int off = 0; off + prefix.length <= all.length; off += 4096) {
                    if (java.util.Arrays.equals(all, off, off + prefix.length, prefix, 0, prefix.length)) {
                        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.WRITE)) {
                            ch.write(ByteBuffer.wrap(new byte[] {(byte) ~all[off + BLOCK / 2]}), off + BLOCK / 2);
                        }
                        return off;
                    }
                }
            }
        }
        return -1;
    }

    @Test
    void readsOvertakeQueuedWritesOnRealFilesWithAtMostKReadsPerWaitingWrite() throws IOException {
        open(writeThrough().withLanes(16, 16, 2), 32);
        List<StateKey> readKeys = new ArrayList<>();
        for (int i = 0; i < 6; i++) {
            readKeys.add(key(100 + i));
            putOnSsdOnly(key(100 + i));
        }
        List<StateKey> writeKeys = List.of(key(200), key(201), key(202));
        CompletableFuture<Void> hold = holdDispatcher();
        for (StateKey k : writeKeys) store.publish(k, NS, held(k));
        await().atMost(WAIT).until(() -> store.dispatcher().depth(false) == 3);
        List<CompletableFuture<StageResult>> stagings = readKeys.stream().map(k -> store.stage(k, NS)).toList();
        assertThat(store.dispatcher().depth(true)).isEqualTo(6);
        long mark = store.residency().lastSequence() + 1;
        hold.complete(null);
        for (CompletableFuture<StageResult> s : stagings) {
            assertThat(s.join()).isInstanceOfSatisfying(StageResult.Staged.class, st -> st.lease().release());
        }
        await().atMost(WAIT).until(() -> writeKeys.stream().allMatch(store.ssd()::contains));
        // One SSD worker: operations complete in the order the dispatcher started them.
        List<String> order = new ArrayList<>();
        for (ResidencyEvent e : store.residency().readFrom(mark, 1000).events()) {
            if (e.kind() != ResidencyEvent.Kind.ADDED) continue;
            if (e.medium() == ResidencyEvent.Medium.DRAM && readKeys.contains(e.key())) order.add("r");
            if (e.medium() == ResidencyEvent.Medium.SSD && writeKeys.contains(e.key())) order.add("w");
        }
        assertThat(order).containsExactly("r", "r", "w", "r", "r", "w", "r", "r", "w");
    }

    @Test
    void closeDrainsQueuedAndInFlightSsdWorkBeforeClosingTheTiers() throws Exception {
        open(writeThrough(), 16);
        putOnSsdOnly(key(1));
        CompletableFuture<Void> hold = holdDispatcher();
        CompletableFuture<StageResult> staging = store.stage(key(1), NS);
        store.publish(key(2), NS, held(key(2)));
        await().atMost(WAIT).until(() -> store.dispatcher().depth(false) == 1);
        double writesBefore = registry.get("orbitkv.ssd.writes").counter().count();
        Thread closer = Thread.ofPlatform().start(store::close);
        await().atMost(WAIT).until(() -> closer.getState() == Thread.State.TIMED_WAITING);
        assertThat(staging).as("close waits for the queued read").isNotDone();
        hold.complete(null);
        closer.join(WAIT.toMillis());
        assertThat(closer.isAlive()).isFalse();
        StageResult r = staging.join();
        assertThat(r).isInstanceOfSatisfying(StageResult.Staged.class, st -> {
            assertThat(st.source()).isEqualTo(StageResult.Source.SSD_READ);
            st.lease().release(); // legal after close
        });
        assertThat(registry.find("orbitkv.ssd.writes").counter().count()).isEqualTo(writesBefore + 1);
        assertThat(store.stage(key(1), NS).join()).isEqualTo(new StageResult.Miss(key(1), StageResult.MissReason.CLOSED));
    }

    @Test
    void bothTiersReportToTheOneResidencyStream() throws IOException {
        open(writeThrough(), 16);
        putOnSsdOnly(key(1));
        List<ResidencyEvent> events = store.residency().readFrom(1, 100).events();
        assertThat(events).extracting(ResidencyEvent::medium, ResidencyEvent::kind)
                .contains(org.assertj.core.groups.Tuple.tuple(ResidencyEvent.Medium.DRAM, ResidencyEvent.Kind.ADDED),
                        org.assertj.core.groups.Tuple.tuple(ResidencyEvent.Medium.SSD, ResidencyEvent.Kind.ADDED),
                        org.assertj.core.groups.Tuple.tuple(ResidencyEvent.Medium.DRAM, ResidencyEvent.Kind.REMOVED));
    }

    @Test
    void zeroCopyCommitRunsSsdAdmission() throws IOException {
        open(writeThrough(), 16);
        var reservation = (io.orbitkv.core.storage.dram.Reservation) store.reserve(key(1), NS, BLOCK);
        MemorySegment.copy(page(key(1)), 0, reservation.segment(), 0, BLOCK);
        assertThat(store.commit(reservation)).isInstanceOf(io.orbitkv.core.storage.dram.CommitResult.Inserted.class);
        await().atMost(WAIT).until(() -> store.ssd().contains(key(1)));
    }

    /**
     * on-evict, zero-copy publishes in batches (reserve all, then commit, as the engine channel
     * does) into a full class: every reservation is granted at once, although the images that
     * class pressure evicts wait in DRAM for their SSD writes. Refused NO_FREE_SLOT before (a
     * reservation parked 8 handed-over images and freed none), which the wire reports NO_SPACE.
     */
    @Test
    void onEvictGrantsEveryReservationOfAFullClass() throws IOException {
        int slots = 64;
        int batch = 16;
        NamespaceTable namespaces = new NamespaceTable(4);
        namespaces.register(NS, DIGEST);
        DramTierConfig dram = new DramTierConfig(Files.createDirectories(dir.resolve("dram")), "tiered",
                List.of(new SizeClass(SLOT, slots)), (long) batch * SLOT, slots / 8 * (long) SLOT, 64);
        SsdConfig ssd = SsdConfig.of(Files.createDirectories(dir.resolve("ssd"))).withMaxPayloadBytes(SLOT)
                .withFiles(2, 2L << 20).withIo(1, 64).withPinnedWaitNanos(TimeUnit.MILLISECONDS.toNanos(20))
                .withBuffers(64 * 1024, 64 * 1024);
        store = TieredStore.open(new TieredStoreConfig(dram, ssd,
                PublishConfig.defaults(new SsdAdmissionPolicy.OnEvict()), 1 << 16, 64), namespaces, registry);
        long next = 1000;
        for (int round = 0; round < 3 * slots / batch; round++) {
            List<io.orbitkv.core.storage.dram.Reservation> granted = new ArrayList<>();
            for (int i = 0; i < batch; i++) {
                StateKey k = key(next++);
                var r = store.reserve(k, NS, BLOCK);
                assertThat(r).as("round %d page %d, %s", round, i, store.dram().usage())
                        .isInstanceOf(io.orbitkv.core.storage.dram.Reservation.class);
                var reservation = (io.orbitkv.core.storage.dram.Reservation) r;
                MemorySegment.copy(page(k), 0, reservation.segment(), 0, BLOCK);
                granted.add(reservation);
            }
            for (var reservation : granted) {
                assertThat(store.commit(reservation))
                        .isInstanceOf(io.orbitkv.core.storage.dram.CommitResult.Inserted.class);
            }
        }
        // The evicted images did go to SSD: on-evict still writes, it only stops refusing.
        await().atMost(WAIT).until(() -> !store.ssd().residentKeys().isEmpty());
    }
}
