package io.orbitkv.engine;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.state.Namespace;
import io.orbitkv.state.StateKey;
import io.orbitkv.testkit.ManagerProcess;
import io.orbitkv.testkit.ProcessTest;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@link OrbitKvPageStore} in {@link OrbitKvPageStore.PublishMode.Background} against a real
 * Manager process: what is queued and then awaited is a bit-exact hit; a Manager killed under
 * queued batches turns them into counted drops, and the engine sees no exception.
 */
@ProcessTest
class BackgroundPublishStoreTest {

    private static final int PAGE_TOKENS = 16;
    private static final long PAGE_BYTES = 4096;
    private static final Duration WAIT = Duration.ofSeconds(30);
    private static final Namespace NS = new Namespace("background-publish", "r1", "sha256:w", "sha256:t", "", "bf16",
            "nhd", PAGE_TOKENS, 1, 0, 1, 0, 1);

    @TempDir
    Path dir;

    private static List<StateKey> keys(int seed, int pages) {
        return SyntheticKeys.of(NS.digest(), seed, pages);
    }

    /** Page {@code i} of {@code seed}: every long is {@code seed * 1000 + i * 8 + position}, so a shifted or stale page differs. */
    private static void fill(int seed, int i, MemorySegment slot) {
        for (long off = 0; off < slot.byteSize(); off += 8) slot.set(ValueLayout.JAVA_LONG_UNALIGNED, off, seed * 1000L + i * 8 + off);
    }

    private ManagerProcess start() throws Exception {
        return ManagerProcess.over(dir).jvm(ManagerProcess.TEST_JVM)
                .options("--dram-bytes", "16m", "--ssd-bytes", "32m", "--set", "dramSlotBytes=4k").start();
    }

    @Test
    void queuedPagesAwaitedAreABitExactHit() throws Exception {
        int pages = 5;
        try (ManagerProcess m = start();
             OrbitKvPageStore store = OrbitKvPageStore.connect(m.socket(), "engine", 1, NS,
                     OrbitKvPageStore.PublishMode.background())) {
            KvPageStore.PublishReport report = store.publish(keys(7, pages), PAGE_BYTES, (i, slot) -> fill(7, i, slot));
            assertThat(report).isEqualTo(KvPageStore.PublishReport.queued(pages));
            assertThat(store.awaitPublished(WAIT)).isTrue();
            PublishStats stats = store.publishStats();
            assertThat(stats.sealed()).isEqualTo(pages);
            assertThat(stats.dropped()).isZero();
            assertThat(stats.heldBytes()).isZero();

            long prompt = pages * PAGE_TOKENS + 1;
            try (PrefixLookup.Hit hit = (PrefixLookup.Hit) store.lookupPrefix(keys(7, pages), prompt)) {
                assertThat(hit.pages()).isEqualTo(pages);
                try (var arena = java.lang.foreign.Arena.ofConfined()) {
                    for (int i = 0; i < pages; i++) {
                        MemorySegment expected = arena.allocate(PAGE_BYTES);
                        fill(7, i, expected);
                        assertThat(hit.images().get(i).asSlice(0, PAGE_BYTES).mismatch(expected)).isEqualTo(-1L);
                    }
                }
            }
            // published again: the Manager already holds every page
            store.publish(keys(7, pages), PAGE_BYTES, (i, slot) -> fill(7, i, slot));
            assertThat(store.awaitPublished(WAIT)).isTrue();
            assertThat(store.publishStats().alreadyPresent()).isEqualTo(pages);
        }
    }

    @Test
    void aManagerKilledUnderQueuedBatchesMakesCountedDropsAndNoException() throws Exception {
        int batches = 8;
        int pages = 3;
        try (ManagerProcess m = start()) {
            OrbitKvPageStore store = OrbitKvPageStore.connect(m.socket(), "engine", 1, NS,
                    OrbitKvPageStore.PublishMode.background());
            for (int b = 0; b < batches; b++) {
                int seed = b;
                store.publish(keys(seed, pages), PAGE_BYTES, (i, slot) -> fill(seed, i, slot));
            }
            m.kill();
            // offered after the Manager died: certainly dropped by the publisher, not thrown here
            KvPageStore.PublishReport late = store.publish(keys(99, pages), PAGE_BYTES, (i, slot) -> fill(99, i, slot));
            assertThat(late.queued()).isEqualTo(pages);
            assertThat(store.awaitPublished(WAIT)).isTrue();
            PublishStats stats = store.publishStats();
            assertThat(stats.droppedFailed()).isGreaterThanOrEqualTo(pages);
            assertThat(stats.errors()).isPositive();
            assertThat(stats.sealed() + stats.alreadyPresent() + stats.refused() + stats.dropped())
                    .isEqualTo((long) (batches + 1) * pages);
            assertThat(stats.heldBytes()).isZero();
            store.close();
            assertThat(store.publishStats().heldBytes()).isZero();
        }
    }
}
