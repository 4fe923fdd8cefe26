package io.orbitkv.core.engine;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.cost.CostObserver;
import io.orbitkv.core.namespace.NamespaceTable;
import io.orbitkv.core.query.RemotePages;
import io.orbitkv.core.storage.TieredStore;
import io.orbitkv.core.storage.TieredStoreConfig;
import io.orbitkv.core.storage.dram.DramEviction;
import io.orbitkv.core.storage.dram.DramTierConfig;
import io.orbitkv.core.storage.dram.SizeClass;
import io.orbitkv.core.storage.publish.PublishConfig;
import io.orbitkv.core.storage.publish.SsdAdmissionPolicy;
import io.orbitkv.core.transfer.RegionDirectory;
import io.orbitkv.core.storage.ssd.SsdConfig;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.protocol.ProtocolLimits;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.FileSystems;
import java.nio.file.attribute.UserPrincipal;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import static org.assertj.core.api.Assertions.assertThat;

/** A real TieredStore (DRAM arenas and SSD files in a temp dir) under a ManagerCore. */
final class ManagerFixture implements AutoCloseable {

    static final int PAGE_TOKENS = 16;
    static final int SLOT = 32 * 1024;
    static final int PAGE_BYTES = 20 * 1024;
    static final RecoveryContract FULL = new RecoveryContract(PAGE_TOKENS, List.of(new StateGroup.Full(0)));

    final Path dir;
    final RemotePages remote;
    final int dramSlots;
    final ProtocolLimits limits;
    final ManagerBounds config;
    final CostObserver cost;
    /** The DRAM tier's policy: W-TinyLFU (the tier config's own default) unless a test names one. */
    final DramEviction eviction;
    SimpleMeterRegistry registry;
    NamespaceTable namespaces;
    TieredStore store;
    ManagerCore core;
    /** Added to System.nanoTime() by the core's clock: tests move time forward with {@link #advance}. */
    final AtomicLong skewNanos = new AtomicLong();

    ManagerFixture(Path dir, int dramSlots, ProtocolLimits limits, ManagerBounds config) throws IOException {
        this(dir, dramSlots, limits, config, RemotePages.NONE, CostObserver.disabled());
    }

    /** {@code remote}: the peer routes of the core's planner. */
    ManagerFixture(Path dir, int dramSlots, ProtocolLimits limits, ManagerBounds config, RemotePages remote) throws IOException {
        this(dir, dramSlots, limits, config, remote, CostObserver.disabled());
    }

    /** {@code cost}: the observer the tiers and the restore copies report to. */
    ManagerFixture(Path dir, int dramSlots, ProtocolLimits limits, ManagerBounds config, RemotePages remote,
                   CostObserver cost) throws IOException {
        this.remote = remote;
        this.cost = cost;
        this.eviction = DramEviction.W_TINY_LFU;
        this.dir = dir;
        this.dramSlots = dramSlots;
        this.limits = limits;
        this.config = config;
        start();
    }

    /** A fixture of default limits and bounds whose DRAM tier evicts with {@code eviction}. */
    ManagerFixture(Path dir, int dramSlots, DramEviction eviction) throws IOException {
        this.remote = RemotePages.NONE;
        this.cost = CostObserver.disabled();
        this.dir = dir;
        this.dramSlots = dramSlots;
        this.limits = ProtocolLimits.DEFAULTS;
        this.config = ManagerBounds.DEFAULTS;
        this.eviction = eviction;
        start();
    }

    static ManagerFixture open(Path dir) throws IOException {
        return new ManagerFixture(dir, 64, ProtocolLimits.DEFAULTS, ManagerBounds.DEFAULTS);
    }

    static Namespace namespace(String model) {
        return new Namespace(model, "r1", "w", "t", "", "bf16", "nhd", PAGE_TOKENS, 1, 0, 1, 0, 1);
    }

    /** Opens the tiers (SSD files kept across restarts) and a new core. */
    void start() throws IOException {
        registry = new SimpleMeterRegistry();
        namespaces = new NamespaceTable(1024);
        DramTierConfig dram = new DramTierConfig(Files.createDirectories(dir.resolve("dram")), "mgr",
                List.of(new SizeClass(SLOT, dramSlots)), 16L * SLOT, 4L * SLOT, 64).withEviction(eviction);
        SsdConfig ssd = SsdConfig.of(Files.createDirectories(dir.resolve("ssd"))).withMaxPayloadBytes(SLOT)
                .withFiles(2, 4L << 20).withIo(1, 64).withPinnedWaitNanos(TimeUnit.MILLISECONDS.toNanos(20))
                .withBuffers(64 * 1024, 64 * 1024);
        store = TieredStore.open(new TieredStoreConfig(dram, ssd,
                PublishConfig.defaults(new SsdAdmissionPolicy.WriteThrough()), 1 << 16, 64), namespaces, registry, cost);
        // Regions are files directly in the test's directory; the tiers' own directories are excluded.
        RegionDirectory regions = RegionDirectory.of(dir, List.of(dir.resolve("dram"), dir.resolve("ssd")));
        core = new ManagerCore(store, namespaces, limits, config, registry, this::now, regions, remote);
    }

    /** This process's user: what {@code SO_PEERCRED} reports for a client of the same uid. */
    static UserPrincipal self() {
        try {
            return FileSystems.getDefault().getUserPrincipalLookupService()
                    .lookupPrincipalByName(System.getProperty("user.name"));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    long now() {
        return System.nanoTime() + skewNanos.get();
    }

    /** Moves the core's clock forward by {@code nanos} and runs its tick at the new time. */
    void advance(long nanos) {
        skewNanos.addAndGet(nanos);
        core.onTick(now());
    }

    /** A Manager restart: the core and both tiers close; the SSD files stay. */
    void restart() throws IOException {
        stop();
        start();
    }

    void stop() {
        core.close();
        store.close();
    }

    Client connect() {
        return new Client(this);
    }

    Client register(String instance, long epoch, Namespace ns, RecoveryContract contract) {
        Client c = connect();
        c.registerOk(instance, epoch, ns, contract);
        return c;
    }

    /** Waits until pages {@code pages} of group 0 of {@code prompt} in {@code ns} are on SSD (write-through). */
    void awaitOnSsd(Namespace ns, long prompt, long... pages) {
        for (long p : pages) {
            StateKey key = Client.key(ns, prompt, 0, p);
            org.awaitility.Awaitility.await().atMost(RecordingSink.WAIT).until(() -> store.ssd().contains(key));
        }
    }

    /**
     * Occupies the SSD dispatcher's one I/O slot (the fixture's store has one I/O thread) until the
     * returned future completes: SSD reads and writes queue behind it.
     */
    java.util.concurrent.CompletableFuture<Void> holdSsdIo() {
        java.util.concurrent.CompletableFuture<Void> hold = new java.util.concurrent.CompletableFuture<>();
        store.dispatcher().submitRead(new io.orbitkv.core.storage.publish.IoOp() {
            @Override
            public java.util.concurrent.CompletableFuture<?> start() {
                return hold;
            }

            @Override
            public void drop(DropReason reason) {
            }
        });
        return hold;
    }

    /** Submits one copier task that holds a copy thread until {@code gate} opens. */
    void occupyCopyThread(java.util.concurrent.CountDownLatch gate) {
        assertThat(core.copier().trySubmit(List.of(() -> {
            try {
                gate.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }))).isTrue();
    }

    /** Publishes {@code c}'s pages of {@code prompt} (group 0), waits until they are on SSD, then evicts them from DRAM. */
    void onSsdOnly(Client c, Namespace ns, long prompt, long... pages) {
        c.publish(prompt, 0, pages);
        for (long p : pages) {
            StateKey key = Client.key(ns, prompt, 0, p);
            org.awaitility.Awaitility.await().atMost(RecordingSink.WAIT).until(() -> store.ssd().contains(key));
            org.awaitility.Awaitility.await().atMost(RecordingSink.WAIT)
                    .until(() -> store.dram().evict(key) || !store.dram().contains(key));
        }
    }

    /**
     * Everything of every session is back once the publish quarantine's grace has passed: no lease,
     * no staging byte, no reservation, no DRAM pin.
     */
    void assertNothingHeld() {
        org.awaitility.Awaitility.await().atMost(RecordingSink.WAIT).untilAsserted(() -> {
            core.onTick(now() + config.publishQuarantineNanos());
            ManagerStatus s = core.status();
            assertThat(s.leases()).as("lease table").isZero();
            assertThat(s.stagingBytes()).as("staging bytes").isZero();
            assertThat(s.reservations()).as("reservations").isZero();
            assertThat(s.operations()).as("operations").isZero();
            assertThat(s.dram().leases()).as("DRAM leases").isZero();
            assertThat(s.dram().reservedBytes()).as("DRAM reserved bytes").isZero();
            assertThat(store.inflightStagings()).isZero();
            assertThat(core.speculation().inFlight().used()).as("speculation bytes in flight").isZero();
            assertThat(core.speculation().held().used()).as("speculation bytes held").isZero();
            assertThat(core.speculation().prepares()).as("prepares").isZero();
        });
    }

    @Override
    public void close() {
        stop();
    }
}
