package io.orbitkv.server.daemon;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.PublishOutcome;
import io.orbitkv.server.cluster.ClusterChannels;
import io.orbitkv.server.cluster.ClusterSecurity;
import io.orbitkv.server.daemon.PeerProcessTest.Prefix;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.testkit.EtcdServer;
import io.orbitkv.testkit.ManagerProcess;
import io.orbitkv.testkit.NetnsHosts;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicLong;

/**
 * etcd on host 0 and {@code n} clustered Managers on hosts 1..n of a {@link NetnsHosts}, every
 * listener on its host's address, with one registered engine client per Manager (on its UNIX
 * socket, which every host shares): the fixture of the network-namespace cluster tests.
 * Manager {@code i} (0-based) is node {@code "m" + i} on host {@code i + 1}.
 *
 * <p>Owns the hosts, etcd, the Managers and the clients; {@link #close()} stops them all and
 * deletes the hosts. Thread model: confined to the test thread.
 */
final class NetnsCluster implements AutoCloseable {

    static final Namespace NAMESPACE = new Namespace("netns", "r1", "sha256:w", "sha256:t", "", "bf16", "nhd",
            PeerProcessTest.PAGE_TOKENS, 1, 0, 1, 0, 1);
    private static final RecoveryContract CONTRACT =
            new RecoveryContract(PeerProcessTest.PAGE_TOKENS, List.of(new StateGroup.Full(0)));

    private final Path dir;
    private final NetnsHosts net;
    private final Path token;
    private final EtcdServer etcd;
    private final ClusterChannels channels;
    private final ManagerProcess[] managers;
    private final OrbitKvClient[] clients;
    private final AtomicLong operations = new AtomicLong();

    private NetnsCluster(Path dir, NetnsHosts net, Path token, EtcdServer etcd, ClusterChannels channels, int n) {
        this.dir = dir;
        this.net = net;
        this.token = token;
        this.etcd = etcd;
        this.channels = channels;
        this.managers = new ManagerProcess[n];
        this.clients = new OrbitKvClient[n];
    }

    /** Starts etcd and {@code n} Managers and waits until every view holds all of them. */
    static NetnsCluster start(Path dir, int n) throws Exception {
        NetnsHosts net = NetnsHosts.create(n + 1);
        NetnsCluster cluster = null;
        try {
            Path token = Managers.clusterToken(dir);
            EtcdServer etcd = EtcdServer.start(dir.resolve("etcd"), net.address(0), net.prefix(0));
            ClusterChannels channels = new ClusterChannels(ClusterSecurity.fromTokenFile("test", token, Optional.empty()));
            cluster = new NetnsCluster(dir, net, token, etcd, channels, n);
            for (int i = 0; i < n; i++) cluster.startManager(i);
            cluster.awaitMembers(n);
            return cluster;
        } catch (Exception | Error e) {
            if (cluster != null) cluster.close();
            else net.close();
            throw e;
        }
    }

    NetnsHosts net() {
        return net;
    }

    EtcdServer etcd() {
        return etcd;
    }

    int size() {
        return managers.length;
    }

    ManagerProcess manager(int i) {
        return managers[i];
    }

    /** Host index of Manager {@code i}. */
    static int host(int i) {
        return i + 1;
    }

    /** The Managers now running. */
    List<ManagerProcess> live() {
        return Arrays.stream(managers).filter(m -> m != null && m.isAlive()).toList();
    }

    /** (Re)starts Manager {@code i} over its directory (a restart keeps its SSD and state). */
    ManagerProcess startManager(int i) throws IOException {
        String address = net.address(host(i));
        managers[i] = Managers.small(dir.resolve("m" + i)).prefix(net.prefix(host(i)))
                .options("--etcd", etcd.endpoint(), "--node-id", "m" + i, "--cluster-id", "test",
                        "--cluster-token-file", token.toString(), "--cluster-listen", address + ":0",
                        "--set", "clusterLeaseTtlMillis=2000", "--set", "clusterLookupTimeoutMillis=1000",
                        "--set", "httpHost=" + address)
                .start();
        return managers[i];
    }

    /** SIGKILLs Manager {@code i} (its client is dropped). */
    void kill(int i) throws Exception {
        dropClient(i);
        managers[i].kill();
    }

    /** The engine client registered on Manager {@code i}, connected on first use. */
    OrbitKvClient client(int i) throws IOException {
        if (clients[i] == null) {
            OrbitKvClient c = OrbitKvClient.connect(ManagerProcess.socket(managers[i].dir()), Duration.ofSeconds(20));
            c.register("engine-m" + i, 1, NAMESPACE, CONTRACT);
            clients[i] = c;
        }
        return clients[i];
    }

    void dropClient(int i) {
        if (clients[i] != null) clients[i].close();
        clients[i] = null;
    }

    /** Waits (30 s each) until every running Manager's view is valid with {@code live} members. */
    void awaitMembers(int live) {
        Managers.awaitMembers(live(), live);
    }

    /** Publishes {@code prefix} on Manager {@code source} and waits until a lookup through it names it the holder of every page. */
    void publish(int source, Prefix prefix) throws IOException {
        assertThat(client(source).publish(prefix.toPublish())).containsOnly(PublishOutcome.SEALED).hasSize(prefix.images().size());
        await("the catalog knows the prefix").atMost(Duration.ofSeconds(20)).until(() ->
                ClusterProcessTest.locate(channels, managers[source], prefix.keys()).stream()
                        .allMatch(l -> ClusterProcessTest.heldBy(l, "m" + source)));
    }

    /** A fresh prefix of {@code pages} 32 KiB pages. */
    static Prefix prefix(int pages, long seed) {
        return Prefix.of(NAMESPACE, pages, 32 * 1024, seed);
    }

    /** What one QUERY answered: pages restorable (each checked byte for byte) and how long it took to settle. */
    record Answer(int pages, long millis) {
    }

    /**
     * One QUERY on Manager {@code requester} for {@code prefix}, allowed to wait {@code peerWaitMillis}
     * for peers: every resident page is checked against the published bytes, then released.
     */
    Answer query(int requester, Prefix prefix, int peerWaitMillis) throws IOException {
        OrbitKvClient c = client(requester);
        long started = System.nanoTime();
        Reply.QueryResult r = c.awaitSettled(c.query(prefix.query(operations.incrementAndGet()).withPeerWaitMillis(peerWaitMillis)));
        long millis = (System.nanoTime() - started) / 1_000_000;
        PeerProcessTest.assertSameBytes(c, r, prefix);
        c.release(r.operationId());
        return new Answer((int) (r.boundaryTokens() / PeerProcessTest.PAGE_TOKENS), millis);
    }

    /** Leases, reservations, staging bytes, peer fetches and tickets back to 0 on every running Manager. */
    void awaitDrained() {
        PeerProcessTest.awaitDrained(live());
    }

    /** Every running Manager exits 0 on SIGTERM. */
    void stopAll() throws IOException {
        for (int i = 0; i < managers.length; i++) {
            dropClient(i);
            if (managers[i] != null && managers[i].isAlive()) managers[i].stop();
        }
    }

    @Override
    public void close() {
        List<Runnable> steps = new ArrayList<>();
        for (int i = 0; i < managers.length; i++) {
            int k = i;
            steps.add(() -> dropClient(k));
            steps.add(() -> { if (managers[k] != null) managers[k].close(); });
        }
        steps.add(channels::close);
        steps.add(etcd::close);
        steps.add(net::close);
        for (Runnable step : steps) {
            try {
                step.run();
            } catch (RuntimeException e) {
                // best effort: the rest still closes
            }
        }
    }
}
