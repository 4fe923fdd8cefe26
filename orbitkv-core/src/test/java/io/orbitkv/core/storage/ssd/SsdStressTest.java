package io.orbitkv.core.storage.ssd;

import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.testkit.StressTest;
import io.orbitkv.testkit.TestSeed;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

import static io.orbitkv.core.storage.ssd.SsdTestSupport.NS;
import static io.orbitkv.core.storage.ssd.SsdTestSupport.key;
import static io.orbitkv.core.storage.ssd.SsdTestSupport.payload;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * Writers and readers race on a small ring that wraps many times. Every served byte must be the
 * key's payload; at the end pins balance, bytes are accounted and the residency stream agrees
 * with the index. The seed is {@link TestSeed}'s, named in any failure; fix it with {@code -Dorbitkv.seed=N}.
 */
@StressTest
class SsdStressTest {

    private static final int KEYS = 48;
    private static final int WRITERS = 3;
    private static final int READERS = 3;
    private static final int WRITES_PER_WRITER = 120;

    @TempDir
    Path dir;

    private static int lengthOf(int k) {
        return 1_000 + (k * 1_337) % 30_000;
    }

    @Test
    void concurrentWritesAndPinnedReadsNeverServeWrongBytes() throws Exception {
        long seed = TestSeed.get();
        System.out.println("SsdStressTest " + TestSeed.describe());
        SsdConfig config = SsdTestSupport.smallConfig(dir, 2, 512).withIo(3, 32);
        MemorySegment[] payloads = new MemorySegment[KEYS];
        for (int k = 0; k < KEYS; k++) payloads[k] = payload(k, lengthOf(k));

        try (SsdTestSupport s = SsdTestSupport.openRecovered(config)) {
            ExecutorService pool = Executors.newFixedThreadPool(WRITERS + READERS);
            CountDownLatch writersDone = new CountDownLatch(WRITERS);
            AtomicInteger committed = new AtomicInteger();
            AtomicLong served = new AtomicLong();
            AtomicInteger wrongBytes = new AtomicInteger();
            List<Future<?>> futures = new ArrayList<>();
            for (int w = 0; w < WRITERS; w++) {
                SplittableRandom rnd = new SplittableRandom(seed + w);
                futures.add(pool.submit(() -> {
                    try {
                        for (int i = 0; i < WRITES_PER_WRITER; i++) {
                            int k = rnd.nextInt(KEYS);
                            WriteResult r = s.store.write(NS, key(k), payloads[k], lengthOf(k)).join();
                            assertThat(r).isInstanceOfAny(WriteResult.Committed.class, WriteResult.Busy.class);
                            if (r instanceof WriteResult.Committed) committed.incrementAndGet();
                        }
                    } finally {
                        writersDone.countDown();
                    }
                    return null;
                }));
            }
            for (int r = 0; r < READERS; r++) {
                SplittableRandom rnd = new SplittableRandom(seed + 100 + r);
                futures.add(pool.submit(() -> {
                    MemorySegment dst = SsdTestSupport.SHARED.allocate(64 * 1024, 4096);
                    byte[] heap = new byte[64 * 1024];
                    while (writersDone.getCount() > 0) {
                        int k = rnd.nextInt(KEYS);
                        if (!(s.store.pin(key(k), SsdTestSupport.NS) instanceof Pin pin)) continue;
                        try {
                            MemorySegment target = rnd.nextBoolean() ? dst : MemorySegment.ofArray(heap);
                            ReadResult res = s.store.read(pin, target).join();
                            assertThat(res).isInstanceOfAny(ReadResult.Served.class, ReadResult.Busy.class);
                            if (res instanceof ReadResult.Served) {
                                served.incrementAndGet();
                                if (target.asSlice(0, lengthOf(k)).mismatch(payloads[k].asSlice(0, lengthOf(k))) != -1) {
                                    wrongBytes.incrementAndGet();
                                }
                            }
                        } finally {
                            s.store.unpin(pin);
                        }
                    }
                    return null;
                }));
            }
            for (Future<?> f : futures) f.get(60, TimeUnit.SECONDS);
            pool.shutdown();

            assertThat(wrongBytes).as("reads that served wrong bytes (seed %d)", seed).hasValue(0);
            assertThat(committed.get()).isGreaterThan(WRITERS * WRITES_PER_WRITER / 2);
            assertThat(served.get()).isPositive();
            assertThat(s.counter("orbitkv.ssd.corrupt.dropped")).isZero();
            assertThat(s.store.ring().placedExtents()).allSatisfy(e -> assertThat(e.pins()).isIn(0, Extent.RETIRED));
            List<Extent> indexed = s.store.indexedExtents();
            assertThat(indexed).allSatisfy(e -> assertThat(e.pins()).isZero());
            assertThat(s.store.usedBytes()).isEqualTo(indexed.stream().mapToLong(Extent::footprintBytes).sum())
                    .isLessThanOrEqualTo(config.capacityBytes());
            assertThat(s.events(ResidencyEvent.Kind.ADDED).size() - s.events(ResidencyEvent.Kind.REMOVED).size())
                    .isEqualTo(indexed.size());
            for (Extent e : indexed) {
                assertThat(s.readAndCheck(indexOf(e), lengthOf(indexOf(e)))).isInstanceOf(ReadResult.Served.class);
            }
        }
        // and everything the index held survives a restart
        try (SsdTestSupport s = SsdTestSupport.open(config)) {
            RecoveryReport r = s.store.recover();
            assertThat(r.droppedTotal()).isZero();
            for (int k = 0; k < KEYS; k++) {
                ReadResult res = s.readAndCheck(k, lengthOf(k));
                if (res != null) assertThat(res).isInstanceOf(ReadResult.Served.class);
            }
        }
    }

    private static int indexOf(Extent e) {
        for (int k = 0; k < KEYS; k++) if (key(k).equals(e.key)) return k;
        throw new AssertionError("unknown key " + e.key);
    }
}
