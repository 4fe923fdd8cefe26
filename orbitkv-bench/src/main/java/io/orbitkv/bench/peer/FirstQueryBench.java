package io.orbitkv.bench.peer;

import com.google.protobuf.ByteString;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.PageToPublish;
import io.orbitkv.client.PublishOutcome;
import io.orbitkv.server.cluster.ClusterChannels;
import io.orbitkv.server.cluster.ClusterSecurity;
import io.orbitkv.server.cluster.proto.ClusterInfoGrpc;
import io.orbitkv.server.cluster.proto.KeyResult;
import io.orbitkv.server.cluster.proto.LookupReply;
import io.orbitkv.server.cluster.proto.LookupRequest;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.StateKeys;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.Hashes;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.QueryStatus;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import io.orbitkv.testkit.ManagerProcess;
import org.HdrHistogram.Histogram;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;

/**
 * Time from QUERY to a settled first-query peer hit: two Manager processes joined through a real
 * etcd (started by {@code bin/bench-peer}), a fresh {@value #PAGES}-page prefix published on A
 * each round, and one QUERY on B with a peer wait bound, which B has never seen: B answers
 * PENDING, looks the prefix up in the catalog, fetches every page from A and settles a full hit.
 * Reported next to the same QUERY answered as a local DRAM hit on A (the floor: QUERY, lookup of
 * resident pages, answer), as the bytes moved per second of the settled time, and as the CPU
 * seconds each Manager process spent per GB moved during the timed QUERYs (everything the process
 * did meanwhile: the catalog lookup, the query path, the transfer, its background loops).
 *
 * <p>Run: {@code bin/bench-peer} (last table), or {@code java -cp orbitkv-bench.jar
 * io.orbitkv.bench.peer.FirstQueryBench ETCD_ENDPOINT WORK_DIR [rounds [KiB,KiB...]]}. The Managers and the
 * client share the machine's cores; the figures are loopback figures.
 */
public final class FirstQueryBench {

    static final int PAGES = 64;
    /**
     * Untimed rounds per page size first, so that the fresh Manager processes' query path,
     * catalog lookup and bulk plane are compiled before anything is timed. A round runs each of
     * those paths once, so the JIT needs rounds, not seconds: on the 2-core machine both
     * Managers' compiler threads still took 37–51 % of their CPU 10–30 s in, and the peer hit's
     * p50 over rounds 0–40, 120–160 and 280–320 was 32.9, 13.3 and 11.4 ms (2026-12-06). After 20
     * rounds (an earlier default) it measured the compiler as much as the path; after 200 (the
     * next) C2 still compiled ~20 methods a second on both Managers through the timed rounds
     * ({@code -Xlog:jit+compilation}), and 1,000 rounds took the peer hit from 9.2–9.5 to 6.6–7.2
     * ms and the local hit from 0.70–0.74 to 0.37–0.40 ms (docs/performance.md). Override with
     * {@code -Dbench.firstQueryWarmUpRounds=N}.
     */
    static final int WARM_UP_ROUNDS = Integer.getInteger("bench.firstQueryWarmUpRounds", 1_000);
    static final int PAGE_TOKENS = 16;
    static final int[] PAGE_BYTES = {32 * 1024, 256 * 1024};

    private FirstQueryBench() {
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: FirstQueryBench ETCD_ENDPOINT WORK_DIR [rounds [page KiB,...]]");
            System.exit(2);
        }
        String etcd = args[0];
        Path work = Path.of(args[1]);
        int rounds = args.length > 2 ? Integer.parseInt(args[2]) : 20;
        int[] pageSizes = args.length > 3 ? java.util.Arrays.stream(args[3].split(",")).mapToInt(k -> Integer.parseInt(k) * 1024).toArray()
                : PAGE_BYTES;
        Files.createDirectories(work);
        Path token = work.resolve("cluster-token");
        Files.writeString(token, "first-query-bench-token-" + System.nanoTime());
        Files.setPosixFilePermissions(token, PosixFilePermissions.fromString("rw-------"));
        try (Manager a = Manager.start(work, etcd, "a", token);
             Manager b = Manager.start(work, etcd, "b", token);
             ClusterChannels channels = new ClusterChannels(ClusterSecurity.fromTokenFile("bench", token, Optional.empty()))) {
            Namespace ns = new Namespace("first-query-bench", "r1", "sha256:w", "sha256:t", "", "bf16", "nhd",
                    PAGE_TOKENS, 1, 0, 1, 0, 1);
            RecoveryContract contract = new RecoveryContract(PAGE_TOKENS, List.of(new StateGroup.Full(0)));
            try (OrbitKvClient onA = OrbitKvClient.connect(a.process().socket(), Duration.ofSeconds(30));
                 OrbitKvClient onB = OrbitKvClient.connect(b.process().socket(), Duration.ofSeconds(30))) {
                onA.register("bench-a", 1, ns, contract);
                onB.register("bench-b", 1, ns, contract);
                awaitMembers(channels, a, ns);
                System.out.printf("%n| page | pages | rounds | local DRAM hit on A p50 / p95 (ms) | first-query peer hit on B p50 / p95 (ms) | peer/local p50 | GB/s at p50 | CPU s/GB source A / requester B |%n");
                System.out.printf("|------|-------|--------|-------------------------------------|------------------------------------------|---------------|-------------|---------------------------------|%n");
                long seed = 1;
                for (int pageBytes : pageSizes) {
                    Histogram local = new Histogram(3);
                    Histogram peer = new Histogram(3);
                    long cpuA = 0;
                    long cpuB = 0;
                    for (int r = 0; r < rounds + WARM_UP_ROUNDS; r++) {
                        Prefix prefix = Prefix.of(ns, pageBytes, seed++);
                        List<PublishOutcome> sealed = onA.publish(prefix.toPublish());
                        if (sealed.stream().anyMatch(o -> o != PublishOutcome.SEALED)) {
                            throw new IllegalStateException("publish on A refused pages: " + sealed + "; A's status: " + a.status());
                        }
                        awaitCatalog(channels, a, prefix.keys);
                        long t0 = System.nanoTime();
                        Reply.QueryResult onLocal = onA.awaitSettled(onA.query(prefix.query(2L * r + 1, 0)));
                        long t1 = System.nanoTime();
                        check(onLocal, prefix, "local");
                        onA.release(onLocal.operationId());
                        long a0 = a.cpuNanos();
                        long b0 = b.cpuNanos();
                        long t2 = System.nanoTime();
                        Reply.QueryResult first = onB.query(prefix.query(2L * r + 2, 5_000));
                        Reply.QueryResult onPeer = onB.awaitSettled(first);
                        long t3 = System.nanoTime();
                        long a1 = a.cpuNanos();
                        long b1 = b.cpuNanos();
                        if (!onPeer.hit() || onPeer.boundaryTokens() != (long) PAGES * PAGE_TOKENS) {
                            System.err.println("A's peer metrics:\n" + a.peerMetrics() + "\nB's peer metrics:\n" + b.peerMetrics());
                        }
                        check(onPeer, prefix, "peer");
                        if (first.status() != QueryStatus.PENDING) throw new IllegalStateException("B answered FINAL at once");
                        verifyBytes(onB, onPeer, prefix);
                        onB.release(onPeer.operationId());
                        if (r < WARM_UP_ROUNDS) continue;
                        local.recordValue(Math.max(1, (t1 - t0) / 1_000));
                        peer.recordValue(Math.max(1, (t3 - t2) / 1_000));
                        cpuA += a1 - a0;
                        cpuB += b1 - b0;
                    }
                    double gbMoved = (double) rounds * PAGES * pageBytes / 1e9;
                    double localP50 = local.getValueAtPercentile(50) / 1e3;
                    double peerP50 = peer.getValueAtPercentile(50) / 1e3;
                    System.out.printf("| %d KiB | %d | %d | %.2f / %.2f | %.2f / %.2f | %.1f | %.2f | %.1f / %.1f |%n", pageBytes / 1024,
                            PAGES, rounds, localP50, local.getValueAtPercentile(95) / 1e3, peerP50,
                            peer.getValueAtPercentile(95) / 1e3, peerP50 / localP50,
                            (double) PAGES * pageBytes / (peerP50 / 1e3) / 1e9, cpuA / 1e9 / gbMoved, cpuB / 1e9 / gbMoved);
                }
            }
        }
    }

    private static void check(Reply.QueryResult r, Prefix prefix, String what) {
        if (!r.hit() || r.boundaryTokens() != (long) PAGES * PAGE_TOKENS) {
            throw new IllegalStateException(what + " QUERY was not a full hit: boundary " + r.boundaryTokens());
        }
    }

    /** Every page B serves is the published image (a benchmark that moved wrong bytes measured nothing). */
    private static void verifyBytes(OrbitKvClient client, Reply.QueryResult r, Prefix prefix) {
        for (Reply.Span span : r.groups().getFirst().spans()) {
            for (int j = 0; j < span.pages().size(); j++) {
                int i = (int) span.firstPage() + j;
                if (!(span.pages().get(j) instanceof Reply.Resident page)
                        || client.readLease(page.lease()).mismatch(MemorySegment.ofArray(prefix.images.get(i))) != -1) {
                    throw new IllegalStateException("page " + i + " differs from what A published");
                }
            }
        }
    }

    /** Waits until the shard owners (asked through A) list every key as held. */
    private static void awaitCatalog(ClusterChannels channels, Manager a, List<StateKey> keys) throws InterruptedException {
        LookupRequest.Builder request = LookupRequest.newBuilder();
        for (StateKey k : keys) request.addKeys(ByteString.copyFrom(k.toBytes()));
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (System.nanoTime() < deadline) {
            LookupReply reply = ClusterInfoGrpc.newBlockingStub(channels.channel(a.process().clusterEndpoint()))
                    .withDeadlineAfter(5, TimeUnit.SECONDS).locate(request.build());
            if (reply.getResultsList().stream().allMatch(k -> k.getResultCase() == KeyResult.ResultCase.PRESENT)) return;
            Thread.sleep(20);
        }
        throw new IllegalStateException("the catalog did not learn the prefix within 30 s");
    }

    /** Waits until A's view has both members (a lookup through A answers without NO_MEMBERSHIP). */
    private static void awaitMembers(ClusterChannels channels, Manager a, Namespace ns) throws InterruptedException {
        StateKey probe = StateKeys.forBlockHash(ns.digest(), 0, new byte[] {1});
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (System.nanoTime() < deadline) {
            LookupReply reply = ClusterInfoGrpc.newBlockingStub(channels.channel(a.process().clusterEndpoint())).withDeadlineAfter(5, TimeUnit.SECONDS)
                    .locate(LookupRequest.newBuilder().addKeys(ByteString.copyFrom(probe.toBytes())).build());
            KeyResult k = reply.getResults(0);
            if (k.getResultCase() == KeyResult.ResultCase.ABSENT) return;
            Thread.sleep(50);
        }
        throw new IllegalStateException("the cluster did not form within 30 s");
    }

    /** One round's prefix: random page images, their block hashes and keys. */
    private record Prefix(List<byte[]> hashes, List<byte[]> images, List<StateKey> keys) {
        static Prefix of(Namespace ns, int pageBytes, long seed) {
            SplittableRandom random = new SplittableRandom(seed);
            List<byte[]> hashes = new ArrayList<>();
            List<byte[]> images = new ArrayList<>();
            List<StateKey> keys = new ArrayList<>();
            for (int p = 0; p < PAGES; p++) {
                byte[] hash = new byte[16];
                random.nextBytes(hash);
                byte[] image = new byte[pageBytes];
                random.nextBytes(image);
                hashes.add(hash);
                images.add(image);
                keys.add(StateKeys.forBlockHash(ns.digest(), 0, hash));
            }
            return new Prefix(hashes, images, keys);
        }

        List<PageToPublish> toPublish() {
            List<PageToPublish> out = new ArrayList<>();
            for (int p = 0; p < PAGES; p++) out.add(PageToPublish.ofBlockHash(0, hashes.get(p), MemorySegment.ofArray(images.get(p))));
            return out;
        }

        Request.Query query(long operationId, int peerWaitMillis) {
            return new Request.Query(operationId, 0, CompletionTarget.HOST_READY, (long) PAGES * PAGE_TOKENS + 1, 0, 0,
                    peerWaitMillis, List.of(new Request.QueryGroup(0, KeyForm.BLOCK_HASH, Hashes.of(hashes))));
        }
    }

    /** A Manager process, cluster member {@code node}, stopped with SIGTERM on close; its DRAM directory then removed. */
    private record Manager(ManagerProcess process, Path dram) implements AutoCloseable {
        /**
         * CPU time the Manager process has used so far (user + system, from /proc: 10 ms
         * granularity, so only sums over many rounds mean anything).
         */
        long cpuNanos() {
            return process.process().info().totalCpuDuration().map(java.time.Duration::toNanos).orElse(0L);
        }

        /** The Manager's peer-plane and catalog counters from {@code /metrics} (for a failure message). */
        String peerMetrics() {
            try {
                StringBuilder out = new StringBuilder();
                for (String line : process.metrics().split("\n")) {
                    if (!line.startsWith("#") && (line.contains("bulk") || line.contains("peer") || line.contains("reserv") || line.contains("dram") || line.contains("staging"))
                            && !line.endsWith(" 0.0")) {
                        out.append(line).append('\n');
                    }
                }
                return out.toString();
            } catch (RuntimeException e) {
                return "(no metrics: " + e + ")";
            }
        }

        /** The Manager's {@code /status} JSON (for a failure message). */
        String status() {
            try {
                return process.status();
            } catch (RuntimeException e) {
                return "(no status: " + e + ")";
            }
        }

        static Manager start(Path work, String etcd, String node, Path token) throws IOException {
            Path dir = work.resolve(node);
            Files.createDirectories(dir);
            Path shm = Path.of("/dev/shm");
            Path dram = Files.isDirectory(shm) ? Files.createTempDirectory(shm, "orbitkv-bench-" + node + "-")
                    : ManagerProcess.dramDir(dir);
            List<String> jvm = new ArrayList<>(List.of("--sun-misc-unsafe-memory-access=allow", "-Xmx1g"));
            // profiling: e.g. -Dbench.managerJvmOptions=-XX:StartFlightRecording=filename=%s.jfr (%s: the node directory)
            for (String o : System.getProperty("bench.managerJvmOptions", "").split(" ")) {
                if (!o.isBlank()) jvm.add(o.replace("%s", dir.resolve(node).toString()));
            }
            List<String> extra = new ArrayList<>();
            for (String o : System.getProperty("bench.managerArgs", "").split(" ")) {
                if (!o.isBlank()) extra.add(o); // e.g. -Dbench.managerArgs="--set ssdPolicy=on-evict"
            }
            ManagerProcess process = ManagerProcess.over(dir).jvm(jvm).dramDir(dram)
                    .options("--dram-bytes", "1g", "--ssd-bytes", "256m", "--set", "stagingBytes=192m",
                            "--etcd", etcd, "--node-id", node, "--cluster-id", "bench", "--cluster-token-file", token.toString(),
                            "--cluster-listen", "127.0.0.1:0")
                    .options(extra).start();
            return new Manager(process, dram);
        }

        @Override
        public void close() throws IOException {
            process.close();
            if (!Files.isDirectory(dram)) return; // the Manager removes its DRAM directory when empty
            try (var files = Files.list(dram)) {
                for (Path f : files.toList()) Files.deleteIfExists(f);
            }
            Files.deleteIfExists(dram);
        }
    }
}
