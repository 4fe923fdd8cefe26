package io.orbitkv.core.storage.dram;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.state.StateKey;
import io.orbitkv.testkit.StressTest;
import io.orbitkv.testkit.TestSeed;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import static io.orbitkv.core.storage.dram.TestImages.hasCanary;
import static io.orbitkv.core.storage.dram.TestImages.key;
import static io.orbitkv.core.storage.dram.TestImages.writeCanary;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Many threads publish, lease, evict and release on one small tier under constant eviction
 * pressure, bounded by operation count. Every image carries its key's canary; a lease verifies
 * it when taken and again just before release, so a slot reused while leased is caught. At the
 * end every lease is released and every byte is accounted for, and each key's residency events
 * alternate ADDED/REMOVED and end in the state the index shows.
 *
 * <p>Seed: {@link TestSeed}, printed and named in any failure; rerun with {@code -Dorbitkv.seed=<seed>}.
 */
@StressTest
class DramTierStressTest {

    private static final int THREADS = 6;
    private static final int OPS_PER_THREAD = 25_000;
    private static final int KEYS = 400;
    /** Three in four operations go to these first keys, so leases often pin images that get evicted. */
    private static final int HOT_KEYS = 48;
    private static final int MAX_HELD_PER_THREAD = 3;
    private static final int K4 = 4096;
    private static final int K16 = 16 * 1024;

    @TempDir
    Path dir;

    private final AtomicLong canaryFailures = new AtomicLong();
    private final AtomicLong leasesTaken = new AtomicLong();
    private final AtomicLong commits = new AtomicLong();
    private final AtomicLong fulls = new AtomicLong();

    @ParameterizedTest
    @EnumSource(DramEviction.class)
    void concurrentPublishLeaseEvictReleaseKeepsBytesAndLeasesBalanced(DramEviction eviction) throws Exception {
        long seed = TestSeed.get();
        System.out.println("DramTierStressTest " + TestSeed.describe() + " eviction=" + eviction);
        // Each operation commits at most one image, and each removal follows its own insert.
        ResidencyStream stream = new ResidencyStream(2 * THREADS * OPS_PER_THREAD);
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        DramTierConfig config = new DramTierConfig(dir, "stress",
                List.of(new SizeClass(K4, 64), new SizeClass(K16, 32)), 128 * 1024, 256 * 1024, 64, eviction);

        try (DramTier tier = DramTier.open(config, stream, registry);
             ExecutorService pool = Executors.newFixedThreadPool(THREADS)) {
            CountDownLatch start = new CountDownLatch(1);
            List<Future<?>> workers = new ArrayList<>();
            for (int t = 0; t < THREADS; t++) {
                long threadSeed = seed + t;
                workers.add(pool.submit(() -> {
                    start.await();
                    work(tier, new SplittableRandom(threadSeed));
                    return null;
                }));
            }
            start.countDown();
            for (Future<?> w : workers) {
                w.get(120, TimeUnit.SECONDS);
            }

            assertThat(canaryFailures.get()).as("leases that read another key's bytes").isZero();
            DramUsage u = tier.usage();
            assertThat(u.leases()).isZero();
            assertThat(u.leasedBytes()).isZero();
            assertThat(u.evictedLeasedBytes()).isZero();
            assertThat(u.reservedBytes()).isZero();
            assertThat(u.freeBytes() + u.usedBytes()).isEqualTo(u.capacityBytes());
            assertThat(u.usedBytes()).isLessThanOrEqualTo(config.indexWeightBytes());

            // The run exercised what it claims to: hits, inserts and pressure evictions all happened.
            for (ReserveResult.FullReason reason : ReserveResult.FullReason.values()) {
                System.out.printf("DramTierStressTest: full %s = %.0f%n", reason, registry.get("orbitkv.dram.reservations.failed")
                        .tag("reason", reason.name().toLowerCase(java.util.Locale.ROOT)).counter().count());
            }
            assertThat(leasesTaken.get()).isGreaterThan(10_000);
            assertThat(commits.get()).isGreaterThan(1000);
            assertThat(registry.get("orbitkv.dram.evictions").tag("cause", "policy").functionCounter().count()
                    + registry.get("orbitkv.dram.evictions").tag("cause", "class_pressure").functionCounter().count())
                    .isGreaterThan(100);

            residencyEventsAgreeWithTheIndex(tier, stream);

            for (int k = 0; k < KEYS; k++) {
                tier.evict(key(k));
            }
            assertThat(tier.usage().freeBytes()).isEqualTo(u.capacityBytes());
            System.out.printf("DramTierStressTest: %d commits, %d leases, %d full, %d residency events%n",
                    commits.get(), leasesTaken.get(), fulls.get(), stream.lastSequence());
        }
    }

    private void work(DramTier tier, SplittableRandom random) {
        ArrayDeque<Lease> held = new ArrayDeque<>();
        for (int op = 0; op < OPS_PER_THREAD; op++) {
            StateKey k = key(random.nextInt(4) == 0 ? random.nextInt(KEYS) : random.nextInt(HOT_KEYS));
            int dice = random.nextInt(100);
            if (dice < 35) {
                publish(tier, k, 1 + random.nextInt(K16), random.nextInt(10) == 0);
            } else if (dice < 80) {
                if (tier.acquire(k, 1) instanceof Lease lease) {
                    leasesTaken.incrementAndGet();
                    check(lease);
                    held.addLast(lease);
                    if (held.size() > MAX_HELD_PER_THREAD) releaseChecked(held.removeFirst());
                }
            } else if (dice < 90) {
                if (!held.isEmpty()) releaseChecked(held.removeFirst());
            } else {
                tier.evict(k);
            }
        }
        while (!held.isEmpty()) {
            releaseChecked(held.removeFirst());
        }
    }

    private void publish(DramTier tier, StateKey k, int lengthBytes, boolean abandon) {
        switch (tier.reserve(k, 1, lengthBytes)) {
            case Reservation r -> {
                writeCanary(r.segment(), k);
                if (abandon) {
                    assertThat(tier.abort(r)).isTrue();
                } else {
                    CommitResult c = tier.commit(r);
                    assertThat(c).isNotInstanceOf(CommitResult.NotOpen.class);
                    if (c instanceof CommitResult.Inserted) commits.incrementAndGet();
                }
            }
            case ReserveResult.AlreadyResident ignored -> {
            }
            case ReserveResult.Full ignored -> fulls.incrementAndGet();
        }
    }

    private void check(Lease lease) {
        if (!hasCanary(lease.segment(), lease.key())) canaryFailures.incrementAndGet();
    }

    private void releaseChecked(Lease lease) {
        check(lease);
        assertThat(lease.release()).isEqualTo(ReleaseResult.RELEASED);
        assertThat(lease.release()).isEqualTo(ReleaseResult.ALREADY_RELEASED);
    }

    private static void residencyEventsAgreeWithTheIndex(DramTier tier, ResidencyStream stream) {
        ResidencyStream.Batch all = stream.readFrom(1, Integer.MAX_VALUE);
        assertThat(all.gap()).isFalse();
        Map<StateKey, ResidencyEvent> last = new HashMap<>();
        for (ResidencyEvent e : all.events()) {
            ResidencyEvent previous = last.put(e.key(), e);
            switch (e.kind()) {
                case ADDED -> assertThat(previous == null || previous.kind() == ResidencyEvent.Kind.REMOVED)
                        .as("ADDED after ADDED: %s", e).isTrue();
                case REMOVED -> {
                    assertThat(previous).as("REMOVED before any ADDED: %s", e).isNotNull();
                    assertThat(previous.kind()).isEqualTo(ResidencyEvent.Kind.ADDED);
                    assertThat(previous.generation()).isEqualTo(e.generation());
                }
            }
        }
        long resident = 0;
        for (int k = 0; k < KEYS; k++) {
            ResidencyEvent e = last.get(key(k));
            boolean added = e != null && e.kind() == ResidencyEvent.Kind.ADDED;
            assertThat(tier.contains(key(k))).as("key %d resident per stream: %s", k, added).isEqualTo(added);
            if (added) resident++;
        }
        assertThat(tier.usage().residentImages()).isEqualTo(resident);
    }
}
