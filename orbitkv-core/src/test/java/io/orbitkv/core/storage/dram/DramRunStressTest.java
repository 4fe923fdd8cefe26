package io.orbitkv.core.storage.dram;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.state.StateKey;
import io.orbitkv.testkit.StressTest;
import io.orbitkv.testkit.TestSeed;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import static io.orbitkv.core.storage.dram.TestImages.hasCanary;
import static io.orbitkv.core.storage.dram.TestImages.key;
import static io.orbitkv.core.storage.dram.TestImages.writeCanary;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * {@link DramTier#acquireRun} (a run of pins under one slot-table lock trip) against concurrent
 * eviction and republishing of the same keys, with {@link DramTier#releaseAll} ending each run.
 * Rounds are bounded by count; the seed ({@link TestSeed}) is in every failure message.
 */
@StressTest
class DramRunStressTest {

    private static final int K4 = 4096;
    private static final int NAMESPACE = 7;

    @TempDir
    Path dir;

    private DramTier tier;

    @AfterEach
    void closeTier() {
        if (tier != null) tier.close();
    }

    private DramTier open(int slots) throws IOException {
        tier = DramTier.open(new DramTierConfig(dir, "run", List.of(new SizeClass(K4, slots)), 2L * K4,
                (long) slots / 2 * K4, 64),
                new ResidencyStream(4096), new SimpleMeterRegistry());
        return tier;
    }

    private static boolean publish(DramTier t, StateKey key, int namespaceId) {
        if (!(t.reserve(key, namespaceId, K4) instanceof Reservation r)) return false;
        writeCanary(r.segment(), key);
        return t.commit(r) instanceof CommitResult.Inserted;
    }

    /**
     * Runs of pins race evictions and republishing of the same keys: every lease a run returns
     * must be on its key's image (its canary) and keep it until released, whatever is evicted or
     * published meanwhile; at the end every lease is released and the byte accounting balances.
     */
    @Test
    void runsRacingEvictionNeverLeaseAReusedSlot() throws Exception {
        long seed = TestSeed.get();
        int keysInPlay = 96;
        open(80); // fewer slots than keys: republishing evicts under class pressure too
        for (int i = 0; i < 64; i++) publish(tier, key(i), NAMESPACE);
        int readers = 2;
        int rounds = 400;
        AtomicBoolean stop = new AtomicBoolean();
        CyclicBarrier start = new CyclicBarrier(readers + 1);
        try (ExecutorService pool = Executors.newFixedThreadPool(readers + 1)) {
            Future<Integer> churn = pool.submit(() -> {
                SplittableRandom random = new SplittableRandom(seed);
                start.await(30, TimeUnit.SECONDS);
                int ops = 0;
                while (!stop.get()) {
                    StateKey k = key(random.nextInt(keysInPlay));
                    if (random.nextBoolean()) tier.evict(k);
                    else publish(tier, k, NAMESPACE);
                    ops++;
                }
                return ops;
            });
            List<Future<String>> checks = new ArrayList<>();
            for (int r = 0; r < readers; r++) {
                int reader = r;
                checks.add(pool.submit(() -> {
                    SplittableRandom random = new SplittableRandom(seed + 1 + reader);
                    start.await(30, TimeUnit.SECONDS);
                    for (int round = 0; round < rounds; round++) {
                        int from = random.nextInt(keysInPlay - 1);
                        int to = from + 1 + random.nextInt(keysInPlay - from);
                        StateKey[] keys = new StateKey[to];
                        Lease[] leases = new Lease[to];
                        int end = tier.acquireRun(TestImages::key, from, to, NAMESPACE, keys, leases);
                        for (int i = from; i < end; i++) {
                            if (!leases[i].key().equals(key(i)) || !hasCanary(leases[i].segment(), key(i))) {
                                return "round " + round + ": lease of page " + i + " is not on its image";
                            }
                        }
                        if (end < to && leases[end] != null) return "round " + round + ": a lease past the stop";
                        Thread.yield(); // let evictions and republishing hit the leased slots
                        for (int i = from; i < end; i++) {
                            if (!hasCanary(leases[i].segment(), key(i))) {
                                return "round " + round + ": leased page " + i + " was overwritten (slot reused)";
                            }
                        }
                        if (tier.releaseAll(leases, to) != end - from) return "round " + round + ": release count";
                    }
                    return "";
                }));
            }
            List<String> failures = new ArrayList<>();
            for (Future<String> c : checks) failures.add(c.get(60, TimeUnit.SECONDS));
            stop.set(true);
            assertThat(churn.get(30, TimeUnit.SECONDS)).as("churn ran").isPositive();
            assertThat(failures).as("seed %d", seed).allMatch(String::isEmpty);
        }
        DramUsage usage = tier.usage();
        assertThat(usage.leases()).as("seed %d: every lease released", seed).isZero();
        assertThat(usage.evictedLeasedBytes()).as("seed %d", seed).isZero();
        assertThat(usage.freeBytes() + usage.reservedBytes() + usage.usedBytes() + usage.evictedLeasedBytes())
                .as("seed %d: bytes balance", seed).isEqualTo(usage.capacityBytes());
    }
}
