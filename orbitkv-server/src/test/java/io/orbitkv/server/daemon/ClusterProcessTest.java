package io.orbitkv.server.daemon;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.PageToPublish;
import io.orbitkv.client.PublishOutcome;
import io.orbitkv.core.catalog.Holder;
import io.orbitkv.core.catalog.KeyLocation;
import io.orbitkv.core.catalog.Member;
import io.orbitkv.core.catalog.Rendezvous;
import io.orbitkv.server.cluster.ClusterChannels;
import io.orbitkv.server.cluster.proto.ClusterInfoGrpc;
import io.orbitkv.server.cluster.proto.KeyResult;
import io.orbitkv.server.cluster.proto.LookupReply;
import io.orbitkv.server.cluster.proto.LookupRequest;
import io.orbitkv.server.cluster.proto.PushReply;
import io.orbitkv.server.cluster.proto.PushRequest;
import io.orbitkv.server.cluster.proto.CatalogGrpc;
import io.orbitkv.testkit.EtcdServer;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.StateKeys;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.Hashes;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import io.orbitkv.testkit.ManagerProcess;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import io.orbitkv.testkit.ProcessTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * One real etcd and three Managers as separate processes (A, B, C): membership converges; pages
 * published on A are found by a catalog lookup on C through their shard owners; the shard owner B
 * restarts (new incarnation) and lookups resume after replay, Unknown meanwhile and never a false
 * Absent; a stale incarnation is refused (stream and registration); etcd stopped invalidates every
 * view (lookups Unknown, local hits on A continue); etcd restarted restores the views and lookups.
 */
@ProcessTest
class ClusterProcessTest {

    static final int PAGE_TOKENS = 16;
    static final int PAGES = 24;

    @TempDir
    Path dir;

    @Test
    void threeManagersShareACatalogThroughOwnerRestartStaleIncarnationsAndAnEtcdOutage() throws Exception {
        try (LoopbackCluster cluster = LoopbackCluster.start(dir, "a", "b", "c")) {
            Path token = cluster.token();
            EtcdServer etcd = cluster.etcd();
            ClusterChannels channels = cluster.channels();
            ManagerProcess a = cluster.member(0);
            ManagerProcess b = cluster.member(1);
            ManagerProcess c = cluster.member(2);
            List<ManagerProcess> all = cluster.members();
            try {

                // publish on A
                Namespace ns = new Namespace("cluster-test", "r1", "sha256:w", "sha256:t", "", "bf16", "nhd", PAGE_TOKENS, 1, 0, 1, 0, 1);
                ChainPages published = ChainPages.of(ns, PAGES, 7_000);
                List<PageToPublish> pages = published.pages();
                List<StateKey> keys = published.keys();
                StateKey never = StateKeys.forBlockHash(ns.digest(), 0, new byte[] {1, 2, 3});
                List<StateKey> asked = new ArrayList<>(keys);
                asked.add(never);
                try (OrbitKvClient client = OrbitKvClient.connect(ManagerProcess.socket(a.dir()), Duration.ofSeconds(20))) {
                    client.register("engine-a", 1, ns, new RecoveryContract(PAGE_TOKENS, List.of(new StateGroup.Full(0))));
                    assertThat(client.publish(pages)).containsOnly(PublishOutcome.SEALED).hasSize(PAGES);

                    // a catalog lookup on C finds every page on A, and the unpublished key is Absent
                    await("C finds A's pages").atMost(Duration.ofSeconds(20)).until(() -> {
                        List<KeyLocation> r = locate(channels, c, asked);
                        return r.subList(0, PAGES).stream().allMatch(l -> heldBy(l, "a"))
                                && r.getLast().equals(new KeyLocation.Absent());
                    });

                    // restart the shard owner B: lookups of its keys are Present or Unknown, never Absent
                    List<Member> ids = List.of(new Member("a", "-", 1), new Member("b", "-", 1), new Member("c", "-", 1));
                    List<StateKey> ownedByB = keys.stream().filter(k -> Rendezvous.owner(k, ids).nodeId().equals("b")).toList();
                    assertThat(ownedByB).as("B owns some of the %d pages", PAGES).isNotEmpty();
                    long bBefore = b.incarnation();
                    assertThat(b.terminate()).isZero();
                    all.remove(b);
                    List<KeyLocation> samples = new ArrayList<>();
                    b = Managers.startMember(dir, etcd.endpoint(), "b", token);
                    all.add(b);
                    assertThat(b.incarnation()).as("a restart takes the next epoch").isEqualTo(bBefore + 1);
                    ManagerProcess restartedB = b;
                    await("lookups resume after B's replay").atMost(Duration.ofSeconds(30)).pollInterval(Duration.ofMillis(50)).until(() -> {
                        List<KeyLocation> r = locate(channels, c, ownedByB);
                        samples.addAll(r);
                        return restartedB.metric("orbitkv_membership_live") == 3 && r.stream().allMatch(l -> heldBy(l, "a"));
                    });
                    assertThat(samples).as("never a false Absent while B was rebuilt").doesNotContain(new KeyLocation.Absent());
                    assertThat(b.metric("orbitkv_catalog_snapshots_received_total")).as("B rebuilt from snapshots").isPositive();

                    // stale incarnation: B's old incarnation may not stream to A, nor register
                    PushReply stale = CatalogGrpc.newBlockingStub(channels.channel(a.clusterEndpoint())).withDeadlineAfter(5, TimeUnit.SECONDS)
                            .push(PushRequest.newBuilder().setSourceNode("b").setSourceIncarnation(bBefore)
                                    .setOwnerIncarnation(a.incarnation()).setBatch(1).setSnapshotBegin(true).setSnapshotEnd(true).build());
                    assertThat(stale.getStatus()).isEqualTo(PushReply.Status.STALE_INCARNATION);
                    ManagerProcess oldB = Managers.start(dir.resolve("b-stale"), Managers.clusterOptions(etcd.endpoint(), "b", token));
                    all.add(oldB);
                    await("an older incarnation of b is refused").atMost(Duration.ofSeconds(20))
                            .until(() -> oldB.metric("orbitkv_membership_stale_refused_total") >= 1);
                    assertThat(oldB.metric("orbitkv_membership_valid")).isZero();
                    assertThat(locate(channels, c, ownedByB)).allMatch(l -> heldBy(l, "a"));
                    assertThat(oldB.terminate()).isZero();
                    all.remove(oldB);

                    // etcd outage: every view becomes invalid, lookups are Unknown, local hits on A continue
                    etcd.stop();
                    for (ManagerProcess m : all) {
                        await("view invalid on " + m.dir()).atMost(Duration.ofSeconds(20)).until(() -> m.metric("orbitkv_membership_valid") == 0);
                    }
                    assertThat(locate(channels, c, asked)).containsOnly(new KeyLocation.Unknown(KeyLocation.UnknownReason.NO_MEMBERSHIP));
                    Reply.QueryResult hit = client.awaitSettled(client.query(new Request.Query(1, 0, CompletionTarget.HOST_READY,
                            published.promptTokens(), 0, List.of(new Request.QueryGroup(0, KeyForm.BLOCK_HASH,
                                    Hashes.of(published.hashes()))))));
                    assertThat(hit.hit()).as("local hit on A during the outage").isTrue();
                    assertThat(hit.boundaryTokens()).isEqualTo((long) PAGES * PAGE_TOKENS);
                    client.release(1);

                    // etcd back: views valid again and C finds A's pages again
                    etcd.restart();
                    for (ManagerProcess m : all) {
                        await("view valid again on " + m.dir()).atMost(Duration.ofSeconds(30)).until(() ->
                                m.metric("orbitkv_membership_valid") == 1 && m.metric("orbitkv_membership_live") == 3);
                    }
                    await("C finds A's pages after the outage").atMost(Duration.ofSeconds(20)).until(() ->
                            locate(channels, c, keys).stream().allMatch(l -> heldBy(l, "a")));
                }
                for (ManagerProcess m : all) assertThat(m.terminate()).as("exit status of " + m.dir()).isZero();
            } finally {
                for (ManagerProcess m : all) m.close();
            }
        }
    }

    /** A held the key (DRAM or SSD) according to the catalog. */
    static boolean heldBy(KeyLocation l, String node) {
        return l instanceof KeyLocation.Present p && p.holders().stream().map(Holder::nodeId).anyMatch(node::equals);
    }

    /** A lookup run by {@code on} through its own view and catalog (ClusterInfo.Locate). */
    static List<KeyLocation> locate(ClusterChannels channels, ManagerProcess on, List<StateKey> keys) {
        LookupRequest.Builder r = LookupRequest.newBuilder();
        for (StateKey k : keys) r.addKeys(com.google.protobuf.ByteString.copyFrom(k.toBytes()));
        LookupReply reply = ClusterInfoGrpc.newBlockingStub(channels.channel(on.clusterEndpoint()))
                .withDeadlineAfter(10, TimeUnit.SECONDS).locate(r.build());
        List<KeyLocation> out = new ArrayList<>();
        for (KeyResult k : reply.getResultsList()) {
            out.add(switch (k.getResultCase()) {
                case PRESENT -> new KeyLocation.Present(k.getPresent().getHoldersList().stream()
                        .map(h -> new Holder(h.getNodeId(), h.getIncarnation(),
                                h.getMedium() == io.orbitkv.server.cluster.proto.Medium.DRAM
                                        ? io.orbitkv.core.storage.residency.ResidencyEvent.Medium.DRAM
                                        : io.orbitkv.core.storage.residency.ResidencyEvent.Medium.SSD, h.getSequence())).toList());
                case ABSENT -> new KeyLocation.Absent();
                case UNKNOWN -> new KeyLocation.Unknown(KeyLocation.UnknownReason.valueOf(k.getUnknown().getReason()));
                case RESULT_NOT_SET -> throw new AssertionError("no result");
            });
        }
        return out;
    }
}
