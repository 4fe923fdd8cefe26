package io.orbitkv.bench.peer;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.namespace.NamespaceTable;
import io.orbitkv.core.peer.MemberView;
import io.orbitkv.core.peer.NodeIncarnation;
import io.orbitkv.core.peer.PeerEndpoint;
import io.orbitkv.core.peer.PeerReader;
import io.orbitkv.core.peer.PeerSource;
import io.orbitkv.core.peer.ReleaseRetrier;
import io.orbitkv.core.peer.TicketTable;
import io.orbitkv.core.storage.TieredStore;
import io.orbitkv.server.cluster.ClusterChannels;
import io.orbitkv.server.cluster.ClusterSecurity;
import io.orbitkv.server.peer.GrpcPayloadTransport;
import io.orbitkv.server.peer.bulk.BulkLimits;
import io.orbitkv.server.peer.bulk.BulkPayloadTransport;
import io.orbitkv.server.peer.bulk.BulkServer;

import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Comparator;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * One cell of {@link PeerReadBench}'s bulk column, repeated, with nothing else in the JVM: the
 * target of a profiler (attach one after the first round; the first rounds carry the JIT). Same
 * stores, pages, limits and read loop as the table's cell; prints each round's GB/s and CPU s/GB.
 *
 * <p>Run: {@code java -cp orbitkv-bench.jar io.orbitkv.bench.peer.BulkPathRun <page index 0|1>
 * <concurrency | batch> [seconds per round] [rounds]}.
 */
public final class BulkPathRun {

    private BulkPathRun() {
    }

    public static void main(String[] args) throws Exception {
        int sizeIndex = Integer.parseInt(args[0]);
        boolean batch = args[1].equals("batch");
        int conc = batch ? 1 : Integer.parseInt(args[1]);
        double seconds = args.length > 2 ? Double.parseDouble(args[2]) : 2.5;
        int rounds = args.length > 3 ? Integer.parseInt(args[3]) : 4;
        Path dir = Files.createTempDirectory(Path.of("/dev/shm"), "orbitkv-bulk-path");
        MemberView members = new MemberView() {
            @Override
            public boolean validForRemoteWork() {
                return true;
            }

            @Override
            public Optional<NodeIncarnation> live(String nodeId) {
                return Optional.of(nodeId.equals("a") ? PeerReadBench.A : PeerReadBench.B);
            }
        };
        ClusterSecurity security = new ClusterSecurity("bench", "bench-token-0123456789".getBytes(StandardCharsets.UTF_8),
                Optional.empty());
        try (TieredStore source = PeerReadBench.store(dir, "a"); TieredStore requester = PeerReadBench.store(dir, "b")) {
            NamespaceTable ns = new NamespaceTable(4);
            ns.register(PeerReadBench.NS, PeerReadBench.DIGEST);
            PeerSource peerSource = new PeerSource(PeerReadBench.A, source, ns, members,
                    new TicketTable(256, TimeUnit.SECONDS.toNanos(30)), System::nanoTime);
            List<PeerReadBench.Page> set = PeerReadBench.put(source, PeerReadBench.SIZES[sizeIndex]);
            try (BulkServer server = BulkServer.start(new InetSocketAddress("127.0.0.1", 0), peerSource, security,
                    BulkLimits.defaults(), new SimpleMeterRegistry());
                 ClusterChannels channels = new ClusterChannels(security)) {
                // no gRPC server: every page goes over the data plane (the control transport is never called)
                PeerEndpoint endpoint = new PeerEndpoint(PeerReadBench.A, "127.0.0.1:1");
                GrpcPayloadTransport control = new GrpcPayloadTransport(channels, Duration.ofSeconds(5), Duration.ofSeconds(30));
                ReleaseRetrier releases = new ReleaseRetrier(control, 1024, 4, TimeUnit.MILLISECONDS.toNanos(50),
                        TimeUnit.SECONDS.toNanos(1));
                try (BulkPayloadTransport bulk = new BulkPayloadTransport(control,
                        src -> CompletableFuture.completedFuture(Optional.of(server.address())), security, BulkLimits.defaults(),
                        new SimpleMeterRegistry())) {
                    PeerReader reader = new PeerReader(PeerReadBench.B, requester.dram(), members, bulk, releases, System::nanoTime);
                    for (int round = 0; round < rounds; round++) {
                        PeerReadBench.Rate r = PeerReadBench.measure(conc, seconds, (t, i) -> batch
                                ? PeerReadBench.readBatch(reader, requester, endpoint, source, set)
                                : PeerReadBench.readOne(reader, requester, endpoint, source, set.get(i % set.size())));
                        System.out.printf("round %d: %d KiB %s: %.2f GB/s, CPU s/GB source / requester %s%n", round,
                                PeerReadBench.SIZES[sizeIndex] / 1024, batch ? "batch " + PeerReadBench.BATCH : "conc " + conc,
                                r.gbs(), r.cpu());
                    }
                }
            }
        } finally {
            try (var files = Files.walk(dir)) {
                files.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
    }
}
