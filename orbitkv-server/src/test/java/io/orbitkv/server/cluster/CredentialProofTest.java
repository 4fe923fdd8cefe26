package io.orbitkv.server.cluster;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.catalog.Member;
import io.orbitkv.core.catalog.MembershipView;
import io.orbitkv.core.catalog.PushBatch;
import io.orbitkv.core.catalog.ShardState;
import io.orbitkv.server.membership.EtcdMembership;
import io.orbitkv.testkit.EtcdServer;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import io.orbitkv.core.log.UnexpectedErrors;
import io.orbitkv.testkit.ProcessTest;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The mutual credential proof against a real etcd: a member registered with a wrong token never
 * enters a correct member's view (so it never gets a rendezvous share), it sees none of them
 * either, and both sides count and log the refusals; a member that accepts the token but cannot
 * compute the proof is refused too.
 */
@ProcessTest
class CredentialProofTest {

    static final byte[] TOKEN = "proof-cluster-token-0123456789".getBytes(StandardCharsets.UTF_8);
    static final byte[] WRONG = "proof-cluster-token-9876543210".getBytes(StandardCharsets.UTF_8);

    @TempDir
    Path dir;

    final List<AutoCloseable> open = new ArrayList<>();

    @AfterEach
    void closeAll() throws Exception {
        for (AutoCloseable c : open.reversed()) c.close();
    }

    /** One member: cluster server with ClusterInfo (proof answers), channels, membership with proofs. */
    final class Node {
        final SimpleMeterRegistry registry = new SimpleMeterRegistry();
        final AuthFailures failures = new AuthFailures(registry);
        final ClusterChannels channels;
        final ClusterRpcServer server;
        final EtcdMembership membership;

        /** {@code proofToken}: the key its proofs are computed with (the token itself, unless it forges). */
        Node(EtcdServer etcd, String id, byte[] token, byte[] proofToken) throws Exception {
            ClusterSecurity security = new ClusterSecurity("proof", token, Optional.empty());
            channels = new ClusterChannels(security);
            open.add(channels);
            CredentialProof proof = new CredentialProof(id, security, channels, failures);
            CredentialProof answers = new CredentialProof(id, new ClusterSecurity("proof", proofToken, Optional.empty()), channels, failures);
            ClusterInfoService info = new ClusterInfoService(id, 1, keys -> CompletableFuture.completedFuture(Map.of()), answers);
            server = ClusterRpcServer.start(new InetSocketAddress("127.0.0.1", 0), security, List.of(info),
                    new ClusterAuth(security, failures));
            open.add(server);
            Member self = new Member(id, "127.0.0.1:" + server.address().getPort(), 1);
            membership = EtcdMembership.start(new EtcdMembership.Settings(List.of(etcd.endpoint()), "proof", self,
                    Duration.ofSeconds(2), Duration.ofMillis(50), Duration.ofMillis(500)), proof, registry);
            open.add(membership);
        }

        List<String> live() {
            MembershipView v = membership.view();
            return v.valid() ? v.live().stream().map(Member::nodeId).toList() : List.of("<invalid: " + v.invalidReason() + ">");
        }

        double gauge(String name) {
            return registry.get(name).gauge().value();
        }
    }

    @Test
    void aMemberWithAWrongTokenIsNeverLiveAndBothSidesCountTheRefusals() throws Exception {
        EtcdServer etcd = EtcdServer.start(dir);
        open.add(etcd);
        Node a = new Node(etcd, "a", TOKEN, TOKEN);
        Node b = new Node(etcd, "b", TOKEN, TOKEN);
        Node w = new Node(etcd, "w", WRONG, WRONG);
        Awaitility.await().atMost(Duration.ofSeconds(15)).until(() -> a.live().equals(List.of("a", "b"))
                && b.live().equals(List.of("a", "b")) && w.live().equals(List.of("w")));
        // both directions refused, on both sides: a's calls to w, and w's calls to a
        Awaitility.await().atMost(Duration.ofSeconds(15)).until(() ->
                a.failures.count(AuthFailures.Reason.REFUSED_BY_PEER) >= 1 && a.failures.count(AuthFailures.Reason.BAD_TOKEN) >= 1
                        && w.failures.count(AuthFailures.Reason.REFUSED_BY_PEER) >= 2 && w.failures.count(AuthFailures.Reason.BAD_TOKEN) >= 2);
        assertThat(a.registry.get("orbitkv_cluster_auth_failures").tag("side", "server").tag("reason", "bad_token").counter().count())
                .isPositive();
        // proofs are retried with backoff (0.5 s doubling), and w stays out of the correct views
        Awaitility.await().atMost(Duration.ofSeconds(15)).until(() -> a.registry.get("orbitkv_membership_proofs_failed").counter().count() >= 3);
        assertThat(a.live()).containsExactly("a", "b");
        assertThat(b.live()).containsExactly("a", "b");
        assertThat(a.membership.view().digest()).as("rendezvous agrees: same live set").isEqualTo(b.membership.view().digest());
        assertThat(a.gauge("orbitkv_membership_unproven")).isEqualTo(1);
        assertThat(a.gauge("orbitkv_membership_live")).isEqualTo(2);
        assertThat(a.registry.get("orbitkv_membership_proofs_failed").counter().count())
                .as("backoff: a handful of attempts, not one per 50 ms tick").isLessThan(8);
    }

    @Test
    void aMemberThatAcceptsTheTokenButCannotProveItIsRefused() throws Exception {
        EtcdServer etcd = EtcdServer.start(dir);
        open.add(etcd);
        Node a = new Node(etcd, "a", TOKEN, TOKEN);
        Node f = new Node(etcd, "f", TOKEN, WRONG);
        Awaitility.await().atMost(Duration.ofSeconds(15)).until(() -> a.failures.count(AuthFailures.Reason.BAD_PROOF) >= 1
                && f.live().equals(List.of("a", "f")));
        assertThat(a.live()).containsExactly("a");
    }

    @Test
    void aCatalogPushRefusedForItsTokenIsCountedOnBothSides() throws Exception {
        SimpleMeterRegistry serverRegistry = new SimpleMeterRegistry();
        AuthFailures serverSide = new AuthFailures(serverRegistry);
        ClusterSecurity right = new ClusterSecurity("proof", TOKEN, Optional.empty());
        ShardState shard = new ShardState("o", 1, new ShardState.Budgets(4, 100), serverRegistry);
        ClusterRpcServer server = ClusterRpcServer.start(new InetSocketAddress("127.0.0.1", 0), right,
                List.of(new CatalogService(shard)), new ClusterAuth(right, serverSide));
        open.add(server);
        AuthFailures clientSide = new AuthFailures(new SimpleMeterRegistry());
        ClusterChannels wrong = new ClusterChannels(new ClusterSecurity("proof", WRONG, Optional.empty()));
        open.add(wrong);
        Member owner = new Member("o", "127.0.0.1:" + server.address().getPort(), 1);
        CompletableFuture<PushBatch.Reply> push = new GrpcCatalogTransport(wrong, clientSide)
                .push(owner, new PushBatch("w", 1, 1, 1, true, true, 0, List.of()), 5_000);
        assertThat(push).failsWithin(Duration.ofSeconds(10));
        assertThat(clientSide.count(AuthFailures.Reason.REFUSED_BY_PEER)).isEqualTo(1);
        assertThat(serverSide.count(AuthFailures.Reason.BAD_TOKEN)).isEqualTo(1);
        assertThat(shard.caughtUpSources()).as("the service never ran").isEmpty();
    }

    @Test
    void closedChannelsAreAnOutcomeNotABug() throws Exception {
        ClusterSecurity security = new ClusterSecurity("proof", TOKEN, Optional.empty());
        ClusterChannels channels = new ClusterChannels(security);
        channels.close(); // the Manager is stopping
        Member peer = new Member("p", "127.0.0.1:1", 1);
        long before = UnexpectedErrors.count(UnexpectedErrors.Layer.CLUSTER);
        assertThat(new CredentialProof("a", security, channels, new AuthFailures(new SimpleMeterRegistry())).verify(peer))
                .succeedsWithin(Duration.ofSeconds(1)).isEqualTo(false);
        GrpcCatalogTransport transport = new GrpcCatalogTransport(channels);
        assertThat(transport.push(peer, new PushBatch("a", 1, 1, 1, true, true, 0, List.of()), 1_000))
                .failsWithin(Duration.ofSeconds(1));
        assertThat(transport.lookup(peer, List.of(), List.of(peer), 0, 1_000)).failsWithin(Duration.ofSeconds(1));
        assertThat(UnexpectedErrors.count(UnexpectedErrors.Layer.CLUSTER)).as("nothing counted as a bug").isEqualTo(before);
    }

    @Test
    void theProofBindsTokenNonceAndIdentity() throws Exception {
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        try (ClusterChannels channels = new ClusterChannels(new ClusterSecurity("proof", TOKEN, Optional.empty()))) {
            CredentialProof right = new CredentialProof("a", new ClusterSecurity("proof", TOKEN, Optional.empty()), channels, new AuthFailures(registry));
            CredentialProof wrong = new CredentialProof("a", new ClusterSecurity("proof", WRONG, Optional.empty()), channels, new AuthFailures(registry));
            CredentialProof otherCluster = new CredentialProof("a", new ClusterSecurity("other", TOKEN, Optional.empty()), channels, new AuthFailures(registry));
            byte[] nonce = new byte[16];
            byte[] mac = right.mac(nonce, "b", 3);
            assertThat(right.mac(nonce, "b", 3)).isEqualTo(mac);
            assertThat(wrong.mac(nonce, "b", 3)).isNotEqualTo(mac);
            assertThat(otherCluster.mac(nonce, "b", 3)).isNotEqualTo(mac);
            assertThat(right.mac(new byte[] {1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, "b", 3)).isNotEqualTo(mac);
            assertThat(right.mac(nonce, "c", 3)).isNotEqualTo(mac);
            assertThat(right.mac(nonce, "b", 4)).isNotEqualTo(mac);
        }
    }
}
