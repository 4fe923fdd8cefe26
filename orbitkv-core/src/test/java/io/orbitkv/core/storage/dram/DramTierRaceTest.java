package io.orbitkv.core.storage.dram;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.state.StateKey;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import static io.orbitkv.core.storage.dram.TestImages.hasCanary;
import static io.orbitkv.core.storage.dram.TestImages.key;
import static io.orbitkv.core.storage.dram.TestImages.writeCanary;
import static org.assertj.core.api.Assertions.assertThat;

/** Focused races: many threads on one lease, one key, one image. Rounds are bounded by count. */
class DramTierRaceTest {

    private static final int THREADS = 4;
    private static final int ROUNDS = 300;

    @TempDir
    Path dir;

    private static <T> List<T> race(ExecutorService pool, CyclicBarrier barrier, Callable<T> task) throws Exception {
        List<Future<T>> futures = new ArrayList<>();
        for (int t = 0; t < THREADS; t++) {
            futures.add(pool.submit(() -> {
                barrier.await(30, TimeUnit.SECONDS);
                return task.call();
            }));
        }
        List<T> results = new ArrayList<>();
        for (Future<T> f : futures) {
            results.add(f.get(30, TimeUnit.SECONDS));
        }
        return results;
    }

    @Test
    void concurrentReleasesOfOneLeaseReleaseItOnce() throws Exception {
        DramTierConfig config = DramTierConfig.of(dir, "race1", List.of(new SizeClass(4096, 16)));
        try (DramTier tier = DramTier.open(config, new ResidencyStream(64), new SimpleMeterRegistry());
             ExecutorService pool = Executors.newFixedThreadPool(THREADS)) {
            StateKey k = key(1);
            tier.commit((Reservation) tier.reserve(k, 1, 100));
            Lease keeper = (Lease) tier.acquire(k, 1);
            CyclicBarrier barrier = new CyclicBarrier(THREADS);
            for (int round = 0; round < ROUNDS; round++) {
                Lease shared = (Lease) tier.acquire(k, 1);
                List<ReleaseResult> results = race(pool, barrier, shared::release);
                assertThat(results).filteredOn(r -> r == ReleaseResult.RELEASED).as("round %d", round).hasSize(1);
                assertThat(tier.usage().leases()).as("round %d", round).isEqualTo(1);
            }
            keeper.release();
            assertThat(tier.usage().leases()).isZero();
        }
    }

    @Test
    void concurrentCommitsOfOneKeyInsertExactlyOnce() throws Exception {
        ResidencyStream stream = new ResidencyStream(4 * ROUNDS);
        DramTierConfig config = DramTierConfig.of(dir, "race2", List.of(new SizeClass(4096, 64)));
        try (DramTier tier = DramTier.open(config, stream, new SimpleMeterRegistry());
             ExecutorService pool = Executors.newFixedThreadPool(THREADS)) {
            CyclicBarrier barrier = new CyclicBarrier(THREADS);
            for (int round = 0; round < ROUNDS; round++) {
                StateKey k = key(round);
                List<Reservation> reservations = new ArrayList<>();
                for (int t = 0; t < THREADS; t++) {
                    Reservation r = (Reservation) tier.reserve(k, 1, 1000);
                    writeCanary(r.segment(), k);
                    reservations.add(r);
                }
                List<Reservation> queue = new ArrayList<>(reservations);
                List<CommitResult> results = race(pool, barrier, () -> {
                    Reservation mine;
                    synchronized (queue) {
                        mine = queue.removeLast();
                    }
                    return tier.commit(mine);
                });
                List<CommitResult> inserted = results.stream().filter(c -> c instanceof CommitResult.Inserted).toList();
                assertThat(inserted).as("round %d", round).hasSize(1);
                long winner = ((CommitResult.Inserted) inserted.getFirst()).imageId();
                assertThat(results).filteredOn(c -> c instanceof CommitResult.Duplicate)
                        .containsOnly(new CommitResult.Duplicate(winner)).hasSize(THREADS - 1);
                try (Lease lease = (Lease) tier.acquire(k, 1)) {
                    assertThat(lease.imageId()).isEqualTo(winner);
                    assertThat(hasCanary(lease.segment(), k)).isTrue();
                }
                tier.evict(k);
                assertThat(tier.usage().freeBytes()).isEqualTo(tier.usage().capacityBytes());
            }
            List<ResidencyEvent> events = stream.readFrom(1, Integer.MAX_VALUE).events();
            assertThat(events).hasSize(2 * ROUNDS);
            assertThat(events).filteredOn(e -> e.kind() == ResidencyEvent.Kind.ADDED).hasSize(ROUNDS);
        }
    }

    @Test
    void leasesTakenWhileEvictingNeverPinAFreedSlot() throws Exception {
        DramTierConfig config = DramTierConfig.of(dir, "race3", List.of(new SizeClass(4096, 64)));
        try (DramTier tier = DramTier.open(config, new ResidencyStream(1024), new SimpleMeterRegistry());
             ExecutorService pool = Executors.newFixedThreadPool(THREADS)) {
            CyclicBarrier barrier = new CyclicBarrier(THREADS);
            for (int round = 0; round < ROUNDS; round++) {
                StateKey k = key(round);
                Reservation r = (Reservation) tier.reserve(k, 1, 4096);
                writeCanary(r.segment(), k);
                tier.commit(r);
                // One thread evicts while the others acquire: each acquire either misses or gets a
                // lease on the still-intact image, whose slot must then wait for the release.
                AtomicInteger tickets = new AtomicInteger();
                List<AcquireResult> results = race(pool, barrier, () -> {
                    if (tickets.getAndIncrement() == 0) {
                        tier.evict(k);
                        return new AcquireResult.Miss(k);
                    }
                    return tier.acquire(k, 1);
                });
                for (AcquireResult a : results) {
                    if (a instanceof Lease lease) {
                        assertThat(hasCanary(lease.segment(), k)).isTrue();
                        lease.release();
                    }
                }
                tier.evict(k);
                DramUsage u = tier.usage();
                assertThat(u.leases()).isZero();
                assertThat(u.freeBytes()).as("round %d", round).isEqualTo(u.capacityBytes());
            }
        }
    }
}
