package io.orbitkv.bench.ttft;

import com.google.protobuf.ByteString;
import io.orbitkv.testkit.EtcdServer;
import io.orbitkv.engine.FullAttention;
import io.orbitkv.engine.ManagerLauncher;
import io.orbitkv.engine.OrbitKvPageStore;
import io.orbitkv.engine.RequestReport;
import io.orbitkv.server.cluster.ClusterChannels;
import io.orbitkv.server.cluster.ClusterSecurity;
import io.orbitkv.server.cluster.proto.ClusterInfoGrpc;
import io.orbitkv.server.cluster.proto.KeyResult;
import io.orbitkv.server.cluster.proto.LookupReply;
import io.orbitkv.server.cluster.proto.LookupRequest;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.StateKeys;

import io.orbitkv.state.unix.FileTrees;
import io.orbitkv.testkit.ManagerProcess;
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;

/**
 * The cross-host arm: every request lands on a host whose Manager never saw its prefix, and the
 * prefix lives on another host's Manager.
 *
 * <p>Owns a real etcd, host A's Manager ({@code host-a}, a cluster member that stays up, with
 * the store the engine publishes through there) and host B's Manager: a new member
 * ({@code host-b-N}, an empty directory) started before every request and stopped after it.
 * Thread model: confined to the benchmark thread.
 *
 * <p>Per request, untimed: B starts, both membership views reach two members, and a catalog
 * lookup through A answers every page key of the prompt and of the primer as present or absent (none unknown: the
 * shard owners, B among them, have caught up with A's residency); then B serves one request for
 * the warm-up's first prompt, whose pages only A holds, so the new JVM has run its query and
 * peer-fetch paths. Timed: the request on B, its first QUERY for these pages. Untimed again:
 * the same prompt on A, which publishes the turn's pages there, so the next turn's prefix is
 * again only on A; the arm's history takes A's answer, whose pages A published.
 *
 * <p>Design note: a fresh B per request is what "never saw the prefix" means for a multi-turn
 * workload (a B that stayed up would hold the previous turn's pages locally), at the price of a
 * Manager start per request (1-3 s on 2 shared cores), outside the timed interval as the SSD
 * arm's restarts are. A new node id each time avoids the incarnation a reused one would carry.
 * The timed request gets a store of its own (the primer has another), so its QUERY carries the
 * 2 s peer wait of an engine that has not measured its prefill rate yet ({@code PeerWait}). A
 * measured rate bounds the wait by the recompute time, which on the CI model is shorter than a
 * transfer: with A's rate (llama.cpp about 50,000 tokens/s, a 3 ms bound) all 4 llama.cpp requests
 * of a quick run recomputed, and with the rate the primer's 8-token prefill trained, 3 of 4
 * llama.cpp and 1 of 4 Jlama requests did (right choices there, but they time no transfer).
 */
final class CrossHostArm implements AutoCloseable {

    private static final Duration CONVERGE = Duration.ofSeconds(30);

    private final TtftEngine engine;
    private final Path dir;
    private final EtcdServer etcd;
    private final Path token;
    private final ManagerProcess hostA;
    private final OrbitKvPageStore onA;
    private final ClusterChannels channels;
    private int hostsB;
    private long missedPrimers;
    /** The first prompt A served (a warm-up prompt), which primes each new B; empty until then. */
    private int[] primer = new int[0];

    private CrossHostArm(TtftEngine engine, Path dir, EtcdServer etcd, Path token, ManagerProcess hostA,
                         OrbitKvPageStore onA, ClusterChannels channels) {
        this.engine = engine;
        this.dir = dir;
        this.etcd = etcd;
        this.token = token;
        this.hostA = hostA;
        this.onA = onA;
        this.channels = channels;
    }

    /** Starts etcd and host A under {@code dir}; fails when etcd is not installed. */
    static CrossHostArm start(TtftEngine engine, Path dir) throws IOException, InterruptedException {
        Files.createDirectories(dir);
        Path token = ManagerLauncher.Cluster.writeToken(dir.resolve("cluster.token"));
        EtcdServer etcd = EtcdServer.start(dir.resolve("etcd"));
        ManagerProcess a = null;
        OrbitKvPageStore store = null;
        try {
            a = ManagerLauncher.start(dir.resolve("host-a"), engine.pageBytes(),
                    new ManagerLauncher.Cluster(etcd.endpoint(), "host-a", token));
            store = OrbitKvPageStore.connect(a.socket(), "prefill-a", 1, engine.namespace());
            ClusterChannels channels = new ClusterChannels(
                    ClusterSecurity.fromTokenFile(ManagerLauncher.Cluster.CLUSTER_ID, token, Optional.empty()));
            return new CrossHostArm(engine, dir, etcd, token, a, store, channels);
        } catch (IOException | RuntimeException e) {
            if (store != null) store.close();
            if (a != null) a.close();
            etcd.close();
            throw e;
        }
    }

    /** What one request produced: the timed report from B, and A's answer for the arm's history. */
    record Served(RequestReport onB, int[] answerOnA) {
    }

    /** Serves {@code prompt} on a new host B (timed), then on host A (untimed); see the class comment. */
    Served serve(int[] prompt, int answerTokens) throws IOException, InterruptedException {
        Path bDir = dir.resolve("host-b-" + (++hostsB));
        RequestReport onB;
        try (ManagerProcess b = ManagerLauncher.start(bDir, engine.pageBytes(),
                new ManagerLauncher.Cluster(etcd.endpoint(), "host-b-" + hostsB, token))) {
            awaitConverged(b, prompt);
            if (primer.length > 0) {
                try (OrbitKvPageStore store = OrbitKvPageStore.connect(b.socket(), "primer-b", 1, engine.namespace())) {
                    if (engine.runner(engine.namespace(), store).run(primer, 1, System.nanoTime()).restoredTokens() == 0) {
                        missedPrimers++;
                    }
                }
            }
            try (OrbitKvPageStore store = OrbitKvPageStore.connect(b.socket(), "decode-b", 1, engine.namespace())) {
                onB = engine.runner(engine.namespace(), store).run(prompt, answerTokens, System.nanoTime());
            }
            int exit = b.terminate();
            if (exit != 0) throw new IOException("host B's Manager exited " + exit + ": " + b.stderr());
        } finally {
            FileTrees.delete(bDir);
        }
        RequestReport onAReport = engine.runner(engine.namespace(), onA).run(prompt, answerTokens, System.nanoTime());
        if (primer.length == 0) primer = prompt;
        return new Served(onB, onAReport.generated());
    }

    /** Host B Managers started so far. */
    int hostsStarted() {
        return hostsB;
    }

    /** Primer requests on a new B that restored nothing from A (the catalog or peer path was not ready). */
    long missedPrimers() {
        return missedPrimers;
    }

    private void awaitConverged(ManagerProcess b, int[] prompt) throws IOException, InterruptedException {
        for (ManagerProcess m : List.of(hostA, b)) {
            if (!m.awaitView(2, CONVERGE)) throw new IOException("membership did not reach 2 members: " + m.stderr());
        }
        LookupRequest.Builder request = LookupRequest.newBuilder();
        for (int[] p : List.of(prompt, primer)) {
            for (StateKey k : pageKeys(p)) request.addKeys(ByteString.copyFrom(k.toBytes()));
        }
        if (request.getKeysCount() == 0) return;
        long deadline = System.nanoTime() + CONVERGE.toNanos();
        while (true) {
            LookupReply reply = ClusterInfoGrpc.newBlockingStub(channels.channel(hostA.clusterEndpoint()))
                    .withDeadlineAfter(5, TimeUnit.SECONDS).locate(request.build());
            if (reply.getResultsList().stream().noneMatch(r -> r.getResultCase() == KeyResult.ResultCase.UNKNOWN)) return;
            if (System.nanoTime() > deadline) throw new IOException("the catalog did not catch up with host A within " + CONVERGE);
            Thread.sleep(20);
        }
    }

    /** The keys of {@code prompt}'s whole pages. */
    private List<StateKey> pageKeys(int[] prompt) {
        int pages = Math.max(0, prompt.length - 1) / engine.pageTokens();
        return StateKeys.forTokens(engine.namespace().digest(), FullAttention.GROUP,
                Arrays.copyOf(prompt, pages * engine.pageTokens()), engine.pageTokens(), new byte[0]);
    }

    @Override
    public void close() {
        channels.close();
        onA.close();
        hostA.close();
        etcd.close();
    }
}
