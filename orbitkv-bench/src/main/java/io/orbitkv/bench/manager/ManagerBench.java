package io.orbitkv.bench.manager;

import io.orbitkv.bench.BenchManager;
import io.orbitkv.bench.Throughput;
import io.orbitkv.bench.storage.BenchRow;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.PageToPublish;
import io.orbitkv.client.PublishOutcome;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.TokenChain;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.FrameEncoder;
import io.orbitkv.state.protocol.Hashes;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import io.orbitkv.testkit.ManagerProcess;
import org.HdrHistogram.Histogram;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CyclicBarrier;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;

/**
 * The Manager benchmarks against a real Manager process
 * ({@link ManagerProcess}) driven by the Java client, each paired with its baseline in the same
 * run: QUERY of 1,024 resident hashes vs a raw UDS echo of the same bytes, in latency and in CPU
 * time of both processes ({@link Schedstat}); ENGINE_RESTORE of 2 MiB pages (QUERY and RESTORE
 * pipelined, RELEASE not awaited, as an engine restores) vs {@code MemorySegment.copy} of the same
 * bytes ({@link RestoreBench}); a missing QUERY's latency; p99 QUERY latency with 16 concurrent clients, with the CPU
 * time and run-queue wait per query that show whether 2 cores can meet it.
 *
 * <pre>
 *   java -jar orbitkv-bench.jar manager --manager-jar=orbitkv-server/target/orbitkv.jar
 *        [--dir=var/bench-manager] [--shm-dir=/dev/shm/orbitkv-bench-manager] [--queries=20000]
 *        [--restore-pages=8,32,128] [--rounds=9] [--clients=16] [--ops-per-client=2000]
 * </pre>
 *
 * <p>Thread model: the caller's thread runs everything but the concurrent-client phase, which
 * runs one platform thread per client. Latencies are HdrHistograms of nanoseconds (3 significant
 * digits).
 *
 * <p>Design note: latency pairs alternate in rounds ({@value #LATENCY_ROUNDS} rounds, subject and
 * echo order flipping), as {@link Throughput} does for rates, so drift on these shared 2-core
 * machines lands on both sides; both sides warm up for {@value #WARMUP_OPS} round trips first so
 * C2 has compiled the client, the Manager's reader and the echo loop.
 */
public final class ManagerBench {

    static final int PAGE_TOKENS = 16;
    static final int QUERY_PAGES = 1024;
    static final int SMALL_PAGE_BYTES = 16 * 1024;
    static final int BIG_PAGE_BYTES = 2 * 1024 * 1024;
    static final int WARMUP_OPS = 3000;
    static final int LATENCY_ROUNDS = 10;
    static final int CONCURRENT_HIT_PAGES = 64;
    /** Pages of the paced QUERY: a 352-token prompt's full pages, as in the TTFT benchmark's hits. */
    static final int PACED_PAGES = 22;
    /** Idle pauses before each paced QUERY and echo: an engine queries once per request. */
    static final long[] PACED_PAUSES_MILLIS = {20, 200};
    static final int PACED_SAMPLES = 20;

    /**
     * @param managerJar    the shaded Manager jar ({@code orbitkv-server/target/orbitkv.jar})
     * @param dir           working directory for the Manager's SSD files, socket and log
     * @param shmDir        tmpfs directory for the Manager's DRAM arenas and the restore region
     * @param queries       measured QUERY round trips (and as many echoes)
     * @param restorePages  pages per restore, one row each
     * @param rounds        paired rounds of each restore row
     * @param clients       concurrent clients in the p99 phase
     * @param opsPerClient  measured QUERYs per client in that phase
     */
    public record Options(Path managerJar, Path dir, Path shmDir, int queries, List<Integer> restorePages, int rounds,
                          int clients, int opsPerClient) {
        public Options {
            restorePages = List.copyOf(restorePages);
            if (queries < LATENCY_ROUNDS) throw new IllegalArgumentException("queries must be >= " + LATENCY_ROUNDS);
        }
    }

    private ManagerBench() {}

    /** A chained prefix: the tokens, one block hash per full page, and the namespace it belongs to. */
    record Prefix(int[] tokens, List<byte[]> hashes) {
        static Prefix of(Namespace ns, int pages, int seed) {
            int[] tokens = new int[pages * PAGE_TOKENS + 1];
            for (int i = 0; i < tokens.length; i++) tokens[i] = seed * 1_000_003 + i;
            return new Prefix(tokens, List.of(TokenChain.pageHashes(ns.digest(), tokens, PAGE_TOKENS, new byte[0])));
        }

        /** A QUERY of the first {@code pages} pages of this prefix (plus one token). */
        Request.Query query(long op, CompletionTarget target, int pages) {
            return new Request.Query(op, 0, target, (long) pages * PAGE_TOKENS + 1, 0,
                    List.of(new Request.QueryGroup(0, KeyForm.BLOCK_HASH, Hashes.of(hashes.subList(0, pages)))));
        }
    }

    static Namespace namespace() {
        return new Namespace("bench-manager", "r1", "sha256:w", "sha256:t", "", "bf16", "nhd", PAGE_TOKENS, 1, 0, 1,
                0, 1);
    }

    static final RecoveryContract CONTRACT = new RecoveryContract(PAGE_TOKENS, List.of(new StateGroup.Full(0)));

    public static List<BenchRow> run(Options o) throws Exception {
        int maxRestore = o.restorePages().stream().max(Integer::compare).orElse(1);
        String dramBytes = (3L * Math.max(256, maxRestore * 4L)) + "m"; // each of 3 slot classes holds 2× the big prefix
        Namespace ns = namespace();
        Prefix small = Prefix.of(ns, QUERY_PAGES, 1);
        Prefix big = Prefix.of(ns, maxRestore, 2);
        Prefix absent = Prefix.of(ns, QUERY_PAGES, 3);
        List<BenchRow> rows = new ArrayList<>();
        try (ManagerProcess manager = BenchManager.startJar(o.managerJar(), o.dir(), o.shmDir(),
                List.of("--ssd-bytes", "512m", "--dram-bytes", dramBytes))) {
            try (OrbitKvClient client = OrbitKvClient.connect(manager.socket(), Duration.ofSeconds(60));
                 Arena arena = Arena.ofConfined()) {
                log("Manager pid " + manager.pid() + " ready, DRAM " + dramBytes);
                client.register("bench-main", 1, ns, CONTRACT);
                publish(client, small, SMALL_PAGE_BYTES, arena);
                publish(client, big, BIG_PAGE_BYTES, arena);
                log("published " + QUERY_PAGES + " × 16 KiB and " + maxRestore + " × 2 MiB pages");

                rows.addAll(queryVersusEcho(client, small, o, manager.pid()));
                rows.add(missingQuery(client, absent, o));
                for (long pause : PACED_PAUSES_MILLIS) rows.add(paced(client, small, pause, o));
                for (int pages : o.restorePages()) rows.addAll(RestoreBench.restore(client, big, pages, o, manager.pid()));
                rows.add(concurrent(manager.socket(), ns, small, absent, o, manager.pid()));
            }
            manager.stop(); // after the client has gone: SIGTERM, and the Manager must drain and exit 0
        }
        return rows;
    }

    private static void publish(OrbitKvClient client, Prefix prefix, int pageBytes, Arena arena) {
        int batch = 64;
        for (int from = 0; from < prefix.hashes().size(); from += batch) {
            List<PageToPublish> pages = new ArrayList<>();
            for (int i = from; i < Math.min(from + batch, prefix.hashes().size()); i++) {
                MemorySegment image = arena.allocate(pageBytes);
                image.fill((byte) (i * 31 + pageBytes));
                pages.add(PageToPublish.ofBlockHash(0, prefix.hashes().get(i), image));
            }
            List<PublishOutcome> out = client.publish(pages);
            if (!out.stream().allMatch(r -> r == PublishOutcome.SEALED || r == PublishOutcome.ALREADY_RESIDENT)) {
                throw new IllegalStateException("publish failed: " + out);
            }
        }
    }

    // ---- QUERY of 1,024 resident hashes vs a raw UDS echo ---------------------------------------

    private static List<BenchRow> queryVersusEcho(OrbitKvClient client, Prefix prefix, Options o, long managerPid)
            throws IOException {
        Schedstat subjectBench = Schedstat.ZERO;
        Schedstat subjectManager = Schedstat.ZERO;
        Schedstat echoBench = Schedstat.ZERO;
        long measuredOps = 1;
        Request.Query query = prefix.query(1, CompletionTarget.HOST_READY, QUERY_PAGES);
        Reply.QueryResult first = client.query(query);
        if (!first.hit() || first.boundaryTokens() != (long) QUERY_PAGES * PAGE_TOKENS) {
            throw new IllegalStateException("the 1,024-page prefix is not resident: " + first.status());
        }
        int queryBytes = FrameEncoder.toBytes(1, query).length;
        int resultBytes = FrameEncoder.toBytes(1, first).length;
        Reply.Released released = client.release(1);
        int releaseBytes = FrameEncoder.toBytes(1, new Request.Release(1)).length;
        int releasedBytes = FrameEncoder.toBytes(1, released).length;
        log("QUERY frame " + queryBytes + " B, QUERY_RESULT " + resultBytes + " B, RELEASE " + releaseBytes
                + " B, RELEASED " + releasedBytes + " B");

        Histogram q = histogram();
        Histogram qr = histogram();
        Histogram echo = histogram();
        Histogram echo2 = histogram();
        Path echoPath = o.dir().resolve("echo.sock");
        try (UdsEcho server = new UdsEcho(echoPath);
             UdsEcho.Client e = server.connect(queryBytes, resultBytes);
             UdsEcho.Client er = server.connect(releaseBytes, releasedBytes)) {
            Runnable subject = () -> {
                long t0 = System.nanoTime();
                client.query(query);
                long t1 = System.nanoTime();
                client.release(1);
                long t2 = System.nanoTime();
                q.recordValue(t1 - t0);
                qr.recordValue(t2 - t0);
            };
            Runnable baseline = () -> {
                long t0 = System.nanoTime();
                e.roundTrip();
                long t1 = System.nanoTime();
                er.roundTrip();
                long t2 = System.nanoTime();
                echo.recordValue(t1 - t0);
                echo2.recordValue(t2 - t0);
            };
            for (int i = 0; i < WARMUP_OPS; i++) {
                subject.run();
                baseline.run();
            }
            q.reset();
            qr.reset();
            echo.reset();
            echo2.reset();
            int perRound = o.queries() / LATENCY_ROUNDS;
            long self = ProcessHandle.current().pid();
            for (int round = 0; round < LATENCY_ROUNDS; round++) {
                boolean subjectFirst = round % 2 == 0;
                for (int side = 0; side < 2; side++) {
                    boolean isSubject = subjectFirst == (side == 0);
                    Runnable run = isSubject ? subject : baseline;
                    Schedstat bench0 = Schedstat.of(self);
                    Schedstat manager0 = Schedstat.of(managerPid);
                    for (int i = 0; i < perRound; i++) run.run();
                    Schedstat bench = Schedstat.of(self).minus(bench0);
                    Schedstat manager = Schedstat.of(managerPid).minus(manager0);
                    if (isSubject) {
                        subjectBench = subjectBench.plus(bench);
                        subjectManager = subjectManager.plus(manager);
                    } else {
                        echoBench = echoBench.plus(bench);
                    }
                }
            }
            measuredOps = (long) perRound * LATENCY_ROUNDS;
        }
        String echoNote = " (raw UDS echo, " + queryBytes + " B → " + resultBytes + " B)";
        // CPU per QUERY + RELEASE pair, both processes (schedstat), against the two echoes' CPU.
        double orbitCpu = (subjectBench.runNanos() + subjectManager.runNanos()) / 1e3 / measuredOps;
        double managerCpu = subjectManager.runNanos() / 1e3 / measuredOps;
        double echoCpu = echoBench.runNanos() / 1e3 / measuredOps;
        double orbitWait = (subjectBench.waitNanos() + subjectManager.waitNanos()) / 1e3 / measuredOps;
        double echoWait = echoBench.waitNanos() / 1e3 / measuredOps;
        log(String.format(java.util.Locale.ROOT, "CPU per QUERY + RELEASE: %.1f µs (Manager %.1f µs, bench JVM %.1f µs),"
                        + " run-queue wait %.1f µs; per echo pair: CPU %.1f µs, wait %.1f µs", orbitCpu, managerCpu,
                orbitCpu - managerCpu, orbitWait, echoCpu, echoWait));
        BenchRow cpuRow = echoCpu <= 0 ? null : new BenchRow(
                "CPU per QUERY + RELEASE of 1,024 resident hashes, both processes (schedstat), / CPU per echo pair",
                BenchRow.fmt(orbitCpu, 1) + " µs (Manager " + BenchRow.fmt(managerCpu, 1) + " µs; run-queue wait "
                        + BenchRow.fmt(orbitWait, 1) + " µs)",
                BenchRow.fmt(echoCpu, 1) + " µs (run-queue wait " + BenchRow.fmt(echoWait, 1) + " µs)",
                orbitCpu / echoCpu, BenchRow.Target.atMost(3, "×"));
        List<BenchRow> rows = new ArrayList<>(List.of(
                latencyRatio("QUERY 1,024 resident hashes, round trip p50 (HOST_READY, full reply with leases)", q, echo,
                        echoNote),
                latencyRatio("QUERY + RELEASE 1,024 resident hashes, p50", qr, echo2,
                        " (two raw UDS echoes of the same sizes)")));
        if (cpuRow != null) rows.add(cpuRow);
        return rows;
    }

    private static BenchRow latencyRatio(String name, Histogram subject, Histogram baseline, String baselineNote) {
        double ratio = (double) subject.getValueAtPercentile(50) / baseline.getValueAtPercentile(50);
        log(name + ": " + p50p99(subject) + " vs " + p50p99(baseline) + " → " + BenchRow.fmt(ratio, 2) + "×");
        return new BenchRow(name, p50p99(subject), p50p99(baseline) + baselineNote, ratio,
                BenchRow.Target.atMost(3, "×"));
    }

    // ---- a missing QUERY ------------------------------------------------------------------------

    private static BenchRow missingQuery(OrbitKvClient client, Prefix absent, Options o) throws IOException {
        Request.Query query = absent.query(2, CompletionTarget.HOST_READY, QUERY_PAGES);
        Reply.QueryResult first = client.query(query);
        if (first.hit()) throw new IllegalStateException("an absent prefix hit");
        client.release(2);
        int queryBytes = FrameEncoder.toBytes(2, query).length;
        int resultBytes = FrameEncoder.toBytes(2, first).length;
        Histogram h = histogram();
        Histogram echo = histogram();
        try (UdsEcho server = new UdsEcho(o.dir().resolve("echo-miss.sock"));
             UdsEcho.Client e = server.connect(queryBytes, resultBytes)) {
            for (int i = 0; i < WARMUP_OPS + o.queries(); i++) {
                long t0 = System.nanoTime();
                client.query(query);
                long t1 = System.nanoTime();
                e.roundTrip();
                long t2 = System.nanoTime();
                client.release(2);
                if (i >= WARMUP_OPS) {
                    h.recordValue(t1 - t0);
                    echo.recordValue(t2 - t1);
                }
            }
        }
        double p50Micros = h.getValueAtPercentile(50) / 1e3;
        log("missing QUERY: " + p50p99(h) + " vs echo " + p50p99(echo));
        return new BenchRow("Missing QUERY (1,024 hashes, none resident), p50", p50p99(h), p50p99(echo)
                + " (raw UDS echo, " + queryBytes + " B → " + resultBytes + " B)", p50Micros,
                BenchRow.Target.atMost(50, "µs"));
    }

    // ---- a QUERY at an engine's cadence: after an idle pause -------------------------------------

    /**
     * A QUERY of {@value #PACED_PAGES} resident hashes (RELEASE untimed) and a raw echo of the same
     * frame sizes, each after {@code pauseMillis} of idleness, alternating, {@value #PACED_SAMPLES}
     * each, after the tight loops above warmed both sides' code: what an engine that queries once
     * per request meets, where a tight loop keeps every thread awake.
     */
    private static BenchRow paced(OrbitKvClient client, Prefix prefix, long pauseMillis, Options o)
            throws IOException, InterruptedException {
        Request.Query query = prefix.query(3, CompletionTarget.HOST_READY, PACED_PAGES);
        Reply.QueryResult first = client.query(query);
        if (!first.hit()) throw new IllegalStateException("the paced prefix is not resident");
        client.release(3);
        Histogram q = histogram();
        Histogram echo = histogram();
        try (UdsEcho server = new UdsEcho(o.dir().resolve("echo-paced.sock"));
             UdsEcho.Client e = server.connect(FrameEncoder.toBytes(3, query).length, FrameEncoder.toBytes(3, first).length)) {
            for (int i = 0; i < WARMUP_OPS; i++) e.roundTrip();
            for (int i = 0; i < PACED_SAMPLES; i++) {
                Thread.sleep(pauseMillis);
                long t0 = System.nanoTime();
                client.query(query);
                q.recordValue(System.nanoTime() - t0);
                client.release(3);
                Thread.sleep(pauseMillis);
                long t1 = System.nanoTime();
                e.roundTrip();
                echo.recordValue(System.nanoTime() - t1);
            }
        }
        return latencyRatio("QUERY " + PACED_PAGES + " resident hashes after a " + pauseMillis
                + " ms idle pause, p50 (an engine's cadence; " + PACED_SAMPLES + " samples)", q, echo,
                " (raw UDS echo after the same pause)");
    }

    // ---- 16 concurrent clients ------------------------------------------------------------------

    private static BenchRow concurrent(Path socket, Namespace ns, Prefix hit, Prefix miss, Options o, long managerPid)
            throws Exception {
        int n = o.clients();
        long self = ProcessHandle.current().pid();
        Schedstat bench0 = Schedstat.of(self);
        Schedstat manager0 = Schedstat.of(managerPid);
        CyclicBarrier start = new CyclicBarrier(n);
        List<Future<Histogram>> results = new ArrayList<>();
        try (ExecutorService pool = Executors.newFixedThreadPool(n)) {
            for (int c = 0; c < n; c++) {
                String instance = "bench-client-" + c;
                results.add(pool.submit(() -> {
                    try (OrbitKvClient client = OrbitKvClient.connect(socket, Duration.ofSeconds(60))) {
                        client.register(instance, 1, ns, CONTRACT);
                        Request.Query hitQuery = hit.query(1, CompletionTarget.HOST_READY, CONCURRENT_HIT_PAGES);
                        Request.Query missQuery = miss.query(1, CompletionTarget.HOST_READY, CONCURRENT_HIT_PAGES);
                        Histogram h = histogram();
                        int warmup = Math.min(500, o.opsPerClient());
                        start.await();
                        for (int i = 0; i < warmup + o.opsPerClient(); i++) {
                            long t0 = System.nanoTime();
                            client.query(i % 2 == 0 ? hitQuery : missQuery);
                            long t1 = System.nanoTime();
                            client.release(1);
                            if (i >= warmup) h.recordValue(t1 - t0);
                        }
                        return h;
                    }
                }));
            }
            Histogram all = histogram();
            for (Future<Histogram> f : results) all.add(f.get());
            // Warm-up queries included: the snapshots bracket the whole phase.
            long queries = (long) n * (Math.min(500, o.opsPerClient()) + o.opsPerClient());
            Schedstat bench = Schedstat.of(self).minus(bench0);
            Schedstat manager = Schedstat.of(managerPid).minus(manager0);
            double p99Micros = all.getValueAtPercentile(99) / 1e3;
            String cpu = String.format(java.util.Locale.ROOT, "per QUERY + RELEASE: CPU %.1f µs (Manager %.1f µs),"
                            + " run-queue wait %.1f µs (Manager %.1f µs)",
                    (bench.runNanos() + manager.runNanos()) / 1e3 / queries, manager.runNanos() / 1e3 / queries,
                    (bench.waitNanos() + manager.waitNanos()) / 1e3 / queries, manager.waitNanos() / 1e3 / queries);
            log(n + " clients: " + p50p99(all) + ", " + all.getTotalCount() + " queries; " + cpu);
            return new BenchRow("QUERY p99, " + n + " concurrent clients (own connection each; "
                    + CONCURRENT_HIT_PAGES + "-page hit / miss alternating, " + o.opsPerClient() + " each)",
                    p50p99(all), "— (schedstat, both processes, " + cpu + ")", p99Micros,
                    BenchRow.Target.atMost(1000, "µs"));
        }
    }

    // ---- helpers --------------------------------------------------------------------------------

    static Histogram histogram() {
        return new Histogram(60_000_000_000L, 3);
    }

    static String p50p99(Histogram h) {
        return "p50 " + BenchRow.fmt(h.getValueAtPercentile(50) / 1e3, 1) + " µs, p99 "
                + BenchRow.fmt(h.getValueAtPercentile(99) / 1e3, 1) + " µs";
    }

    static void log(String line) {
        System.err.println("manager: " + line);
    }

    static List<Integer> ints(String csv) {
        return Arrays.stream(csv.split(",")).map(String::strip).map(Integer::parseInt).toList();
    }
}
