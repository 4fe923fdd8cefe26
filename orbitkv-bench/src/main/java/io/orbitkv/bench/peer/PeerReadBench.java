package io.orbitkv.bench.peer;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.namespace.NamespaceTable;
import io.orbitkv.core.peer.MemberView;
import io.orbitkv.core.peer.NodeIncarnation;
import io.orbitkv.core.peer.PeerCandidate;
import io.orbitkv.core.peer.PeerEndpoint;
import io.orbitkv.core.peer.PeerMedium;
import io.orbitkv.core.peer.PeerReadResult;
import io.orbitkv.core.peer.PeerReader;
import io.orbitkv.core.peer.PeerSource;
import io.orbitkv.core.peer.ReleaseRetrier;
import io.orbitkv.core.peer.TicketTable;
import io.orbitkv.core.storage.TieredStore;
import io.orbitkv.core.storage.TieredStoreConfig;
import io.orbitkv.core.storage.dram.CommitResult;
import io.orbitkv.core.storage.dram.DramTierConfig;
import io.orbitkv.core.storage.dram.Reservation;
import io.orbitkv.core.storage.dram.SizeClass;
import io.orbitkv.core.storage.publish.PublishConfig;
import io.orbitkv.core.storage.publish.SsdAdmissionPolicy;
import io.orbitkv.core.storage.ssd.SsdConfig;
import io.orbitkv.server.cluster.ClusterChannels;
import io.orbitkv.server.cluster.ClusterRpcServer;
import io.orbitkv.server.cluster.ClusterSecurity;
import io.orbitkv.server.peer.GrpcPayloadTransport;
import io.orbitkv.server.peer.PeerReadService;
import io.orbitkv.server.peer.bulk.BulkLimits;
import io.orbitkv.server.peer.bulk.BulkPayloadTransport;
import io.orbitkv.server.peer.bulk.BulkServer;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.management.ManagementFactory;
import java.lang.management.ThreadInfo;
import java.lang.management.ThreadMXBean;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Peer read throughput against two baselines over the same loopback, same
 * payloads and same concurrency, in one run so the ratios share the machine's state:
 * <ul>
 *   <li><b>peer</b>: the full workflow — one server-streaming Fetch RPC (grant, 1 MiB chunks,
 *   CRC32C trailer; the source frees the ticket at stream end), commit into a reserved DRAM slot — through the
 *   authenticated {@link ClusterRpcServer}; the requester evicts its copy after each read so
 *   every read moves the bytes;</li>
 *   <li><b>bulk</b>: the same read over the bulk data plane (docs/peer-data-plane.md): one
 *   BATCH_REQUEST on a pooled authenticated connection, the page written from the pinned slot
 *   and read straight into the reserved slot, CRC32C checked, committed; the {@code batch 32}
 *   rows read 32 pages in one {@code readBatch} (one request) per iteration;</li>
 *   <li><b>redis</b>: {@code GET} of the same bytes (an {@code MGET} of 32 keys in the batch rows) from a {@code redis-server} on loopback with
 *   a minimal RESP client (one connection per thread, reply read into a heap array);</li>
 *   <li><b>nio</b>: a raw Java NIO stream: 4-byte request, payload written from a direct buffer,
 *   read into a direct buffer — the floor any TCP transport pays (32 pipelined requests in the
 *   batch rows).</li>
 *   <li><b>mooncake</b> (optional): Mooncake Store's {@code batch_get_into} of the same page sizes, measured
 *   just before by {@code orbitkv-bench/src/main/python/mooncake_peer_bench.py} (a master, a source process
 *   holding the segment and a reader process on TCP over loopback) and passed in as a JSON file of GB/s keyed
 *   {@code "<page>|<conc>"}; or {@code unavailable:<reason>} when that step failed, which the table then says.</li>
 * </ul>
 * Before the table every path runs once per page size (0.5 s and {@link #WARM_UP_SECONDS} more each, the
 * baselines too), so the first measured cell of a column is as warm as the last: a cell's own 0.5 s warm-up
 * left the JIT compiling the bulk path through the first bulk cell (256 KiB at concurrency 1 read
 * 1.35 GB/s there against 2.1–2.2 GB/s once compiled).
 * Prints Markdown rows on standard output. Run: {@code bin/bench-peer} (or
 * {@code java -cp orbitkv-bench.jar io.orbitkv.bench.peer.PeerReadBench [seconds] [redis-server path]
 * [mooncake JSON | unavailable:<reason>]}).
 * Source and requester share one JVM and the 2 cores; the figures are loopback figures, not NIC ones.
 * The two baselines have their own classes: {@link Redis} and {@link NioServer}.
 */
public final class PeerReadBench {

    static final int PAGES_PER_SIZE = 32;
    static final int BATCH = 32;
    static final int MAX_THREADS = 16;
    static final int[] SIZES = {256 * 1024, 2 * 1024 * 1024};
    static final int[] CONCURRENCY = {1, 4, 16};
    /** Seconds each path (peer, bulk, bulk batch, Redis, NIO) runs per page size before the measured cells. */
    static final double WARM_UP_SECONDS = 1.0;
    static final NamespaceDigest DIGEST = new NamespaceDigest(1, 2, 3, 4);
    static final int NS = 1;
    static final NodeIncarnation A = new NodeIncarnation("a", 1);
    static final NodeIncarnation B = new NodeIncarnation("b", 1);

    private PeerReadBench() {
    }

    public static void main(String[] args) throws Exception {
        double seconds = args.length > 0 ? Double.parseDouble(args[0]) : 3;
        String redisBinary = args.length > 1 ? args[1] : "/usr/bin/redis-server";
        Mooncake mooncake = args.length > 2 ? Mooncake.of(args[2]) : null;
        Path dir = Files.createTempDirectory(Path.of("/dev/shm"), "orbitkv-peer-bench");
        MemberView members = new MemberView() {
            @Override
            public boolean validForRemoteWork() {
                return true;
            }

            @Override
            public Optional<NodeIncarnation> live(String nodeId) {
                return Optional.of(nodeId.equals("a") ? A : B);
            }
        };
        ClusterSecurity security = new ClusterSecurity("bench", "bench-token-0123456789".getBytes(StandardCharsets.UTF_8),
                Optional.empty());
        try (TieredStore source = store(dir, "a"); TieredStore requester = store(dir, "b")) {
            NamespaceTable ns = new NamespaceTable(4);
            ns.register(NS, DIGEST);
            PeerSource peerSource = new PeerSource(A, source, ns, members, new TicketTable(256, TimeUnit.SECONDS.toNanos(30)),
                    System::nanoTime);
            List<List<Page>> pages = new ArrayList<>();
            for (int size : SIZES) pages.add(put(source, size));
            try (ClusterRpcServer server = ClusterRpcServer.start(new InetSocketAddress("127.0.0.1", 0), security,
                    List.of(new PeerReadService(peerSource)));
                 BulkServer bulkServer = BulkServer.start(new InetSocketAddress("127.0.0.1", 0), peerSource, security,
                         BulkLimits.defaults(), new SimpleMeterRegistry());
                 ClusterChannels channels = new ClusterChannels(security);
                 Redis redis = Redis.start(redisBinary);
                 NioServer nio = new NioServer(pages)) {
                PeerEndpoint endpoint = new PeerEndpoint(A, "127.0.0.1:" + server.address().getPort());
                GrpcPayloadTransport transport = new GrpcPayloadTransport(channels, Duration.ofSeconds(5), Duration.ofSeconds(30));
                ReleaseRetrier releases = new ReleaseRetrier(transport, 1024, 4, TimeUnit.MILLISECONDS.toNanos(50),
                        TimeUnit.SECONDS.toNanos(1));
                PeerReader reader = new PeerReader(B, requester.dram(), members, transport, releases, System::nanoTime);
                BulkPayloadTransport bulk = new BulkPayloadTransport(transport,
                        src -> CompletableFuture.completedFuture(Optional.of(bulkServer.address())), security,
                        BulkLimits.defaults(), new SimpleMeterRegistry());
                PeerReader bulkReader = new PeerReader(B, requester.dram(), members, bulk, releases, System::nanoTime);
                for (int s = 0; s < SIZES.length; s++) redis.load(s, pages.get(s));
                if (System.getenv("ORBITKV_PEER_PHASES") != null) {
                    Page p = pages.get(0).get(0);
                    for (int round = 0; round < 3; round++) {
                        long t0 = System.nanoTime();
                        for (int i = 0; i < 100; i++) {
                            var g = (io.orbitkv.core.peer.AuthorizeResult.Granted) transport.authorize(endpoint,
                                    new io.orbitkv.core.peer.AuthorizeRequest(B, 1, p.key, DIGEST, PeerMedium.DRAM, p.imageId,
                                            source.residency().lastSequence())).join();
                            long t1 = System.nanoTime();
                            transport.release(endpoint, g.ticketId(), B).join();
                            if (i == 99) System.err.printf("authorize %.3f ms, release %.3f ms%n", (t1 - t0) / 1e6 / 100, (System.nanoTime() - t1) / 1e6);
                        }
                    }
                }

                List<Paths> paths = new ArrayList<>();
                for (int s = 0; s < SIZES.length; s++) {
                    List<Page> set = pages.get(s);
                    final int sizeIndex = s;
                    paths.add(new Paths(
                            (t, i) -> readOne(reader, requester, endpoint, source, set.get(i % set.size())),
                            (t, i) -> readOne(bulkReader, requester, endpoint, source, set.get(i % set.size())),
                            (t, i) -> redis.get(t, sizeIndex, i % set.size()),
                            (t, i) -> nio.get(t, sizeIndex, i % set.size()),
                            (t, i) -> readBatch(bulkReader, requester, endpoint, source, set),
                            (t, i) -> redis.mget(t, sizeIndex, BATCH),
                            (t, i) -> nio.getAll(t, sizeIndex, BATCH)));
                }
                for (Paths p : paths) {
                    for (Op op : List.of(p.peer(), p.bulk(), p.redis(), p.nio())) run(4, WARM_UP_SECONDS, op);
                    for (Op op : List.of(p.bulkBatch(), p.redisBatch(), p.nioBatch())) run(1, WARM_UP_SECONDS, op);
                }
                System.out.println("| page | conc | peer GB/s | bulk GB/s | redis GB/s | nio GB/s | peer/redis | bulk/redis (≥ 1.5) | bulk/nio (≥ 0.8) |"
                        + " bulk CPU s/GB source / requester |"
                        + (mooncake == null ? "" : " mooncake GB/s | bulk/mooncake (≥ 1.2) |"));
                System.out.println("|---|---|---|---|---|---|---|---|---|---|" + (mooncake == null ? "" : "---|---|"));
                for (int s = 0; s < SIZES.length; s++) {
                    Paths p = paths.get(s);
                    for (int conc : CONCURRENCY) {
                        double peer = run(conc, seconds, p.peer());
                        Rate bulkRate = measure(conc, seconds, p.bulk());
                        double viaBulk = bulkRate.gbs();
                        double red = run(conc, seconds, p.redis());
                        double raw = run(conc, seconds, p.nio());
                        System.out.printf("| %d KiB | %d | %.2f | %.2f | %.2f | %.2f | %.2f× | %.2f× | %.2f× | %s |%s%n", SIZES[s] / 1024, conc,
                                peer, viaBulk, red, raw, peer / red, viaBulk / red, viaBulk / raw, bulkRate.cpu(),
                                mooncake == null ? "" : mooncake.cells(SIZES[s] / 1024 + " KiB|" + conc, viaBulk));
                    }
                    Rate bulkRate = measure(1, seconds, p.bulkBatch());
                    double viaBulk = bulkRate.gbs();
                    double red = run(1, seconds, p.redisBatch());
                    double raw = run(1, seconds, p.nioBatch());
                    System.out.printf("| %d KiB | batch %d | – | %.2f | %.2f | %.2f | – | %.2f× | %.2f× | %s |%s%n", SIZES[s] / 1024, BATCH,
                            viaBulk, red, raw, viaBulk / red, viaBulk / raw, bulkRate.cpu(),
                            mooncake == null ? "" : mooncake.cells(SIZES[s] / 1024 + " KiB|batch " + BATCH, viaBulk));
                }
                bulk.close();
            }
        } finally {
            try (var files = Files.walk(dir)) {
                files.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
    }

    record Page(StateKey key, long imageId, byte[] bytes) {}

    /** One page size's reads on every path: single pages (a thread each), and the batch rows' reads. */
    record Paths(Op peer, Op bulk, Op redis, Op nio, Op bulkBatch, Op redisBatch, Op nioBatch) {}

    /**
     * The Mooncake Store column: the figures of {@code mooncake_peer_bench.py} (a JSON object of GB/s, or of a
     * string saying why a cell has none), or the reason the whole step is unavailable.
     */
    record Mooncake(JsonNode figures, String unavailable) {
        static final String UNAVAILABLE = "unavailable:";

        /** {@code arg}: the JSON file's path, or {@code unavailable:<reason>}; an unreadable file is a reason too. */
        static Mooncake of(String arg) {
            if (arg.startsWith(UNAVAILABLE)) return new Mooncake(null, clean(arg.substring(UNAVAILABLE.length())));
            try {
                JsonNode figures = new ObjectMapper().readTree(Path.of(arg).toFile());
                if (figures == null || !figures.isObject()) return new Mooncake(null, "not a JSON object: " + arg);
                return new Mooncake(figures, null);
            } catch (IOException e) {
                return new Mooncake(null, clean("unreadable " + arg + ": " + e.getMessage()));
            }
        }

        /** A reason fit for one table cell: one line, no column separators. */
        static String clean(String reason) {
            String r = reason.replaceAll("\\s*[\\r\\n|]+\\s*", " ").strip();
            return r.isEmpty() ? "no reason given" : r;
        }

        /** The row's two extra cells ({@code " x | y |"}): Mooncake's GB/s and bulk's ratio to it. */
        String cells(String row, double bulk) {
            if (unavailable != null) return " unavailable (" + unavailable + ") | – |";
            JsonNode v = figures.get(row);
            if (v == null) return " unavailable (no figure) | – |";
            if (!v.isNumber()) return " unavailable (" + clean(v.asText()) + ") | – |";
            double gbs = v.asDouble();
            return String.format(" %.2f | %s |", gbs, gbs > 0 ? String.format("%.2f×", bulk / gbs) : "–");
        }
    }

    /** One peer read of {@code p} through {@code reader}; the requester's copy is evicted so the next read moves bytes again. */
    static long readOne(PeerReader reader, TieredStore requester, PeerEndpoint endpoint, TieredStore source, Page p) {
        PeerCandidate c = new PeerCandidate(endpoint, p.key, DIGEST, PeerMedium.DRAM, p.imageId, source.residency().lastSequence());
        PeerReadResult r = reader.read(c, NS).join();
        if (!(r instanceof PeerReadResult.Fetched f)) throw new IllegalStateException("peer read missed: " + r);
        f.lease().release();
        requester.dram().evict(p.key);
        return p.bytes.length;
    }

    /** The first {@link #BATCH} pages of {@code set} in one {@code readBatch}; every page must arrive. */
    static long readBatch(PeerReader reader, TieredStore requester, PeerEndpoint endpoint, TieredStore source, List<Page> set) {
        long sequence = source.residency().lastSequence();
        List<PeerCandidate> batch = new ArrayList<>(BATCH);
        for (int i = 0; i < BATCH; i++) {
            Page p = set.get(i);
            batch.add(new PeerCandidate(endpoint, p.key, DIGEST, PeerMedium.DRAM, p.imageId, sequence));
        }
        long bytes = 0;
        List<CompletableFuture<PeerReadResult>> reads = reader.readBatch(batch, NS);
        for (int i = 0; i < BATCH; i++) {
            PeerReadResult r = reads.get(i).join();
            if (!(r instanceof PeerReadResult.Fetched f)) throw new IllegalStateException("batch read missed: " + r);
            f.lease().release();
            requester.dram().evict(set.get(i).key);
            bytes += set.get(i).bytes.length;
        }
        return bytes;
    }

    interface Op {
        /** One read by thread {@code thread}, its {@code i}-th; returns the bytes moved. */
        long read(int thread, int i) throws Exception;
    }

    /** GB/s (10⁹ bytes) of {@code threads} threads running {@code op} for {@code seconds}, after a 0.5 s warm-up. */
    static double run(int threads, double seconds, Op op) throws InterruptedException {
        return measure(threads, seconds, op).gbs();
    }

    /**
     * A measured rate and the CPU seconds per GB its two sides spent in the counted window: the
     * source's bulk threads ({@code orbitkv-bulk-serve-*}, {@code orbitkv-bulk-source-*}), and the
     * requester's ({@code orbitkv-bulk-fetch-*}, {@code orbitkv-bulk-requester-*} and the reading threads,
     * which commit and evict); per-thread CPU time, so JIT and GC threads count on neither side.
     */
    record Rate(double gbs, double sourceCpuSeconds, double requesterCpuSeconds, double gigabytes) {
        String cpu() {
            return gigabytes <= 0 ? "–" : String.format("%.2f / %.2f", sourceCpuSeconds / gigabytes, requesterCpuSeconds / gigabytes);
        }
    }

    static final String READER_THREAD = "peer-bench-reader-";

    /** CPU nanoseconds of every live thread, by id, and the side ({@code 0} source, {@code 1} requester, else none). */
    static Map<Long, long[]> threadCpu() {
        ThreadMXBean mx = ManagementFactory.getThreadMXBean();
        Map<Long, long[]> out = new HashMap<>();
        for (ThreadInfo ti : mx.getThreadInfo(mx.getAllThreadIds())) {
            if (ti == null) continue;
            long cpu = mx.getThreadCpuTime(ti.getThreadId());
            if (cpu < 0) continue;
            String n = ti.getThreadName();
            int side = n.startsWith("orbitkv-bulk-serve") || n.startsWith("orbitkv-bulk-source") ? 0
                    : n.startsWith("orbitkv-bulk-fetch") || n.startsWith("orbitkv-bulk-requester") || n.startsWith(READER_THREAD) ? 1 : 2;
            out.put(ti.getThreadId(), new long[] {cpu, side});
        }
        return out;
    }

    /** {@link #run}, with the CPU each side spent while counting. */
    static Rate measure(int threads, double seconds, Op op) throws InterruptedException {
        AtomicLong bytes = new AtomicLong();
        AtomicBoolean counting = new AtomicBoolean();
        AtomicBoolean stop = new AtomicBoolean();
        List<Thread> ts = new ArrayList<>();
        AtomicLong failures = new AtomicLong();
        for (int t = 0; t < threads; t++) {
            int thread = t;
            ts.add(Thread.ofPlatform().name(READER_THREAD + t).start(() -> {
                int i = thread;
                while (!stop.get()) {
                    try {
                        long n = op.read(thread, i);
                        if (counting.get()) bytes.addAndGet(n);
                    } catch (Exception e) {
                        if (failures.incrementAndGet() == 1) System.err.println("first failure: " + e);
                    }
                    i += threads;
                }
            }));
        }
        Thread.sleep(500);
        Map<Long, long[]> cpuBefore = threadCpu();
        counting.set(true);
        long start = System.nanoTime();
        Thread.sleep((long) (seconds * 1000));
        counting.set(false);
        long elapsed = System.nanoTime() - start;
        long[] cpu = new long[3];
        threadCpu().forEach((id, now) -> {
            long[] before = cpuBefore.get(id);
            cpu[(int) now[1]] += now[0] - (before == null ? 0 : before[0]);
        });
        stop.set(true);
        for (Thread t : ts) t.join();
        if (failures.get() > 0) System.err.println("failures: " + failures.get());
        return new Rate(bytes.get() / (elapsed / 1e9) / 1e9, cpu[0] / 1e9, cpu[1] / 1e9, bytes.get() / 1e9);
    }

    static TieredStore store(Path dir, String name) throws IOException {
        NamespaceTable namespaces = new NamespaceTable(4);
        namespaces.register(NS, DIGEST);
        DramTierConfig dram = new DramTierConfig(Files.createDirectories(dir.resolve("dram-" + name)), "bench" + name,
                List.of(new SizeClass(SIZES[0], 64), new SizeClass(SIZES[1], 64)),
                16L * SIZES[1], 8L * SIZES[1], 64);
        SsdConfig ssd = SsdConfig.of(Files.createDirectories(dir.resolve("ssd-" + name))).withMaxPayloadBytes(SIZES[1])
                .withFiles(2, 16L << 20).withIo(1, 64).withPinnedWaitNanos(TimeUnit.MILLISECONDS.toNanos(20))
                .withBuffers(64 * 1024, 64 * 1024);
        return TieredStore.open(new TieredStoreConfig(dram, ssd,
                PublishConfig.defaults(new SsdAdmissionPolicy.ReuseAware(1_000_000)), 1 << 16, 64), namespaces,
                new SimpleMeterRegistry());
    }

    static List<Page> put(TieredStore store, int size) {
        List<Page> out = new ArrayList<>();
        Random random = new Random(size);
        for (int i = 0; i < PAGES_PER_SIZE; i++) {
            byte[] k = new byte[StateKey.BYTES];
            random.nextBytes(k);
            byte[] bytes = new byte[size];
            random.nextBytes(bytes);
            StateKey key = StateKey.ofBytes(k);
            Reservation r = (Reservation) store.reserve(key, NS, size);
            MemorySegment.copy(MemorySegment.ofArray(bytes), 0, r.segment(), 0, size);
            long id = ((CommitResult.Inserted) store.commit(r)).imageId();
            out.add(new Page(key, id, bytes));
        }
        return out;
    }
}
