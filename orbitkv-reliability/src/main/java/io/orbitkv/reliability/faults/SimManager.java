package io.orbitkv.reliability.faults;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.cost.CostObserver;
import io.orbitkv.core.engine.ManagerBounds;
import io.orbitkv.core.engine.ManagerCore;
import io.orbitkv.core.engine.ManagerStatus;
import io.orbitkv.core.namespace.NamespaceTable;
import io.orbitkv.core.query.RemotePages;
import io.orbitkv.core.storage.TieredStore;
import io.orbitkv.core.transfer.RegionDirectory;
import io.orbitkv.core.storage.TieredStoreConfig;
import io.orbitkv.core.storage.dram.DramTierConfig;
import io.orbitkv.core.storage.dram.SizeClass;
import io.orbitkv.core.storage.publish.PublishConfig;
import io.orbitkv.core.storage.publish.SsdAdmissionPolicy;
import io.orbitkv.core.storage.ssd.ReadPath;
import io.orbitkv.core.storage.ssd.SsdConfig;
import io.orbitkv.state.protocol.ProtocolLimits;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;
import java.util.function.LongSupplier;

/**
 * The real Manager core over real tiers in one directory (DRAM arena files and SSD extent files),
 * with the SSD device decorated by a {@link FaultyDevice}; {@link #restart} closes both and opens
 * them again over the same SSD files, as a Manager restart does.
 *
 * <p>Small on purpose, so that a schedule reaches eviction, SSD staging and the ring's wrap in a
 * few steps: 48 DRAM slots of 32 KiB (16 of them reservable at once), an SSD ring of 2 × 1 MiB
 * (42 extents of a 20 KiB page), one SSD worker (the order of device calls is the schedule's) and
 * positional reads (the io_uring route does not pass through the device seam).
 *
 * <p>A Manager of a cluster gets its peer routes from a {@link Wiring} each time it starts (the
 * requester's reader over the campaign's transport, or the source's ticket table), as the daemon
 * gets them from its cluster membership; a {@code null} plan opens the SSD device undecorated
 * (the peer's device runs clean, so the requester's device calls alone draw from the plan).
 *
 * <p>Thread model: the schedule's driver thread calls everything; the core's and the store's own
 * threads run as in the daemon. The clock is {@code System.nanoTime()} plus a skew the driver
 * moves forward to let the publish quarantine and the peer ticket windows expire; the Managers of
 * one schedule share it.
 */
final class SimManager implements AutoCloseable {

    /** How a clustered Manager's peer routes are made and unmade with each life. */
    interface Wiring {
        /** The peer routes of a life that opened {@code store}; called before its core is built. */
        RemotePages open(TieredStore store, NamespaceTable namespaces, LongSupplier clock);

        /** That life's core closed: stop serving and drop what the routes hold (called before the store closes). */
        void close();

        Wiring NONE = new Wiring() {
            @Override
            public RemotePages open(TieredStore store, NamespaceTable namespaces, LongSupplier clock) {
                return RemotePages.NONE;
            }

            @Override
            public void close() {
            }
        };
    }

    static final int PAGE_TOKENS = 16;
    static final int SLOT = 32 * 1024;
    static final int PAGE_BYTES = 20 * 1024;
    static final int DRAM_SLOTS = 48;

    private final Path dir;
    private final FaultPlan plan;
    private final AtomicLong skewNanos;
    private final Wiring wiring;
    // Restores of 1-2 pages are copied inline (on the connection's thread), larger ones by the copy
    // thread, so a RESTORE_DEATH still finds copies in flight in most schedules.
    final ManagerBounds bounds = ManagerBounds.DEFAULTS.withRestore(1, 64)
            .withRestoreInlineBytes(2L * PAGE_BYTES)
            .withFenceDrainTimeoutNanos(TimeUnit.SECONDS.toNanos(5));
    SimpleMeterRegistry registry;
    NamespaceTable namespaces;
    TieredStore store;
    ManagerCore core;

    SimManager(Path dir, FaultPlan plan) throws IOException {
        this(dir, plan, new AtomicLong(), Wiring.NONE);
    }

    /** {@code skewNanos}: the schedule's clock skew, shared by its Managers. */
    SimManager(Path dir, FaultPlan plan, AtomicLong skewNanos, Wiring wiring) throws IOException {
        this.dir = dir;
        this.plan = plan;
        this.skewNanos = skewNanos;
        this.wiring = wiring;
        start();
    }

    void start() throws IOException {
        registry = new SimpleMeterRegistry();
        namespaces = new NamespaceTable(64);
        DramTierConfig dram = new DramTierConfig(Files.createDirectories(dir.resolve("dram")), "sim",
                List.of(new SizeClass(SLOT, DRAM_SLOTS)), 16L * SLOT, 8L * SLOT, 64);
        SsdConfig ssd = SsdConfig.of(Files.createDirectories(dir.resolve("ssd"))).withMaxPayloadBytes(SLOT)
                .withFiles(2, 1L << 20).withIo(1, 64).withPinnedWaitNanos(TimeUnit.MILLISECONDS.toNanos(5))
                .withBuffers(64 * 1024, 64 * 1024).withReadPath(ReadPath.POSITIONAL).withBufferedFallback(true);
        PublishConfig publish = PublishConfig.defaults(new SsdAdmissionPolicy.WriteThrough())
                .withLanes(64, 8, 4);
        store = TieredStore.open(new TieredStoreConfig(dram, ssd, publish, 1 << 14, 16), namespaces, registry,
                CostObserver.disabled(), device -> plan == null ? device : new FaultyDevice(device, plan));
        // the simulated engines' region files live in the schedule's directory, next to the tiers
        RegionDirectory regions = RegionDirectory.of(dir, List.of(dir.resolve("dram"), dir.resolve("ssd")));
        RemotePages remote = wiring.open(store, namespaces, this::now);
        core = new ManagerCore(store, namespaces, ProtocolLimits.DEFAULTS, bounds, registry, this::now, regions, remote);
    }

    long now() {
        return System.nanoTime() + skewNanos.get();
    }

    void restart() throws IOException {
        stop();
        start();
    }

    void stop() {
        core.close();
        wiring.close();
        store.close();
    }

    /** Moves the shared clock forward by {@code nanos}. */
    void advance(long nanos) {
        skewNanos.addAndGet(nanos);
    }


    /**
     * Waits until the store has nothing queued or in flight (seal queue, write-through queue,
     * dispatcher lanes, stagings), so that the next step's device calls come in a fixed order.
     */
    boolean awaitIdle(long timeoutNanos) {
        long deadline = System.nanoTime() + timeoutNanos;
        while (!idle()) {
            if (System.nanoTime() > deadline) return false;
            LockSupport.parkNanos(20_000);
        }
        return true;
    }

    boolean idle() {
        return store.pipeline().sealQueueDepth() == 0 && store.pipeline().writeThroughQueueDepth() == 0
                && store.pipeline().writeQueuedBytes() == 0 && store.dispatcher().inFlight() == 0
                && store.dispatcher().depth(true) == 0 && store.dispatcher().depth(false) == 0
                && store.inflightStagings() == 0 && store.queuedStagings() == 0;
    }

    /**
     * What is still held once every client is gone and the quarantine has passed; empty at
     * quiescence. Every count the core and the tiers expose for what a client can hold or start.
     */
    List<String> leftovers() {
        advance(bounds.publishQuarantineNanos() + TimeUnit.SECONDS.toNanos(1));
        core.onTick(now());
        ManagerStatus s = core.status();
        List<String> held = new ArrayList<>();
        nonZero(held, "leases", s.leases());
        nonZero(held, "operations", s.operations());
        nonZero(held, "reservations", s.reservations());
        nonZero(held, "regions", s.regions());
        nonZero(held, "staging bytes", s.stagingBytes());
        nonZero(held, "restore tasks", s.restoreTasks());
        nonZero(held, "sessions", s.sessions());
        nonZero(held, "DRAM leases", s.dram().leases());
        nonZero(held, "DRAM reserved bytes", s.dram().reservedBytes());
        nonZero(held, "DRAM evicted-leased bytes", s.dram().evictedLeasedBytes());
        nonZero(held, "quarantined bytes", core.quarantinedBytes());
        nonZero(held, "stagings in flight", store.inflightStagings());
        nonZero(held, "stagings queued", store.queuedStagings());
        nonZero(held, "SSD reader pins", store.ssd().readerPins());
        nonZero(held, "SSD operations in flight", store.dispatcher().inFlight());
        nonZero(held, "write-through queue", store.pipeline().writeThroughQueueDepth());
        nonZero(held, "SSD write bytes queued", store.pipeline().writeQueuedBytes());
        return held;
    }

    static void nonZero(List<String> held, String what, long value) {
        if (value != 0) held.add(what + "=" + value);
    }

    @Override
    public void close() {
        stop();
    }
}
