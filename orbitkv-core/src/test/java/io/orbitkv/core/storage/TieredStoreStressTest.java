package io.orbitkv.core.storage;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.namespace.NamespaceTable;
import io.orbitkv.core.storage.dram.DramTierConfig;
import io.orbitkv.core.storage.dram.Lease;
import io.orbitkv.core.storage.dram.SizeClass;
import io.orbitkv.core.storage.publish.PageSource;
import io.orbitkv.core.storage.publish.PublishConfig;
import io.orbitkv.core.storage.publish.SsdAdmissionPolicy;
import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.core.storage.ssd.SsdConfig;
import io.orbitkv.state.StateKey;
import io.orbitkv.testkit.StressTest;
import io.orbitkv.testkit.TestSeed;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import static io.orbitkv.core.storage.TieredStoreTest.BLOCK;
import static io.orbitkv.core.storage.TieredStoreTest.DIGEST;
import static io.orbitkv.core.storage.TieredStoreTest.NS;
import static io.orbitkv.core.storage.TieredStoreTest.SLOT;
import static io.orbitkv.core.storage.TieredStoreTest.hasCanary;
import static io.orbitkv.core.storage.TieredStoreTest.key;
import static io.orbitkv.core.storage.TieredStoreTest.page;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/**
 * Publishers, stagers, lookers-up and an evictor on one store at once, on a DRAM tier small
 * enough that eviction and class pressure never stop and an SSD ring small enough to wrap.
 * Checks while running: every lease shows exactly its key's bytes (a reused slot would not).
 * Checks at the end: every lease and pin released, no reservation or evicted-but-leased slot
 * left, nothing queued or in flight, and each key's residency events alternate per medium and
 * end in the state the tiers report. Seed: {@link TestSeed} ({@code -Dorbitkv.seed=N}).
 */
@StressTest
class TieredStoreStressTest {

    private static final int KEYS = 48;
    private static final long RUN_NANOS = TimeUnit.MILLISECONDS.toNanos(1200);

    @TempDir
    Path dir;

    @Test
    void writeThroughUnderConcurrentPublishStageAndEvict() throws Exception {
        run(new SsdAdmissionPolicy.WriteThrough());
    }

    @Test
    void onEvictUnderConcurrentPublishStageAndEvict() throws Exception {
        run(new SsdAdmissionPolicy.OnEvict());
    }

    private void run(SsdAdmissionPolicy policy) throws Exception {
        long seed = TestSeed.get();
        System.out.println("TieredStoreStressTest " + policy + " " + TestSeed.describe());
        NamespaceTable namespaces = new NamespaceTable(2);
        namespaces.register(NS, DIGEST);
        String name = policy.getClass().getSimpleName();
        DramTierConfig dram = new DramTierConfig(Files.createDirectories(dir.resolve("dram-" + name)), "stress" + name,
                List.of(new SizeClass(SLOT, 16)), 4L * SLOT, 4L * SLOT, 64);
        SsdConfig ssd = SsdConfig.of(Files.createDirectories(dir.resolve("ssd-" + name))).withMaxPayloadBytes(SLOT)
                .withFiles(2, 512 * 1024).withIo(2, 64).withPinnedWaitNanos(TimeUnit.MILLISECONDS.toNanos(5))
                .withBuffers(64 * 1024, 64 * 1024);
        PublishConfig publish = PublishConfig.defaults(policy).withLanes(8, 8, 4);
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        ConcurrentLinkedQueue<String> failures = new ConcurrentLinkedQueue<>();
        AtomicLong staged = new AtomicLong();
        TieredStore store = TieredStore.open(new TieredStoreConfig(dram, ssd, publish, 1 << 18, 16), namespaces,
                registry);
        try {
            List<Thread> threads = new ArrayList<>();
            CountDownLatch go = new CountDownLatch(1);
            for (int t = 0; t < 5; t++) {
                int role = t;
                SplittableRandom random = new SplittableRandom(seed + t);
                threads.add(Thread.ofPlatform().name("stress-" + t).start(() -> {
                    try {
                        go.await();
                        long deadline = System.nanoTime() + RUN_NANOS;
                        while (System.nanoTime() < deadline) {
                            StateKey k = key(random.nextInt(KEYS));
                            switch (role) {
                                case 0, 1 -> store.publish(k, NS, PageSource.weak(page(k), BLOCK));
                                case 2, 3 -> stageAndCheck(store, k, failures, staged);
                                default -> {
                                    if (random.nextBoolean()) store.dram().evict(k);
                                    else lookupAndCheck(store, k, failures);
                                }
                            }
                        }
                    } catch (Throwable e) {
                        failures.add(Thread.currentThread().getName() + ": " + e);
                    }
                }));
            }
            go.countDown();
            for (Thread t : threads) t.join(TimeUnit.SECONDS.toMillis(60));
            assertThat(failures).isEmpty();
            await().atMost(Duration.ofSeconds(20)).until(() -> store.pipeline().sealQueueDepth() == 0
                    && store.dispatcher().inFlight() == 0 && store.dispatcher().depth(true) == 0
                    && store.dispatcher().depth(false) == 0 && store.inflightStagings() == 0
                    && store.pipeline().writeQueuedBytes() == 0);
            var usage = store.dram().usage();
            assertThat(usage.leases()).as("leases balanced").isZero();
            assertThat(usage.reservedBytes()).as("no reservation left open").isZero();
            assertThat(usage.evictedLeasedBytes()).as("no retained eviction left").isZero();
            assertThat(store.ssd().readerPins()).as("pins balanced").isZero();
            assertThat(staged.get()).as("some stagings succeeded").isPositive();
            checkResidency(store);
            System.out.println("TieredStoreStressTest " + policy + ": staged " + staged.get()
                    + ", sealed " + sum(registry, "orbitkv.publish.seal.sealed")
                    + ", seal busy " + sum(registry, "orbitkv.publish.seal.busy")
                    + ", admitted " + sum(registry, "orbitkv.publish.ssd.admitted")
                    + ", skipped " + sum(registry, "orbitkv.publish.ssd.skipped")
                    + ", write drops " + sum(registry, "orbitkv.publish.ssd.dropped")
                    + ", ssd writes " + sum(registry, "orbitkv.ssd.writes")
                    + ", ssd reads " + sum(registry, "orbitkv.ssd.reads")
                    + ", shared reads " + registry.get("orbitkv.tiered.stage").tag("result", "shared_read").counter().count()
                    + ", dram evictions " + sum(registry, "orbitkv.dram.evictions"));
        } finally {
            store.close();
        }
    }

    private static double sum(SimpleMeterRegistry registry, String name) {
        return registry.find(name).counters().stream().mapToDouble(c -> c.count()).sum()
                + registry.find(name).functionCounters().stream().mapToDouble(c -> c.count()).sum();
    }

    private static void stageAndCheck(TieredStore store, StateKey k, ConcurrentLinkedQueue<String> failures,
                                      AtomicLong staged) {
        CompletableFuture<StageResult> f = store.stage(k, NS);
        StageResult r = f.join();
        if (r instanceof StageResult.Staged(Lease lease, StageResult.Source ignored)) {
            staged.incrementAndGet();
            if (!lease.key().equals(k) || !hasCanary(lease.segment(), k)) failures.add("wrong bytes for " + k);
            Thread.onSpinWait();
            if (!hasCanary(lease.segment(), k)) failures.add("slot reused while leased: " + k);
            lease.release();
        }
    }

    private static void lookupAndCheck(TieredStore store, StateKey k, ConcurrentLinkedQueue<String> failures) {
        switch (store.lookup(k, NS, DIGEST)) {
            case LookupResult.InDram(Lease lease) -> {
                if (!hasCanary(lease.segment(), k)) failures.add("lookup: wrong bytes for " + k);
                lease.release();
            }
            case LookupResult.OnSsd(var pin) -> pin.close();
            case LookupResult.Miss ignored -> { }
        }
    }

    /** Per key and medium, events alternate ADDED/REMOVED and the last one matches the tier now. */
    private static void checkResidency(TieredStore store) {
        ResidencyStream.Batch all = store.residency().readFrom(1, Integer.MAX_VALUE);
        assertThat(all.gap()).isFalse();
        Map<StateKey, Map<ResidencyEvent.Medium, ResidencyEvent.Kind>> last = new HashMap<>();
        for (ResidencyEvent e : all.events()) {
            var perMedium = last.computeIfAbsent(e.key(), k -> new HashMap<>());
            ResidencyEvent.Kind previous = perMedium.put(e.medium(), e.kind());
            if (e.medium() == ResidencyEvent.Medium.DRAM) {
                assertThat(previous).as("DRAM events alternate for %s", e.key()).isNotEqualTo(e.kind());
            }
        }
        for (int i = 0; i < KEYS; i++) {
            StateKey k = key(i);
            var perMedium = last.getOrDefault(k, Map.of());
            assertThat(perMedium.get(ResidencyEvent.Medium.DRAM) == ResidencyEvent.Kind.ADDED)
                    .as("DRAM residency of key %d", i).isEqualTo(store.dram().contains(k));
            assertThat(perMedium.get(ResidencyEvent.Medium.SSD) == ResidencyEvent.Kind.ADDED)
                    .as("SSD residency of key %d", i).isEqualTo(store.ssd().contains(k));
        }
    }

}
