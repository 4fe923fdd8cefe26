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
import io.orbitkv.testkit.ProcessTest;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A cluster on separate network stacks ({@link NetnsHosts}): etcd on host 0 and three Managers on
 * hosts 1–3, each reachable only over the bridge at its own address, engines on their Managers'
 * UNIX sockets. A prefix published on A is a remote hit on B's first QUERY across hosts; with A's
 * link cut (a pulled cable: A's connections hang, nothing is refused) B's QUERY for A's pages
 * settles within its peer wait as a miss, never a wrong byte, and the others' views drop A; once
 * the link is back, A rejoins and B's next QUERY hits A's pages again. Every lease, staging byte
 * and peer fetch is back to 0 at the end.
 */
@ProcessTest
class NetnsClusterProcessTest {

    private static final int PEER_WAIT_MILLIS = 2_000;

    @TempDir
    Path dir;

    @Test
    void remoteHitsCrossHostsAPulledCableCostsABoundedMissAndTheyResumeWhenItIsBack() throws Exception {
        try (NetnsHosts net = NetnsHosts.create(4)) {
            Path token = Managers.clusterToken(dir);
            ClusterSecurity security = ClusterSecurity.fromTokenFile("test", token, Optional.empty());
            List<ManagerProcess> all = new ArrayList<>();
            try (EtcdServer etcd = EtcdServer.start(dir.resolve("etcd"), net.address(0), net.prefix(0));
                 ClusterChannels channels = new ClusterChannels(security)) {
                try {
                    for (String id : List.of("a", "b", "c")) all.add(member(net, all.size() + 1, etcd, id, token));
                    ManagerProcess a = all.get(0);
                    ManagerProcess b = all.get(1);
                    Managers.awaitMembers(all, 3);
                    assertThat(a.clusterEndpoint()).as("A serves its cluster plane on its own host's address")
                            .startsWith(net.address(1) + ":");

                    Namespace ns = new Namespace("netns", "r1", "sha256:w", "sha256:t", "", "bf16", "nhd",
                            PeerProcessTest.PAGE_TOKENS, 1, 0, 1, 0, 1);
                    RecoveryContract contract = new RecoveryContract(PeerProcessTest.PAGE_TOKENS, List.of(new StateGroup.Full(0)));
                    try (OrbitKvClient onA = OrbitKvClient.connect(ManagerProcess.socket(a.dir()), Duration.ofSeconds(20));
                         OrbitKvClient onB = OrbitKvClient.connect(ManagerProcess.socket(b.dir()), Duration.ofSeconds(20))) {
                        onA.register("engine-a", 1, ns, contract);
                        onB.register("engine-b", 1, ns, contract);

                        Prefix first = Prefix.of(ns, 16, 48 * 1024, 31);
                        Prefix second = Prefix.of(ns, 12, 32 * 1024, 32);
                        publishAndAwaitCatalog(onA, channels, a, first);
                        publishAndAwaitCatalog(onA, channels, a, second);
                        Reply.QueryResult hit = onB.awaitSettled(onB.query(first.query(1).withPeerWaitMillis(5_000)));
                        assertThat(hit.boundaryTokens()).as("B's first QUERY hits A's prefix across hosts").isEqualTo(first.fullBoundary());
                        assertThat(PeerProcessTest.assertSameBytes(onB, hit, first)).isEqualTo(16);
                        onB.release(hit.operationId());

                        net.cut(1);
                        long started = System.nanoTime();
                        Reply.QueryResult cut = onB.awaitSettled(onB.query(second.query(2).withPeerWaitMillis(PEER_WAIT_MILLIS)));
                        long settledMillis = (System.nanoTime() - started) / 1_000_000;
                        assertThat(settledMillis).as("a QUERY for a cut host's pages settles within its peer wait (+ slack)")
                                .isLessThan(PEER_WAIT_MILLIS + 1_500);
                        assertThat(cut.boundaryTokens()).as("nothing of A's is served while A is unreachable").isZero();
                        onB.release(cut.operationId());
                        for (ManagerProcess m : all.subList(1, 3)) {
                            assertThat(m.awaitView(2, Duration.ofSeconds(20))).as("%s's view drops the cut host", m.dir()).isTrue();
                        }

                        net.heal(1);
                        long healed = System.nanoTime();
                        Managers.awaitMembers(all, 3);
                        await("B hits A's pages again once A is back").atMost(Duration.ofSeconds(30)).until(() -> {
                            Reply.QueryResult again = onB.awaitSettled(onB.query(second.query(3).withPeerWaitMillis(PEER_WAIT_MILLIS)));
                            boolean full = again.boundaryTokens() == second.fullBoundary();
                            if (full) assertThat(PeerProcessTest.assertSameBytes(onB, again, second)).isEqualTo(12);
                            onB.release(again.operationId());
                            return full;
                        });
                        System.out.printf("netns: cut host's QUERY settled in %d ms (peer wait %d ms); remote hits resumed %d ms after the link came back%n",
                                settledMillis, PEER_WAIT_MILLIS, (System.nanoTime() - healed) / 1_000_000);
                        PeerProcessTest.awaitDrained(all);
                    }
                    for (ManagerProcess m : all) assertThat(m.terminate()).as("exit status of " + m.dir()).isZero();
                } finally {
                    for (ManagerProcess m : all) m.close();
                }
            }
        }
    }

    /** Starts cluster member {@code id} on host {@code host}: every listener on that host's address. */
    private ManagerProcess member(NetnsHosts net, int host, EtcdServer etcd, String id, Path token) throws Exception {
        String address = net.address(host);
        return Managers.small(dir.resolve(id)).prefix(net.prefix(host))
                .options("--etcd", etcd.endpoint(), "--node-id", id, "--cluster-id", "test",
                        "--cluster-token-file", token.toString(), "--cluster-listen", address + ":0",
                        "--set", "clusterLeaseTtlMillis=2000", "--set", "clusterLookupTimeoutMillis=1000",
                        "--set", "httpHost=" + address)
                .start();
    }

    private static void publishAndAwaitCatalog(OrbitKvClient onA, ClusterChannels channels, ManagerProcess a, Prefix prefix) {
        assertThat(onA.publish(prefix.toPublish())).containsOnly(PublishOutcome.SEALED).hasSize(prefix.images().size());
        await("the catalog knows the prefix").atMost(Duration.ofSeconds(20)).until(() ->
                ClusterProcessTest.locate(channels, a, prefix.keys()).stream().allMatch(l -> ClusterProcessTest.heldBy(l, "a")));
    }
}
