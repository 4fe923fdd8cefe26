package io.orbitkv.bench.peer;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.catalog.CatalogLookups;
import io.orbitkv.core.catalog.KeyLocation;
import io.orbitkv.core.catalog.Member;
import io.orbitkv.core.catalog.MembershipView;
import io.orbitkv.core.catalog.PushBatch;
import io.orbitkv.core.catalog.Rendezvous;
import io.orbitkv.core.catalog.ShardState;
import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.server.cluster.CatalogService;
import io.orbitkv.server.cluster.ClusterChannels;
import io.orbitkv.server.cluster.ClusterRpcServer;
import io.orbitkv.server.cluster.ClusterSecurity;
import io.orbitkv.server.cluster.GrpcCatalogTransport;
import io.orbitkv.state.StateKey;

import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.SplittableRandom;

/**
 * Discovery latency: one catalog lookup of {@value #KEYS} keys on a 3-member
 * cluster, i.e. three shard owners each behind its own authenticated {@link ClusterRpcServer} on
 * loopback, the requester's {@link CatalogLookups} over {@link GrpcCatalogTransport} asking all
 * owners of the batch in parallel. Every key is held (each owner has complete coverage: all three
 * sources sent their snapshot), and the positive candidate cache is cleared before each lookup,
 * so every iteration pays the RPCs. Prints p50/p99/max over the measured iterations.
 *
 * <p>Owns its servers and channels for the run. Single-threaded driver; the owners answer on their
 * servers' threads. Design note: in-process owners rather than 3 Manager processes, so the number
 * is the catalog path (fan-out, protobuf of 1,024 × 32-byte keys, shard lookup, merge) without
 * etcd or process start-up; loopback TCP and the real auth interceptor are kept.
 */
public final class DiscoveryBench {

    /** Keys per lookup. */
    static final int KEYS = 1_024;
    /** Keys each source holds (the catalog's size during the run). */
    static final int HELD_PER_SOURCE = 20_000;
    /**
     * Untimed lookups first. With 400 (a fifth of the default run, the earlier rule) C2 was still
     * compiling through the timed lookups: 2,000 timed lookups after 400 measured p50 1.78–1.86 ms
     * (p99 6.7–6.8), after 4,000 1.13–1.31 ms (p99 4.1–4.4), alternated (2026-12-06). Override
     * with {@code -Dbench.discoveryWarmUpLookups=N}.
     */
    static final int WARM_UP_LOOKUPS = Integer.getInteger("bench.discoveryWarmUpLookups", 4_000);

    private DiscoveryBench() {}

    public static void main(String[] args) throws Exception {
        int iterations = args.length > 0 ? Integer.parseInt(args[0]) : 2_000;
        ClusterSecurity security = new ClusterSecurity("bench", "bench-token-0123456789".getBytes(StandardCharsets.UTF_8),
                Optional.empty());
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        List<String> ids = List.of("a", "b", "c");
        List<ShardState> shards = new ArrayList<>();
        List<ClusterRpcServer> servers = new ArrayList<>();
        List<Member> live = new ArrayList<>();
        try (ClusterChannels channels = new ClusterChannels(security)) {
            for (String id : ids) {
                ShardState shard = new ShardState(id, 1, new ShardState.Budgets(8, 1_000_000), new SimpleMeterRegistry());
                ClusterRpcServer server = ClusterRpcServer.start(new InetSocketAddress("127.0.0.1", 0), security,
                        List.of(new CatalogService(shard)));
                shards.add(shard);
                servers.add(server);
                live.add(new Member(id, "127.0.0.1:" + server.address().getPort(), 1));
            }
            MembershipView view = MembershipView.valid(live, 1);
            List<List<StateKey>> held = new ArrayList<>();
            SplittableRandom random = new SplittableRandom(42);
            for (int s = 0; s < ids.size(); s++) {
                List<StateKey> keys = new ArrayList<>();
                for (int i = 0; i < HELD_PER_SOURCE; i++) keys.add(key(random));
                held.add(keys);
                for (int o = 0; o < ids.size(); o++) {
                    List<ResidencyEvent> deltas = new ArrayList<>();
                    long seq = 1;
                    for (StateKey k : keys) {
                        if (Rendezvous.owner(k, live).nodeId().equals(ids.get(o))) {
                            deltas.add(new ResidencyEvent(seq++, k, ResidencyEvent.Medium.DRAM, ResidencyEvent.Kind.ADDED, 1));
                        }
                    }
                    PushBatch.Reply r = shards.get(o).apply(new PushBatch(ids.get(s), 1, 1, 1, true, true, view.digest(), deltas));
                    if (r.result() != PushBatch.Result.APPLIED) throw new IllegalStateException("snapshot refused: " + r);
                }
            }
            CatalogLookups lookups = new CatalogLookups(() -> view, new GrpcCatalogTransport(channels),
                    Duration.ofSeconds(2), 65_536, registry);
            long[] nanos = new long[iterations];
            for (int i = -WARM_UP_LOOKUPS; i < iterations; i++) {
                List<StateKey> batch = new ArrayList<>(KEYS);
                for (int k = 0; k < KEYS; k++) {
                    List<StateKey> from = held.get(random.nextInt(held.size()));
                    batch.add(from.get(random.nextInt(from.size())));
                }
                lookups.invalidateCandidates();
                long t0 = System.nanoTime();
                Map<StateKey, KeyLocation> answers = lookups.lookup(batch, Duration.ofSeconds(2)).join();
                long t = System.nanoTime() - t0;
                long present = answers.values().stream().filter(l -> l instanceof KeyLocation.Present).count();
                if (present != answers.size()) throw new IllegalStateException("not every key found: " + present + "/" + answers.size());
                if (i >= 0) nanos[i] = t;
            }
            Arrays.sort(nanos);
            System.out.printf("| keys per lookup | shard owners | iterations | p50 ms | p99 ms | max ms |%n");
            System.out.printf("|---|---|---|---|---|---|%n");
            System.out.printf("| %d | %d | %d | %.3f | %.3f | %.3f |%n", KEYS, ids.size(), iterations,
                    nanos[(int) (iterations * 0.50)] / 1e6, nanos[(int) Math.min(iterations - 1, iterations * 0.99)] / 1e6,
                    nanos[iterations - 1] / 1e6);
        } finally {
            for (ClusterRpcServer s : servers) s.close();
        }
    }

    private static StateKey key(SplittableRandom random) {
        ByteBuffer b = ByteBuffer.allocate(StateKey.BYTES);
        for (int w = 0; w < 4; w++) b.putLong(random.nextLong());
        return StateKey.ofBytes(b.array());
    }
}
