package io.orbitkv.core.storage;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.cost.CostConfig;
import io.orbitkv.core.cost.CostObserver;
import io.orbitkv.core.namespace.NamespaceTable;
import io.orbitkv.core.storage.dram.DramTierConfig;
import io.orbitkv.core.storage.dram.Lease;
import io.orbitkv.core.storage.dram.SizeClass;
import io.orbitkv.core.storage.publish.PageSource;
import io.orbitkv.core.storage.publish.PublishResult;
import io.orbitkv.core.storage.ssd.ReadPath;
import io.orbitkv.core.storage.ssd.SsdConfig;
import io.orbitkv.state.StateKey;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.EnumSource;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static io.orbitkv.core.storage.TieredStoreTest.BLOCK;
import static io.orbitkv.core.storage.TieredStoreTest.DIGEST;
import static io.orbitkv.core.storage.TieredStoreTest.NS;
import static io.orbitkv.core.storage.TieredStoreTest.SLOT;
import static io.orbitkv.core.storage.TieredStoreTest.WAIT;
import static io.orbitkv.core.storage.TieredStoreTest.hasCanary;
import static io.orbitkv.core.storage.TieredStoreTest.key;
import static io.orbitkv.core.storage.TieredStoreTest.page;
import static io.orbitkv.core.storage.TieredStoreTest.writeThrough;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/** Staging through each configured SSD route, observed: SSD reads and sealing copies reach the cost meters. */
class TieredStoreCostTest {

    /** Pages published through weak sources stay reachable until the test ends (sealing is asynchronous). */
    private final java.util.List<java.lang.foreign.MemorySegment> heldPages = new java.util.ArrayList<>();

    private io.orbitkv.core.storage.publish.PageSource held(io.orbitkv.state.StateKey k) {
        java.lang.foreign.MemorySegment p = page(k);
        heldPages.add(p);
        return io.orbitkv.core.storage.publish.PageSource.weak(p, BLOCK);
    }

    @TempDir
    Path dir;

    final SimpleMeterRegistry registry = new SimpleMeterRegistry();
    TieredStore store;

    @AfterEach
    void close() {
        if (store != null) store.close();
    }

    private TieredStore open(ReadPath path, CostObserver observer) throws IOException {
        NamespaceTable namespaces = new NamespaceTable(4);
        namespaces.register(NS, DIGEST);
        DramTierConfig dram = new DramTierConfig(Files.createDirectories(dir.resolve("dram")), "tiered",
                List.of(new SizeClass(SLOT, 16)), 8L * SLOT, 2L * SLOT, 64);
        SsdConfig ssd = SsdConfig.of(Files.createDirectories(dir.resolve("ssd"))).withMaxPayloadBytes(SLOT)
                .withFiles(2, 2L << 20).withIo(1, 64).withPinnedWaitNanos(TimeUnit.MILLISECONDS.toNanos(20))
                .withBuffers(64 * 1024, 64 * 1024).withReadPath(path);
        return TieredStore.open(new TieredStoreConfig(dram, ssd, writeThrough(), 1 << 16, 64), namespaces, registry,
                observer);
    }

    private double count(String name, String path) {
        return registry.find(name).tag("path", path).counters().stream().mapToDouble(c -> c.count()).sum();
    }

    @ParameterizedTest
    @EnumSource(value = ReadPath.class, names = {"POSITIONAL", "URING"})
    void stagingUsesTheConfiguredRouteAndEachExecutionOwnerIsObserved(ReadPath path) throws IOException {
        CostObserver observer = CostObserver.create(CostConfig.defaults(true), registry, System::nanoTime);
        store = open(path, observer);
        assertThat(store.ssd().readPath()).isEqualTo(path);
        for (int i = 0; i < 3; i++) {
            StateKey k = key(i);
            assertThat(store.publish(k, NS, held(k))).isInstanceOf(PublishResult.Queued.class);
            await().atMost(WAIT).until(() -> store.ssd().contains(k));
            assertThat(store.dram().evict(k)).isTrue();
            assertThat(store.stage(k, NS).join()).isInstanceOfSatisfying(StageResult.Staged.class, staged -> {
                try (Lease lease = staged.lease()) {
                    assertThat(hasCanary(lease.segment(), k)).isTrue();
                }
            });
        }
        String executed = path == ReadPath.URING ? "ssd_uring" : "ssd_positional";
        String other = path == ReadPath.URING ? "ssd_positional" : "ssd_uring";
        assertThat(registry.get("orbitkv.cost.operations").tag("path", executed).tag("terminal", "succeeded").counter()
                .count()).isEqualTo(3);
        assertThat(registry.get("orbitkv.cost.operations").tag("path", other).tag("terminal", "succeeded").counter()
                .count()).isZero();
        assertThat(count("orbitkv.cost.logical.bytes", executed)).isEqualTo(3.0 * BLOCK);
        assertThat(count("orbitkv.cost.io.bytes", executed)).isEqualTo(3.0 * (4096 + 20 * 1024));
        assertThat(registry.get("orbitkv.cost.operations").tag("path", "dram_copy").tag("terminal", "succeeded")
                .counter().count()).isEqualTo(3);
        assertThat(count("orbitkv.cost.logical.bytes", "dram_copy")).isEqualTo(3.0 * BLOCK);
        assertThat(registry.get("orbitkv.cost.stage").tag("path", executed).tag("stage", "total").timer().count())
                .isEqualTo(3);
        // every SSD read was compared with the other route, which never ran: unknown
        assertThat(observer.status().shadow().get(io.orbitkv.core.cost.ShadowOutcome.UNKNOWN)).isEqualTo(3L);
    }
}
