package io.orbitkv.bench.serve;

import io.orbitkv.bench.BenchManager;
import io.orbitkv.engine.OrbitKvPageStore;
import io.orbitkv.engine.PublishStats;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.StateKeys;
import io.orbitkv.state.unix.FileTrees;
import io.orbitkv.testkit.ManagerProcess;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Locale;

/**
 * The engine's request-path time of one {@link OrbitKvPageStore#publish} of {@code pages} pages
 * of 128 KiB (the serving benchmark's page), synchronous against background, on one real Manager
 * process: what the serving benchmark's "after first token" column holds of the publish, without
 * the decode steps and the pool's queueing around it.
 *
 * <pre>
 *   java --enable-native-access=ALL-UNNAMED -cp orbitkv-bench-ttft/target/orbitkv-bench-ttft.jar \
 *        io.orbitkv.bench.serve.PublishCost [pages=16] [publishes=150] [rounds=3]
 * </pre>
 *
 * <p>Thread model: the main thread plays the engine. Each publish has fresh keys (every page is
 * sealed, none already present); between two timed publishes the background store's queue is
 * drained ({@code awaitPublished}, not timed), as the gap between two requests would. Rounds
 * alternate the modes on fresh connections; the first round includes JIT warm-up.
 */
public final class PublishCost {

    private static final long PAGE_BYTES = 128 << 10;

    private PublishCost() {
    }

    public static void main(String[] args) throws Exception {
        int pages = args.length > 0 ? Integer.parseInt(args[0]) : 16;
        int publishes = args.length > 1 ? Integer.parseInt(args[1]) : 150;
        int rounds = args.length > 2 ? Integer.parseInt(args[2]) : 3;
        Path dir = Files.createTempDirectory(Path.of(System.getProperty("java.io.tmpdir")), "publish-cost");
        Path shm = Path.of("/dev/shm/orbitkv-publish-cost-" + ProcessHandle.current().pid());
        Namespace ns = new Namespace("publish-cost", "r1", "sha256:w", "sha256:t", "", "bf16", "nhd", 16, 1, 0, 1, 0, 1);
        try (ManagerProcess manager = BenchManager.start(dir, shm, "512m", List.of("--dram-bytes", "512m",
                "--ssd-bytes", "64m", "--set", "dramSlotBytes=128k"));
             Arena arena = Arena.ofConfined()) {
            MemorySegment source = arena.allocate(PAGE_BYTES * pages, 64);
            for (long i = 0; i < source.byteSize(); i += 8) source.set(ValueLayout.JAVA_LONG, i, i);
            int seed = 0;
            for (int round = 0; round < rounds; round++) {
                for (OrbitKvPageStore.PublishMode mode : List.of(OrbitKvPageStore.PublishMode.SYNCHRONOUS,
                        OrbitKvPageStore.PublishMode.background())) {
                    String name = mode instanceof OrbitKvPageStore.PublishMode.Synchronous ? "sync" : "background";
                    try (OrbitKvPageStore store = OrbitKvPageStore.connect(manager.socket(), name + "-" + round, 1, ns, mode)) {
                        long[] nanos = new long[publishes];
                        for (int r = 0; r < publishes; r++) {
                            List<StateKey> keys = keys(ns, ++seed, pages);
                            long t0 = System.nanoTime();
                            store.publish(keys, PAGE_BYTES, (i, slot) -> MemorySegment.copy(source, i * PAGE_BYTES, slot, 0, PAGE_BYTES));
                            nanos[r] = System.nanoTime() - t0;
                            if (!store.awaitPublished(Duration.ofSeconds(30))) throw new IllegalStateException("publish not settled");
                        }
                        Arrays.sort(nanos);
                        PublishStats s = store.publishStats();
                        System.out.printf(Locale.ROOT, "round %d %-10s %d pages: request-path publish p50 %.2f ms, p90 %.2f ms, "
                                        + "p99 %.2f ms; sealed %d, dropped %d%n", round, name, pages, nanos[publishes / 2] / 1e6,
                                nanos[publishes * 9 / 10] / 1e6, nanos[publishes * 99 / 100] / 1e6, s.sealed(), s.dropped());
                    }
                }
            }
        } finally {
            FileTrees.delete(shm);
            FileTrees.delete(dir);
        }
    }

    private static List<StateKey> keys(Namespace ns, int seed, int pages) {
        List<StateKey> out = new ArrayList<>(pages);
        for (int p = 0; p < pages; p++) {
            out.add(StateKeys.forBlockHash(ns.digest(), 0, ByteBuffer.allocate(8).putInt(seed).putInt(p).array()));
        }
        return out;
    }
}
