package io.orbitkv.server.daemon;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.google.protobuf.ByteString;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.PageToPublish;
import io.orbitkv.client.PublishOutcome;
import io.orbitkv.server.cluster.ClusterChannels;
import io.orbitkv.testkit.EtcdServer;
import io.orbitkv.server.peer.proto.AuthorizeCall;
import io.orbitkv.server.peer.proto.AuthorizeReply;
import io.orbitkv.server.peer.proto.PageMedium;
import io.orbitkv.server.peer.proto.PeerReadGrpc;
import io.orbitkv.server.peer.proto.ReleaseCall;
import io.orbitkv.server.peer.proto.Requester;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.StateKey;
import io.orbitkv.testkit.ManagerProcess;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import io.orbitkv.testkit.ProcessTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Three Managers and one real etcd through the faults that used to degrade a cluster silently: a
 * fourth member with a wrong token (never live, every key still found, refusals counted); the
 * source of the pages paused past its lease TTL (its earlier keys are found again within
 * seconds, not Unknown for a minute); the source restarted (it serves its recovered SSD pages to
 * a peer before any engine registers their namespace); etcd gone before the stop (no revoke is
 * attempted, and the log says the lease is left to expire).
 */
@ProcessTest
class ClusterFaultsProcessTest {

    static final int PAGE_TOKENS = 16;
    static final int PAGES = 24;

    @TempDir
    Path dir;

    @Test
    void aWrongTokenMemberAPausedSourceAndARestartedSource() throws Exception {
        Path wrongToken = Files.writeString(dir.resolve("wrong-token"), "another-cluster-token-9876543210\n");
        Files.setPosixFilePermissions(wrongToken, PosixFilePermissions.fromString("rw-------"));
        try (LoopbackCluster cluster = LoopbackCluster.start(dir, "a", "b", "c")) {
            Path token = cluster.token();
            EtcdServer etcd = cluster.etcd();
            ClusterChannels channels = cluster.channels();
            ManagerProcess a = cluster.member(0);
            ManagerProcess b = cluster.member(1);
            ManagerProcess c = cluster.member(2);
            List<ManagerProcess> all = cluster.members();
            try {
                Namespace ns = new Namespace("faults-test", "r1", "sha256:w", "sha256:t", "", "bf16", "nhd", PAGE_TOKENS, 1, 0, 1, 0, 1);
                ChainPages published = ChainPages.of(ns, PAGES, 9_000);
                List<PageToPublish> pages = published.pages();
                List<StateKey> keys = published.keys();
                try (OrbitKvClient client = OrbitKvClient.connect(ManagerProcess.socket(a.dir()), Duration.ofSeconds(20))) {
                    client.register("engine-a", 1, ns, new RecoveryContract(PAGE_TOKENS, List.of(new StateGroup.Full(0))));
                    assertThat(client.publish(pages)).containsOnly(PublishOutcome.SEALED).hasSize(PAGES);
                }
                await("C finds A's pages").atMost(Duration.ofSeconds(20)).until(() ->
                        ClusterProcessTest.locate(channels, c, keys).stream().allMatch(l -> ClusterProcessTest.heldBy(l, "a")));

                // a member with a wrong token registers: it is never live, every key is still found
                ManagerProcess w = Managers.startMember(dir, etcd.endpoint(), "w", wrongToken);
                all.add(w);
                for (ManagerProcess m : List.of(a, b, c)) {
                    await("w unproven on " + m.dir()).atMost(Duration.ofSeconds(20)).until(() ->
                            m.metric("orbitkv_membership_unproven") == 1
                                    && m.metric("orbitkv_cluster_auth_failures_total{reason=\"bad_token\"") >= 1);
                }
                await("w refused on its side too").atMost(Duration.ofSeconds(20)).until(() ->
                        w.metric("orbitkv_cluster_auth_failures_total{reason=\"refused_by_peer\"") >= 1);
                assertThat(w.metric("orbitkv_membership_live")).as("w sees only itself").isEqualTo(1);
                for (ManagerProcess m : List.of(a, b, c)) assertThat(m.metric("orbitkv_membership_live")).isEqualTo(3);
                assertThat(ClusterProcessTest.locate(channels, c, keys)).as("no key handed to w")
                        .allMatch(l -> ClusterProcessTest.heldBy(l, "a"));
                // a push toward w would fail authentication and be logged naming w (pushes to b or c
                // may time out on a loaded machine, so the failure count alone does not tell)
                assertThat(a.stderr()).as("no push toward w").doesNotContain("catalog push to w#");
                assertThat(w.stderr()).contains("cluster authentication failure");
                assertThat(a.stderr()).contains("cluster authentication failure (bad_token)");
                assertThat(w.terminate()).isZero();
                all.remove(w);

                // A paused past its lease: owners drop it; after SIGCONT its earlier keys are found again at once
                signal(a, "STOP");
                try {
                    await("A's lease expired").atMost(Duration.ofSeconds(20)).until(() -> b.metric("orbitkv_membership_live") == 2);
                } finally {
                    signal(a, "CONT");
                }
                Managers.awaitMembers(all, 3);
                assertThat(a.metric("orbitkv_membership_registrations_total")).as("A registered again").isGreaterThanOrEqualTo(2);
                await("C finds A's earlier pages after A's pause").atMost(Duration.ofSeconds(10)).pollInterval(Duration.ofMillis(200))
                        .until(() -> ClusterProcessTest.locate(channels, c, keys).stream().allMatch(l -> ClusterProcessTest.heldBy(l, "a")));

                // A restarts: before any engine registers the namespace, it serves its SSD pages to B
                assertThat(a.terminate()).isZero();
                all.remove(a);
                a = Managers.startMember(dir, etcd.endpoint(), "a", token);
                all.add(a);
                Managers.awaitMembers(all, 3);
                ManagerProcess restarted = a;
                await("C finds the restarted A's recovered pages").atMost(Duration.ofSeconds(20)).until(() ->
                        ClusterProcessTest.locate(channels, c, keys).stream().allMatch(l -> ClusterProcessTest.heldBy(l, "a")));
                PeerReadGrpc.PeerReadBlockingStub toA = PeerReadGrpc.newBlockingStub(channels.channel(restarted.clusterEndpoint()));
                AuthorizeReply reply = toA.withDeadlineAfter(5, TimeUnit.SECONDS).authorize(AuthorizeCall.newBuilder()
                        .setRequester(Requester.newBuilder().setNodeId("b").setIncarnation(b.incarnation()))
                        .setSourceIncarnation(restarted.incarnation()).setKey(ByteString.copyFrom(keys.getFirst().toBytes()))
                        .setNamespaceDigest(ByteString.copyFrom(ns.digest())).setMedium(PageMedium.PAGE_SSD)
                        .setGeneration(0).setResidencySequence(1).build());
                assertThat(reply.hasGrant()).as("granted, not " + reply.getRejection()).isTrue();
                assertThat(toA.withDeadlineAfter(5, TimeUnit.SECONDS).release(ReleaseCall.newBuilder()
                        .setRequester(Requester.newBuilder().setNodeId("b").setIncarnation(b.incarnation()))
                        .setTicketId(reply.getGrant().getTicketId()).build()).getOutcome()).isEqualTo("FREED");

                // etcd gone: a stop attempts no revoke and says so
                etcd.stop();
                for (ManagerProcess m : all) {
                    await("view invalid on " + m.dir()).atMost(Duration.ofSeconds(20)).until(() -> m.metric("orbitkv_membership_valid") == 0);
                }
                for (ManagerProcess m : all) {
                    assertThat(m.terminate()).as("exit status of " + m.dir()).isZero();
                    assertThat(m.stderr()).contains("left the cluster (etcd unreachable: lease left to expire")
                            .doesNotContain("lease revoked");
                }
            } finally {
                for (ManagerProcess m : all) {
                    signal(m, "CONT");
                    m.close();
                }
            }
        }
    }

    static void signal(ManagerProcess m, String name) throws Exception {
        if (!m.process().isAlive()) return;
        new ProcessBuilder("kill", "-" + name, Long.toString(m.process().pid())).inheritIO().start().waitFor();
    }
}
