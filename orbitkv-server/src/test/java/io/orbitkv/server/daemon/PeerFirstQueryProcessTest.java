package io.orbitkv.server.daemon;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.PublishOutcome;
import io.orbitkv.server.cluster.ClusterChannels;
import io.orbitkv.server.daemon.PeerProcessTest.Prefix;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.protocol.QueryStatus;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.testkit.ManagerProcess;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import io.orbitkv.testkit.ProcessTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Cross-host reuse at the pace of a real engine (one QUERY per request, seconds apart), two
 * Manager processes and one real etcd: a prefix published on A is a full hit on B's very first
 * QUERY when that QUERY may wait for peers, with A's exact bytes; a client that never waits
 * misses once and then, with its QUERYs 2.5 s apart, hits the whole prefix on the next QUERY (the
 * first one looked the whole missing prefix up, and the catalog's answer outlives the gap).
 * Nothing stays held on either Manager.
 */
@ProcessTest
class PeerFirstQueryProcessTest {

    @TempDir
    Path dir;

    @Test
    void aPeerHeldPrefixHitsOnTheFirstQueryAndQueriesSecondsApartKeepFindingIt() throws Exception {
        try (LoopbackCluster cluster = LoopbackCluster.start(dir, "a", "b")) {
            ClusterChannels channels = cluster.channels();
            ManagerProcess a = cluster.member(0);
            ManagerProcess b = cluster.member(1);
            List<ManagerProcess> all = cluster.members();
            try {
                Namespace ns = new Namespace("first-query", "r1", "sha256:w", "sha256:t", "", "bf16", "nhd",
                        PeerProcessTest.PAGE_TOKENS, 1, 0, 1, 0, 1);
                RecoveryContract contract = new RecoveryContract(PeerProcessTest.PAGE_TOKENS, List.of(new StateGroup.Full(0)));
                try (OrbitKvClient onA = OrbitKvClient.connect(ManagerProcess.socket(a.dir()), Duration.ofSeconds(20));
                     OrbitKvClient onB = OrbitKvClient.connect(ManagerProcess.socket(b.dir()), Duration.ofSeconds(20))) {
                    onA.register("engine-a", 1, ns, contract);
                    onB.register("engine-b", 1, ns, contract);

                    // a QUERY that may wait: the whole 24-page prefix on the first QUERY
                    Prefix first = Prefix.of(ns, 24, 48 * 1024, 11);
                    publishAndAwaitCatalog(onA, channels, a, first);
                    Reply.QueryResult answer = onB.query(first.query(1).withPeerWaitMillis(5_000));
                    assertThat(answer.status()).as("B waits for the peer").isEqualTo(QueryStatus.PENDING);
                    Reply.QueryResult hit = onB.awaitSettled(answer);
                    assertThat(hit.hit()).isTrue();
                    assertThat(hit.boundaryTokens()).as("the full prefix on the first QUERY").isEqualTo(first.fullBoundary());
                    assertThat(PeerProcessTest.assertSameBytes(onB, hit, first)).isEqualTo(24);
                    onB.release(hit.operationId());
                    assertThat(PeerProcessTest.status(b).at("/peer/fetchesStaged").asLong()).isEqualTo(24);
                    PeerProcessTest.awaitDrained(all);

                    // a client that never waits, QUERYing once per request 2.5 s apart
                    Prefix second = Prefix.of(ns, 12, 32 * 1024, 12);
                    publishAndAwaitCatalog(onA, channels, a, second);
                    Reply.QueryResult miss = onB.awaitSettled(onB.query(second.query(2)));
                    assertThat(miss.boundaryTokens()).as("without a wait the first QUERY misses").isZero();
                    onB.release(miss.operationId());
                    Thread.sleep(2_500); // the engine's next request, as a user's traffic paces it
                    Reply.QueryResult next = onB.awaitSettled(onB.query(second.query(3)));
                    assertThat(next.boundaryTokens()).as("the next QUERY, 2.5 s later, finds the whole prefix")
                            .isEqualTo(second.fullBoundary());
                    assertThat(PeerProcessTest.assertSameBytes(onB, next, second)).isEqualTo(12);
                    onB.release(next.operationId());
                    PeerProcessTest.awaitDrained(all);
                }
                for (ManagerProcess m : all) assertThat(m.terminate()).as("exit status of " + m.dir()).isZero();
            } finally {
                for (ManagerProcess m : all) m.close();
            }
        }
    }

    /** Publishes {@code prefix} on A and waits until the shard owners list every page as A's (asked through A, so B's own candidate cache stays cold). */
    private static void publishAndAwaitCatalog(OrbitKvClient onA, ClusterChannels channels, ManagerProcess a,
                                               Prefix prefix) {
        assertThat(onA.publish(prefix.toPublish())).containsOnly(PublishOutcome.SEALED).hasSize(prefix.images().size());
        await("the catalog knows the prefix").atMost(Duration.ofSeconds(20)).until(() ->
                ClusterProcessTest.locate(channels, a, prefix.keys()).stream().allMatch(l -> ClusterProcessTest.heldBy(l, "a")));
    }
}
