package io.orbitkv.core.query;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.namespace.NamespaceTable;
import io.orbitkv.core.storage.StageResult;
import io.orbitkv.core.storage.TieredStore;
import io.orbitkv.core.storage.TieredStoreConfig;
import io.orbitkv.core.storage.dram.CommitResult;
import io.orbitkv.core.storage.dram.DramTierConfig;
import io.orbitkv.core.storage.dram.Reservation;
import io.orbitkv.core.storage.dram.SizeClass;
import io.orbitkv.core.storage.publish.PublishConfig;
import io.orbitkv.core.storage.publish.SsdAdmissionPolicy;
import io.orbitkv.core.storage.ssd.SsdConfig;
import io.orbitkv.core.transfer.RestoreCopier;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.StateKeys;
import io.orbitkv.state.protocol.CompletionEvent;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.Hashes;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Map;
import java.util.Queue;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/**
 * A query layer without a Manager: a real {@link TieredStore} in a temp dir, the two budgets, a
 * copier, and in place of the Manager's threads a clock the test advances by hand, a timer on that
 * clock and a callback queue the test runs on its own thread ({@link #runCallbacks}); a
 * {@link Session} and {@link Metrics} that record what the operation told them.
 */
final class QueryKit implements AutoCloseable {

    static final int PAGE_TOKENS = 16;
    static final int SLOT = 32 * 1024;
    static final int PAGE_BYTES = 20 * 1024;
    static final RecoveryContract FULL = new RecoveryContract(PAGE_TOKENS, List.of(new StateGroup.Full(0)));
    static final QueryServices.Bounds BOUNDS = new QueryServices.Bounds(16L << 20, 64, 4, TimeUnit.SECONDS.toNanos(5));

    final NamespaceTable namespaces = new NamespaceTable(16);
    final TieredStore store;
    final Budget leases = new Budget("lease table", "leases", 1 << 16);
    final Budget stagingBytes = new Budget("staging budget", "bytes", 1L << 30);
    final RestoreCopier copier = new RestoreCopier(2, 64);
    final Clock clock = new Clock();
    final Session session = new Session();
    final Metrics metrics = new Metrics();
    /** The speculation budget and held table of PREPARE (small budgets: a few pages). */
    Speculation speculation = new Speculation(SpeculationBounds.DEFAULTS, clock::now);

    QueryKit(Path dir) throws IOException {
        DramTierConfig dram = new DramTierConfig(Files.createDirectories(dir.resolve("dram")), "query",
                List.of(new SizeClass(SLOT, 64)), 16L * SLOT, 4L * SLOT, 64);
        SsdConfig ssd = SsdConfig.of(Files.createDirectories(dir.resolve("ssd"))).withMaxPayloadBytes(SLOT)
                .withFiles(2, 4L << 20).withIo(1, 64).withPinnedWaitNanos(TimeUnit.MILLISECONDS.toNanos(20))
                .withBuffers(64 * 1024, 64 * 1024);
        store = TieredStore.open(new TieredStoreConfig(dram, ssd,
                PublishConfig.defaults(new SsdAdmissionPolicy.WriteThrough()), 1 << 16, 64), namespaces,
                new SimpleMeterRegistry());
    }

    static Namespace namespace(String model) {
        return new Namespace(model, "r1", "w", "t", "", "bf16", "nhd", PAGE_TOKENS, 1, 0, 1, 0, 1);
    }

    /** The scope of a session of {@code ns} under DRAM id {@code id} (registered here, with its arenas). */
    SessionScope scope(Namespace ns, int id, RecoveryContract contract) {
        assertThat(namespaces.register(id, NamespaceDigest.ofBytes(ns.digest())))
                .isIn(NamespaceTable.Registration.REGISTERED, NamespaceTable.Registration.ALREADY_REGISTERED);
        assertThat(store.arenasFor(id)).isPresent();
        return new SessionScope(ns, id, contract);
    }

    QueryServices services(RemotePages remote, QueryServices.Bounds bounds) {
        return new QueryServices(store, new QueryPlanner(store, remote), leases, stagingBytes, copier, callbacks::add,
                clock::schedule, clock::now, bounds, metrics, speculation);
    }

    // ---- pages --------------------------------------------------------------------------------

    static byte[] hash(long prompt, int group, long page) {
        return ByteBuffer.allocate(8).order(ByteOrder.LITTLE_ENDIAN).putLong(prompt * 1_000_003L + group * 65_537L + page)
                .array();
    }

    static StateKey key(Namespace ns, long prompt, int group, long page) {
        return StateKeys.forBlockHash(ns.digest(), group, hash(prompt, group, page));
    }

    static Hashes hashes(long prompt, int group, int pages) {
        List<byte[]> h = new ArrayList<>(pages);
        for (int i = 0; i < pages; i++) h.add(hash(prompt, group, i));
        return Hashes.of(h);
    }

    /** A HOST_READY block-hash QUERY over {@code pages} pages of {@code groups}, prompt of pages·P + 1 tokens. */
    static Request.Query query(long op, long prompt, int[] groups, int pages, int peerWaitMillis) {
        List<Request.QueryGroup> gs = new ArrayList<>();
        for (int g : groups) gs.add(new Request.QueryGroup(g, KeyForm.BLOCK_HASH, hashes(prompt, g, pages)));
        return new Request.Query(op, 0, CompletionTarget.HOST_READY, (long) pages * PAGE_TOKENS + 1, 0, 0,
                peerWaitMillis, gs);
    }

    static Request.Query queryFull(long op, long prompt, int pages, int peerWaitMillis) {
        return query(op, prompt, new int[] {0}, pages, peerWaitMillis);
    }

    /**
     * Publishes {@code key} into DRAM as {@code scope}'s namespace and waits until its write-through
     * to SSD is done (the pipeline leases the image while it writes), so no DRAM lease is left.
     */
    void publish(SessionScope scope, StateKey key) {
        long leasesBefore = store.dramUsage().leases();
        Reservation res = (Reservation) store.reserve(key, scope.namespaceId(), PAGE_BYTES);
        MemorySegment.copy(image(key), 0, res.segment(), ValueLayout.JAVA_BYTE, 0, PAGE_BYTES);
        assertThat(store.commit(res)).isInstanceOf(CommitResult.Inserted.class);
        soon().until(() -> store.onSsd(key, scope.digest()) && store.dramUsage().leases() <= leasesBefore);
    }

    /** The bytes published for {@code key}: distinct per key. */
    static byte[] image(StateKey key) {
        byte[] b = new byte[PAGE_BYTES];
        long z = key.prefix64();
        for (int i = 0; i < b.length; i++) {
            z = z * 6364136223846793005L + 1442695040888963407L;
            b[i] = (byte) (z >>> 56);
        }
        return b;
    }

    /** A region file of {@code pages} pages of {@code pageBytes} in {@code dir}, opened as its owner would. */
    static io.orbitkv.core.transfer.EngineRegion region(Path dir, int pageBytes, int pages) throws IOException {
        Path file = Files.createDirectories(dir).resolve("region.bin");
        try (java.nio.channels.FileChannel ch = java.nio.channels.FileChannel.open(file,
                java.nio.file.StandardOpenOption.CREATE, java.nio.file.StandardOpenOption.READ,
                java.nio.file.StandardOpenOption.WRITE)) {
            ch.write(ByteBuffer.allocate(1), (long) pages * pageBytes - 1);
        }
        java.nio.file.attribute.UserPrincipal self = java.nio.file.FileSystems.getDefault()
                .getUserPrincipalLookupService().lookupPrincipalByName(System.getProperty("user.name"));
        var opening = io.orbitkv.core.transfer.RegionDirectory.of(dir, List.of())
                .open(file.toString(), (long) pages * pageBytes, pageBytes, pages, java.util.Optional.of(self));
        assertThat(opening).isInstanceOf(io.orbitkv.core.transfer.EngineRegion.Opened.class);
        return ((io.orbitkv.core.transfer.EngineRegion.Opened) opening).region();
    }

    void publish(SessionScope scope, long prompt, int group, long... pages) {
        for (long p : pages) publish(scope, key(scope.namespace(), prompt, group, p));
    }

    /** Publishes the pages, waits until they are on SSD, then evicts them from DRAM. */
    void onSsdOnly(SessionScope scope, long prompt, long... pages) {
        publish(scope, prompt, 0, pages);
        for (long p : pages) {
            StateKey key = key(scope.namespace(), prompt, 0, p);
            soon().until(() -> store.dram().evict(key) || !store.dram().contains(key));
        }
    }

    /** A wait for the store's own threads (SSD writes and reads), polled every millisecond. */
    private static org.awaitility.core.ConditionFactory soon() {
        return await().atMost(Duration.ofSeconds(10)).pollDelay(Duration.ZERO).pollInterval(Duration.ofMillis(1));
    }

    /** The padded bytes a staging of one page takes from the budget. */
    static long stagingBytesOfOnePage() {
        return io.orbitkv.core.storage.ssd.ExtentLayout.paddedPayloadBytes(PAGE_BYTES);
    }

    // ---- threads and time ---------------------------------------------------------------------

    /** Completions and timer tasks the operation handed to its callback executor, run by the test. */
    final Queue<Runnable> callbacks = new ConcurrentLinkedQueue<>();

    /** Runs the queued callbacks on this thread (each takes the session lock); returns how many ran. */
    int runCallbacks() {
        int n = 0;
        for (Runnable r; (r = callbacks.poll()) != null; n++) r.run();
        return n;
    }

    /** Runs callbacks as I/O completes until {@code done} holds (SSD reads land on the store's threads). */
    void runUntil(BooleanSupplier done) {
        soon().pollInSameThread().until(() -> {
            runCallbacks();
            return done.getAsBoolean();
        });
    }

    /** Starts {@code op} under its session's lock, as the session does. */
    Object start(QueryOperation op) {
        synchronized (session.lock()) {
            return op.start();
        }
    }

    QueryOperation.Stopped stop(QueryOperation op, boolean notifyDrained) {
        synchronized (session.lock()) {
            return op.stop(notifyDrained);
        }
    }

    Reply.QueryResult result(QueryOperation op) {
        synchronized (session.lock()) {
            return op.result();
        }
    }

    /** Every lease, lease table entry and staging byte is back, and no DRAM lease is outstanding. */
    void assertNothingHeld() {
        assertThat(leases.used()).as("lease table").isZero();
        assertThat(stagingBytes.used()).as("staging bytes").isZero();
        assertThat(store.dramUsage().leases()).as("DRAM leases").isZero();
    }

    @Override
    public void close() {
        copier.close();
        store.close();
    }

    /**
     * The Manager's clock and timer, by hand: {@link #advance} moves the time and hands every task
     * now due to the callback queue, as the tick thread does, then runs the queue.
     */
    final class Clock {
        private long nowNanos = 1_000_000_000L;
        private final List<Timed> timers = new ArrayList<>();

        private record Timed(long dueNanos, Runnable task, boolean[] cancelled) {
        }

        synchronized long now() {
            return nowNanos;
        }

        synchronized Runnable schedule(Runnable task, long delayNanos) {
            boolean[] cancelled = {false};
            timers.add(new Timed(nowNanos + delayNanos, task, cancelled));
            return () -> {
                synchronized (Clock.this) {
                    cancelled[0] = true;
                }
            };
        }

        /** Timers armed and neither fired nor cancelled. */
        synchronized long armed() {
            return timers.stream().filter(t -> !t.cancelled()[0]).count();
        }

        void advance(long nanos) {
            synchronized (this) {
                nowNanos += nanos;
                for (var it = timers.iterator(); it.hasNext(); ) {
                    Timed t = it.next();
                    if (t.cancelled()[0]) {
                        it.remove();
                    } else if (t.dueNanos() <= nowNanos) {
                        it.remove();
                        callbacks.add(t.task());
                    }
                }
            }
            runCallbacks();
        }
    }

    /** The owning session: its lock, the events the operation emitted, the operations that ended. */
    static final class Session implements SessionCallback {
        private final Object lock = new Object();
        final List<Reply.Completion> events = new CopyOnWriteArrayList<>();
        final List<QueryOperation> ended = new CopyOnWriteArrayList<>();

        @Override
        public Object lock() {
            return lock;
        }

        @Override
        public void emit(Reply.Completion event) {
            assertThat(Thread.holdsLock(lock)).as("emitted under the session lock").isTrue();
            events.add(event);
        }

        @Override
        public void ended(QueryOperation operation) {
            assertThat(Thread.holdsLock(lock)).as("ended under the session lock").isTrue();
            ended.add(operation);
        }

        List<CompletionEvent> events(long operationId) {
            return events.stream().filter(e -> e.operationId() == operationId).map(Reply.Completion::event).toList();
        }
    }

    /** What the operations counted. */
    static final class Metrics implements QueryMetrics {
        int pending;
        final List<SettledQuery> settled = new CopyOnWriteArrayList<>();
        final List<RestoreOutcome> restores = new CopyOnWriteArrayList<>();
        final Map<PeerWaitOutcome, Integer> peerWaits = new EnumMap<>(PeerWaitOutcome.class);
        /** Each timed peer-wait phase and its duration, in order. */
        final List<Map.Entry<PeerWaitPhase, Long>> phases = new ArrayList<>();

        @Override
        public synchronized void countPending() {
            pending++;
        }

        @Override
        public void countSettled(SettledQuery q) {
            settled.add(q);
        }

        @Override
        public void countRestore(RestoreOutcome outcome, TierCounts bytesCopied, long durationNanos) {
            restores.add(outcome);
        }

        @Override
        public synchronized void countPeerWait(PeerWaitOutcome outcome) {
            peerWaits.merge(outcome, 1, Integer::sum);
        }

        @Override
        public synchronized void timePeerWaitPhase(PeerWaitPhase phase, long durationNanos) {
            phases.add(Map.entry(phase, durationNanos));
        }
    }

    /**
     * Peers that hold {@link #held} pages, known to the planner only once a lookup of them answered
     * (as the catalog's candidate cache): a {@link #discover} answers when {@link #catalog}
     * completes, and each fetch waits in {@link #fetches} until the test completes it.
     */
    static final class Peers implements RemotePages {
        final Map<StateKey, Long> held = new java.util.concurrent.ConcurrentHashMap<>();
        final java.util.Set<StateKey> known = java.util.concurrent.ConcurrentHashMap.newKeySet();
        volatile CompletableFuture<Void> catalog = new CompletableFuture<>();
        volatile boolean discoverable = true;
        final List<List<StateKey>> discovered = new CopyOnWriteArrayList<>();
        final List<Fetch> fetches = new CopyOnWriteArrayList<>();

        /** A page peers hold and the catalog already named. */
        void know(StateKey key, long stagingBytes) {
            held.put(key, stagingBytes);
            known.add(key);
        }

        record Fetch(StateKey key, CompletableFuture<StageResult> result) {
            void miss() {
                result.complete(new StageResult.Miss(key, StageResult.MissReason.NOT_FOUND));
            }
        }

        @Override
        public long stagingBytes(StateKey key, SessionScope scope) {
            return known.contains(key) ? held.getOrDefault(key, 0L) : 0;
        }

        @Override
        public CompletableFuture<StageResult> fetch(StateKey key, SessionScope scope) {
            Fetch f = new Fetch(key, new CompletableFuture<>());
            fetches.add(f);
            return f.result();
        }

        @Override
        public boolean discoverable() {
            return discoverable;
        }

        @Override
        public CompletableFuture<Void> discover(List<StateKey> keys, SessionScope scope) {
            discovered.add(List.copyOf(keys));
            return catalog.thenRun(() -> known.addAll(keys));
        }
    }
}
