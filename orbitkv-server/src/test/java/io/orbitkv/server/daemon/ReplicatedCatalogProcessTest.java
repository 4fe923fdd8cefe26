package io.orbitkv.server.daemon;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.PublishOutcome;
import io.orbitkv.core.catalog.KeyLocation;
import io.orbitkv.core.catalog.Member;
import io.orbitkv.core.catalog.Rendezvous;
import io.orbitkv.server.cluster.ClusterChannels;
import io.orbitkv.server.daemon.PeerProcessTest.Prefix;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.protocol.QueryStatus;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.testkit.EtcdServer;
import io.orbitkv.testkit.ManagerProcess;
import io.orbitkv.testkit.ProcessTest;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Replicated catalog evidence (the default of 2 owners per key) across a real etcd and three
 * Manager processes: A publishes two prefixes; C, an owner of most of their keys, is SIGKILLed;
 * B's very first QUERY of the first prefix, made before C's lease can have expired, is a full
 * remote hit on A with A's exact bytes (with one owner per key it stopped at the first key only C
 * held). Then, while C leaves every view and A hands its keys to their new owners, B's catalog
 * lookups of the second prefix are sampled every few milliseconds: never Absent (Unknown is
 * counted and printed), every key Present on A at the end, and A handed off rather than
 * resnapshotted. Leases, reservations, staging bytes, fetches and tickets return to 0.
 *
 * <p>Every address comes from the processes' ready lines and {@link EtcdServer}, so the same test
 * can run with each Manager in its own network namespace once the launcher wraps them.
 */
@ProcessTest
class ReplicatedCatalogProcessTest {

    @TempDir
    Path dir;

    @Test
    void killingAnOwnerLeavesEveryPageOfALiveSourceFindableOnTheFirstQuery() throws Exception {
        try (LoopbackCluster cluster = LoopbackCluster.start(dir, "a", "b", "c")) {
            ClusterChannels channels = cluster.channels();
            ManagerProcess a = cluster.member(0);
            ManagerProcess b = cluster.member(1);
            ManagerProcess c = cluster.member(2);
            List<ManagerProcess> all = cluster.members();
            try {
                Namespace ns = new Namespace("replicated", "r1", "sha256:w", "sha256:t", "", "bf16", "nhd",
                        PeerProcessTest.PAGE_TOKENS, 1, 0, 1, 0, 1);
                RecoveryContract contract = new RecoveryContract(PeerProcessTest.PAGE_TOKENS, List.of(new StateGroup.Full(0)));
                try (OrbitKvClient onA = OrbitKvClient.connect(ManagerProcess.socket(a.dir()), Duration.ofSeconds(20));
                     OrbitKvClient onB = OrbitKvClient.connect(ManagerProcess.socket(b.dir()), Duration.ofSeconds(20))) {
                    onA.register("engine-a", 1, ns, contract);
                    onB.register("engine-b", 1, ns, contract);
                    Prefix first = Prefix.of(ns, 16, 32 * 1024, 21);
                    Prefix second = Prefix.of(ns, 16, 32 * 1024, 22);
                    List<Member> three = List.of(new Member("a", "-", 1), new Member("b", "-", 1), new Member("c", "-", 1));
                    assertThat(first.keys()).as("C is the first owner of some of the first prefix's keys")
                            .anyMatch(k -> Rendezvous.owner(k, three).nodeId().equals("c"));
                    assertThat(first.keys()).as("and with B the only owners of some")
                            .anyMatch(k -> !Rendezvous.isOwner(k, three, 2, "a"));
                    for (Prefix p : List.of(first, second)) {
                        assertThat(onA.publish(p.toPublish())).containsOnly(PublishOutcome.SEALED).hasSize(16);
                        // asked through A, so B's candidate cache stays cold
                        await("the catalog knows the prefix").atMost(Duration.ofSeconds(20)).until(() ->
                                ClusterProcessTest.locate(channels, a, p.keys()).stream().allMatch(l -> ClusterProcessTest.heldBy(l, "a")));
                    }
                    double handoffsBefore = a.metric("orbitkv_catalog_handoffs_sent_total");

                    c.kill();
                    all.remove(c);
                    long t0 = System.nanoTime();
                    Reply.QueryResult answer = onB.query(first.query(1).withPeerWaitMillis(5_000));
                    assertThat(answer.status()).as("B waits for the peer").isEqualTo(QueryStatus.PENDING);
                    Reply.QueryResult hit = onB.awaitSettled(answer);
                    Duration took = Duration.ofNanos(System.nanoTime() - t0);
                    double liveOnB = b.metric("orbitkv_membership_live");
                    System.out.printf("first QUERY after SIGKILL of C: %d ms, B's view still had %.0f members%n", took.toMillis(), liveOnB);
                    assertThat(hit.hit()).isTrue();
                    assertThat(hit.boundaryTokens()).as("every page on B's first QUERY, with C dead").isEqualTo(first.fullBoundary());
                    assertThat(PeerProcessTest.assertSameBytes(onB, hit, first)).isEqualTo(16);
                    onB.release(hit.operationId());
                    // the lookup itself is bounded by the 1 s lookup timeout; the QUERY by its peer wait. The
                    // QUERY went out before C's 2 s lease could expire, so no handoff helped: with one owner
                    // per key it stopped at the first page only C held
                    assertThat(took).as("settled within its peer wait").isLessThan(Duration.ofMillis(5_000));

                    // C leaves every view; A hands its keys to their new owners: sample B's lookups meanwhile
                    int samples = 0;
                    int unknown = 0;
                    int afterViewChange = 0;
                    long sampleUntil = Long.MAX_VALUE;
                    while (System.nanoTime() < sampleUntil) {
                        boolean changed = b.metric("orbitkv_membership_live") == 2 && a.metric("orbitkv_membership_live") == 2;
                        if (changed && sampleUntil == Long.MAX_VALUE) sampleUntil = System.nanoTime() + 1_500_000_000L;
                        List<KeyLocation> r = ClusterProcessTest.locate(channels, b, second.keys());
                        samples++;
                        if (changed) afterViewChange++;
                        assertThat(r).as("sample %d: a page held by the live source A is never Absent", samples)
                                .doesNotContain(new KeyLocation.Absent());
                        unknown += (int) r.stream().filter(l -> l instanceof KeyLocation.Unknown).count();
                        assertThat(Duration.ofNanos(System.nanoTime() - t0)).as("C leaves the views").isLessThan(Duration.ofSeconds(30));
                        Thread.sleep(5);
                    }
                    System.out.printf("handoff: %d samples of %d keys (%d after the view change), %d Unknown answers%n",
                            samples, second.keys().size(), afterViewChange, unknown);
                    assertThat(afterViewChange).isPositive();
                    List<StateKey> both = new ArrayList<>(first.keys());
                    both.addAll(second.keys());
                    await("every page found on A under the new placement").atMost(Duration.ofSeconds(10)).until(() ->
                            ClusterProcessTest.locate(channels, b, both).stream().allMatch(l -> ClusterProcessTest.heldBy(l, "a")));
                    assertThat(a.metric("orbitkv_catalog_handoffs_sent_total")).as("A handed off to the survivor")
                            .isGreaterThan(handoffsBefore);

                    // a first QUERY of the second prefix after the handoff: a full remote hit too
                    Reply.QueryResult later = onB.awaitSettled(onB.query(second.query(2).withPeerWaitMillis(5_000)));
                    assertThat(later.boundaryTokens()).isEqualTo(second.fullBoundary());
                    assertThat(PeerProcessTest.assertSameBytes(onB, later, second)).isEqualTo(16);
                    onB.release(later.operationId());
                    PeerProcessTest.awaitDrained(all);
                }
                for (ManagerProcess m : all) assertThat(m.terminate()).as("exit status of " + m.dir()).isZero();
            } finally {
                for (ManagerProcess m : all) m.close();
                c.close();
            }
        }
    }
}
