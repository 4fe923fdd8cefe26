package io.orbitkv.bench.peer;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.catalog.CatalogLookups;
import io.orbitkv.core.catalog.CatalogPublisher;
import io.orbitkv.core.catalog.KeyLocation;
import io.orbitkv.core.catalog.Member;
import io.orbitkv.core.catalog.MembershipView;
import io.orbitkv.core.catalog.ShardState;
import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.server.cluster.CatalogService;
import io.orbitkv.server.cluster.ClusterChannels;
import io.orbitkv.server.cluster.ClusterRpcServer;
import io.orbitkv.server.cluster.ClusterSecurity;
import io.orbitkv.server.cluster.GrpcCatalogTransport;
import io.orbitkv.state.StateKey;
import java.lang.management.ManagementFactory;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.SplittableRandom;
import java.util.concurrent.atomic.AtomicReference;

/**
 * The replicated catalog at its budget: one source holding {@code keys} pages (1,000,000 by
 * default) streams them to 3 shard owners with R = 2, each owner behind its own authenticated
 * {@link ClusterRpcServer} on loopback (real codec, gRPC and auth); then one owner leaves and
 * another member joins. Prints heap per key of the source's mirror and of the owners' tables, RSS,
 * the snapshot time, lookup p50/p99 (64 and 1,024 keys per lookup, candidate cache cleared
 * each time), and each handoff's time, moved keys and estimated bytes, with every held key sampled
 * after each publisher round during the handoff (Present / Unknown / Absent counts).
 *
 * <p>Single-threaded driver (the publisher's own rounds, as the daemon's catalog thread runs
 * them); the owners answer on their servers' threads. Design note: in one JVM, so heap per key is
 * read from the heap after full collections (owners' tables and the source's mirror in one
 * process; a Manager holds its own mirror and its share of the others' tables); no etcd, so view
 * changes are instantaneous on every node (skew between views is what the stale-placement path
 * covers, and is not measured here).
 */
public final class CatalogScaleBench {

    private CatalogScaleBench() {}

    public static void main(String[] args) throws Exception {
        int keys = args.length > 0 ? Integer.parseInt(args[0]) : 1_000_000;
        int iterations = args.length > 1 ? Integer.parseInt(args[1]) : 1_000;
        ClusterSecurity security = new ClusterSecurity("bench", "bench-token-0123456789".getBytes(StandardCharsets.UTF_8),
                Optional.empty());
        AtomicReference<MembershipView> current = new AtomicReference<>(MembershipView.initial());
        Map<String, ShardState> shards = new HashMap<>();
        List<ClusterRpcServer> servers = new ArrayList<>();
        Map<String, Member> members = new HashMap<>();
        try (ClusterChannels channels = new ClusterChannels(security)) {
            for (String id : List.of("a", "b", "c", "d")) {
                ShardState shard = new ShardState(id, 1, new ShardState.Budgets(8, 1_000_000), new SimpleMeterRegistry(), current::get);
                ClusterRpcServer server = ClusterRpcServer.start(new InetSocketAddress("127.0.0.1", 0), security,
                        List.of(new CatalogService(shard)));
                shards.put(id, shard);
                servers.add(server);
                members.put(id, new Member(id, "127.0.0.1:" + server.address().getPort(), 1));
            }
            GrpcCatalogTransport transport = new GrpcCatalogTransport(channels);
            long heap0 = usedHeap();
            long rss0 = rss();

            SplittableRandom random = new SplittableRandom(42);
            List<StateKey> held = new ArrayList<>(keys);
            for (int i = 0; i < keys; i++) held.add(key(random));
            long heapKeys = usedHeap();
            // a stream that starts past a gap: the publisher rebuilds its mirror from the tiers' key list
            ResidencyStream stream = new ResidencyStream(16);
            for (int i = 0; i < 17; i++) stream.append(held.get(i), ResidencyEvent.Medium.DRAM, ResidencyEvent.Kind.ADDED, 0);
            SimpleMeterRegistry registry = new SimpleMeterRegistry();
            CatalogPublisher publisher = new CatalogPublisher("a", 1, stream,
                    m -> m == ResidencyEvent.Medium.DRAM ? held : List.of(), transport, CatalogPublisher.Budgets.defaults(), 2,
                    registry, new SplittableRandom(1));
            publisher.pump(current.get(), System.nanoTime()); // invalid view: reads only
            if (publisher.mirroredKeys() != keys) throw new IllegalStateException("mirror holds " + publisher.mirroredKeys());
            long heapMirror = usedHeap();

            MembershipView three = MembershipView.valid(List.of(members.get("a"), members.get("b"), members.get("c")), 1);
            current.set(three);
            // connect every channel first: the first call's connection set-up is not the snapshot's cost
            for (Member m : members.values()) transport.lookup(m, List.of(held.getFirst()), three.live(), three.digest(), 10_000).join();
            long t0 = System.nanoTime();
            int rounds = 0;
            long ownerEntries = 0;
            while (!publisher.pump(three, System.nanoTime()) || ownerEntries != 2L * keys) {
                rounds++;
                ownerEntries = 0;
                for (ShardState s : shards.values()) ownerEntries += s.keyCount();
                if (Duration.ofNanos(System.nanoTime() - t0).toSeconds() > 120) throw new IllegalStateException("snapshot not done in 120 s");
            }
            long snapshotNanos = System.nanoTime() - t0;
            double failures = registry.get("orbitkv_catalog_push_failures").counter().count();
            long heapOwners = usedHeap();
            long rss1 = rss();

            System.out.printf("keys per source: %,d, R = 2, owners a b c (a is also the source)%n", keys);
            System.out.printf("| measure | value |%n|---|---|%n");
            System.out.printf("| heap per key, source mirror (beyond the key objects) | %.0f B |%n", (heapMirror - heapKeys) / (double) keys);
            System.out.printf("| heap per key, the key objects (32-byte StateKey + list slot) | %.0f B |%n", (heapKeys - heap0) / (double) keys);
            System.out.printf("| heap per owner entry (one key of one source on one owner) | %.0f B |%n", (heapOwners - heapMirror) / (double) ownerEntries);
            System.out.printf("| heap per key, all of it (keys, mirror, 2 owner entries) | %.0f B |%n", (heapOwners - heap0) / (double) keys);
            System.out.printf("| RSS growth per key (JVM, whole run so far) | %.0f B |%n", (rss1 - rss0) / (double) keys);
            System.out.printf("| snapshot to 3 owners (%,d deltas, %d rounds, %.0f failed pushes) | %.2f s |%n", ownerEntries, rounds,
                    failures, snapshotNanos / 1e9);

            CatalogLookups lookups = new CatalogLookups(current::get, transport, Duration.ofSeconds(2), 65_536, 2, 256, registry);
            for (int batch : new int[] {64, 1_024}) {
                long[] nanos = new long[iterations];
                for (int i = -iterations / 5; i < iterations; i++) {
                    List<StateKey> ask = new ArrayList<>(batch);
                    for (int k = 0; k < batch; k++) ask.add(held.get(random.nextInt(keys)));
                    lookups.invalidateCandidates();
                    long s = System.nanoTime();
                    Map<StateKey, KeyLocation> got = lookups.lookup(ask, Duration.ofSeconds(2)).join();
                    long t = System.nanoTime() - s;
                    if (!got.values().stream().allMatch(l -> l instanceof KeyLocation.Present)) throw new IllegalStateException("a key not found");
                    if (i >= 0) nanos[i] = t;
                }
                Arrays.sort(nanos);
                System.out.printf("| lookup of %,d keys, p50 / p99 (%d lookups) | %.2f / %.2f ms |%n", batch, iterations,
                        nanos[iterations / 2] / 1e6, nanos[(int) (iterations * 0.99)] / 1e6);
            }

            handoff("c leaves", MembershipView.valid(List.of(members.get("a"), members.get("b")), 2), current, publisher,
                    lookups, held, random, registry, shards);
            handoff("d joins", MembershipView.valid(List.of(members.get("a"), members.get("b"), members.get("d")), 3), current,
                    publisher, lookups, held, random, registry, shards);
        } finally {
            for (ClusterRpcServer s : servers) s.close();
        }
    }

    /** Moves to {@code next}, pumps until idle and samples 256 held keys after each round. */
    private static void handoff(String what, MembershipView next, AtomicReference<MembershipView> current,
                                CatalogPublisher publisher, CatalogLookups lookups, List<StateKey> held,
                                SplittableRandom random, SimpleMeterRegistry registry, Map<String, ShardState> shards) {
        double deltas0 = registry.get("orbitkv_catalog_handoff_deltas").counter().count();
        double bytes0 = registry.get("orbitkv_catalog_resync_bytes").counter().count();
        double snapshots0 = registry.get("orbitkv_catalog_snapshots_sent").counter().count();
        current.set(next);
        Map<String, Integer> answers = new java.util.TreeMap<>();
        long t0 = System.nanoTime();
        int rounds = 0;
        boolean idle = false;
        while (!idle) {
            long entries = 0;
            for (Member m : next.live()) entries += shards.get(m.nodeId()).keyCount();
            idle = publisher.pump(next, System.nanoTime()) && entries == 2L * held.size();
            rounds++;
            List<StateKey> ask = new ArrayList<>(256);
            for (int k = 0; k < 256; k++) ask.add(held.get(random.nextInt(held.size())));
            lookups.invalidateCandidates();
            for (KeyLocation l : lookups.lookup(ask, Duration.ofSeconds(2)).join().values()) {
                String name = switch (l) {
                    case KeyLocation.Present p -> "Present";
                    case KeyLocation.Absent a -> "Absent";
                    case KeyLocation.Unknown u -> "Unknown(" + u.reason() + ")";
                };
                answers.merge(name, 1, Integer::sum);
            }
        }
        long nanos = System.nanoTime() - t0;
        System.out.printf("| handoff, %s: %.2f s, %d rounds, %,.0f keys moved, %.1f MB (estimated), %.0f snapshots | samples: %s |%n",
                what, nanos / 1e9, rounds, registry.get("orbitkv_catalog_handoff_deltas").counter().count() - deltas0,
                (registry.get("orbitkv_catalog_resync_bytes").counter().count() - bytes0) / 1e6,
                registry.get("orbitkv_catalog_snapshots_sent").counter().count() - snapshots0, answers);
    }

    private static long usedHeap() throws InterruptedException {
        for (int i = 0; i < 3; i++) {
            System.gc();
            Thread.sleep(50);
        }
        return ManagementFactory.getMemoryMXBean().getHeapMemoryUsage().getUsed();
    }

    /** This process's resident set, bytes (0 where /proc is not there). */
    private static long rss() {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/self/status"))) {
                if (line.startsWith("VmRSS:")) return Long.parseLong(line.replaceAll("[^0-9]", "")) * 1024;
            }
        } catch (java.io.IOException e) {
            return 0;
        }
        return 0;
    }

    private static StateKey key(SplittableRandom random) {
        ByteBuffer b = ByteBuffer.allocate(StateKey.BYTES);
        for (int w = 0; w < 4; w++) b.putLong(random.nextLong());
        return StateKey.ofBytes(b.array());
    }
}
