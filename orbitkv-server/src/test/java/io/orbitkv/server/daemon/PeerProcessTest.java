package io.orbitkv.server.daemon;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.google.protobuf.ByteString;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.PageToPublish;
import io.orbitkv.client.PublishOutcome;
import io.orbitkv.core.catalog.KeyLocation;
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
import io.orbitkv.state.StateKeys;
import io.orbitkv.state.TokenChain;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.Hashes;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import io.orbitkv.testkit.ManagerProcess;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;
import io.orbitkv.testkit.ProcessTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Peer reads between three Managers as separate processes and one real etcd: a page published on
 * A is read by B's QUERY (HOST_READY) with bit-identical bytes; a stale requester or source
 * incarnation is refused by the source; while etcd is stopped remote work stops (B misses, A's
 * local hits continue) and resumes when etcd returns; the source C is SIGKILLed during a large
 * multi-page fetch and B answers a miss or a shorter boundary, never a wrong byte, and leaks
 * nothing (leases, reservations, staging bytes, fetches, tickets all back to 0).
 */
@ProcessTest
class PeerProcessTest {

    static final int PAGE_TOKENS = 16;
    static final ObjectMapper JSON = new ObjectMapper();

    @TempDir
    Path dir;

    /** Published pages: their block hashes, images and keys, and the prompt they cover. */
    record Prefix(List<byte[]> hashes, List<byte[]> images, List<StateKey> keys, int tokens) {

        static Prefix of(Namespace ns, int pages, int pageBytes, long seed) {
            int[] tokens = new int[pages * PAGE_TOKENS + 1];
            for (int i = 0; i < tokens.length; i++) tokens[i] = (int) (seed * 1_000_000 + i);
            List<byte[]> hashes = List.of(TokenChain.pageHashes(ns.digest(), tokens, PAGE_TOKENS, new byte[0]));
            SplittableRandom random = new SplittableRandom(seed);
            List<byte[]> images = new ArrayList<>();
            List<StateKey> keys = new ArrayList<>();
            for (int p = 0; p < pages; p++) {
                byte[] image = new byte[pageBytes];
                random.nextBytes(image);
                images.add(image);
                keys.add(StateKeys.forBlockHash(ns.digest(), 0, hashes.get(p)));
            }
            return new Prefix(hashes.subList(0, pages), images, keys, tokens.length);
        }

        List<PageToPublish> toPublish() {
            List<PageToPublish> out = new ArrayList<>();
            for (int p = 0; p < images.size(); p++) {
                out.add(PageToPublish.ofBlockHash(0, hashes.get(p), MemorySegment.ofArray(images.get(p))));
            }
            return out;
        }

        Request.Query query(long operationId) {
            return new Request.Query(operationId, 0, CompletionTarget.HOST_READY, tokens, 0,
                    List.of(new Request.QueryGroup(0, KeyForm.BLOCK_HASH, Hashes.of(hashes))));
        }

        long fullBoundary() {
            return (long) images.size() * PAGE_TOKENS;
        }
    }

    @Test
    void peerReadsAcrossThreeManagersThroughStaleIncarnationsAnEtcdOutageAndASourceKilledMidTransfer() throws Exception {
        try (LoopbackCluster cluster = LoopbackCluster.start(dir, "a", "b", "c")) {
            EtcdServer etcd = cluster.etcd();
            ClusterChannels channels = cluster.channels();
            ManagerProcess a = cluster.member(0);
            ManagerProcess b = cluster.member(1);
            ManagerProcess c = cluster.member(2);
            List<ManagerProcess> all = cluster.members();
            try {
                Namespace ns = new Namespace("peer-test", "r1", "sha256:w", "sha256:t", "", "bf16", "nhd", PAGE_TOKENS, 1, 0, 1, 0, 1);
                RecoveryContract contract = new RecoveryContract(PAGE_TOKENS, List.of(new StateGroup.Full(0)));
                AtomicLong ops = new AtomicLong();
                try (OrbitKvClient onA = OrbitKvClient.connect(ManagerProcess.socket(a.dir()), Duration.ofSeconds(20));
                     OrbitKvClient onB = OrbitKvClient.connect(ManagerProcess.socket(b.dir()), Duration.ofSeconds(20));
                     OrbitKvClient onC = OrbitKvClient.connect(ManagerProcess.socket(c.dir()), Duration.ofSeconds(20))) {
                    onA.register("engine-a", 1, ns, contract);
                    onB.register("engine-b", 1, ns, contract);
                    onC.register("engine-c", 1, ns, contract);

                    // remote hit: published on A, read on B with the same bytes
                    Prefix first = Prefix.of(ns, 8, 48 * 1024, 1);
                    assertThat(onA.publish(first.toPublish())).containsOnly(PublishOutcome.SEALED).hasSize(8);
                    Reply.QueryResult remote = awaitFullHit(onB, first, ops);
                    assertSameBytes(onB, remote, first);
                    onB.release(remote.operationId());
                    assertThat(status(b).at("/peer/fetchesStaged").asLong()).as("B staged A's pages by peer reads").isGreaterThanOrEqualTo(8);
                    // counted once each page's trailer is written, which B may see before A's thread goes on
                    await("A sent them on the bulk data plane").atMost(Duration.ofSeconds(10))
                            .until(() -> a.metric("orbitkv_peer_bulk_pages_total{outcome=\"sent\"") >= 8);
                    awaitDrained(List.of(a, b));
                    for (ManagerProcess m : List.of(a, b)) {
                        String metrics = m.get("/metrics");
                        for (String layer : List.of("peer", "transport", "cluster")) {
                            String series = "orbitkv_unexpected_errors_total{layer=\"" + layer + "\"}";
                            assertThat(metrics).as("the error boundaries are exported").contains(series);
                            assertThat(m.metric(series)).as("no bug counted on a healthy run: %s on %s", series, m.dir()).isZero();
                        }
                    }

                    // incarnations other than the live ones are refused at the source, nothing pinned
                    PeerReadGrpc.PeerReadBlockingStub toA = PeerReadGrpc.newBlockingStub(channels.channel(a.clusterEndpoint()));
                    AuthorizeReply granted = authorizeCall(toA, "b", b.incarnation(), a.incarnation(), first.keys().getFirst(), ns.digest());
                    assertThat(granted.hasGrant()).as("the live incarnations are granted: %s", granted).isTrue();
                    assertThat(authorize(toA, "b", b.incarnation() + 1, a.incarnation(), first.keys().getFirst()))
                            .isEqualTo("STALE_REQUESTER_INCARNATION");
                    assertThat(authorize(toA, "b", b.incarnation(), a.incarnation() + 1, first.keys().getFirst()))
                            .isEqualTo("STALE_SOURCE_INCARNATION");
                    assertThat(status(a).at("/peer/tickets").asInt()).as("the granted ticket pins until released").isEqualTo(1);
                    assertThat(toA.withDeadlineAfter(5, TimeUnit.SECONDS).release(ReleaseCall.newBuilder()
                            .setRequester(Requester.newBuilder().setNodeId("b").setIncarnation(b.incarnation()))
                            .setTicketId(granted.getGrant().getTicketId()).build()).getOutcome()).isEqualTo("FREED");
                    assertThat(status(a).at("/peer/tickets").asInt()).isZero();
                    assertThat(status(a).at("/peer/tickets").asInt()).isZero();

                    // etcd outage: B's remote work stops, A's local hits continue; both resume after
                    Prefix second = Prefix.of(ns, 6, 32 * 1024, 2);
                    assertThat(onA.publish(second.toPublish())).containsOnly(PublishOutcome.SEALED).hasSize(6);
                    await("the catalog knows the second prefix").atMost(Duration.ofSeconds(20)).until(() ->
                            ClusterProcessTest.locate(channels, b, second.keys()).stream().allMatch(l -> ClusterProcessTest.heldBy(l, "a")));
                    etcd.stop();
                    for (ManagerProcess m : all) {
                        await("view invalid on " + m.dir()).atMost(Duration.ofSeconds(20)).until(() -> m.metric("orbitkv_membership_valid") == 0);
                    }
                    long stagedBefore = status(b).at("/peer/fetchesStaged").asLong();
                    Reply.QueryResult cut = onB.awaitSettled(onB.query(second.query(ops.incrementAndGet())));
                    assertThat(cut.hit()).as("no peer read without membership").isFalse();
                    onB.release(cut.operationId());
                    assertThat(status(b).at("/peer/fetchesStaged").asLong()).isEqualTo(stagedBefore);
                    assertThat(status(b).at("/peer/remoteWorkAllowed").asBoolean()).isFalse();
                    Reply.QueryResult local = onA.awaitSettled(onA.query(second.query(ops.incrementAndGet())));
                    assertThat(local.hit()).as("local hit on A during the outage").isTrue();
                    assertThat(local.boundaryTokens()).isEqualTo(second.fullBoundary());
                    onA.release(local.operationId());
                    etcd.restart();
                    Managers.awaitMembers(all, 3);
                    Reply.QueryResult resumed = awaitFullHit(onB, second, ops);
                    assertSameBytes(onB, resumed, second);
                    onB.release(resumed.operationId());
                    awaitDrained(List.of(a, b, c));

                    // the source C is killed during a large multi-page fetch: never a wrong byte, nothing leaks
                    Prefix large = Prefix.of(ns, 30, 60 * 1024, 3); // ~1.9 MB admitted: inside B's 2 MiB staging budget
                    List<PageToPublish> toC = large.toPublish();
                    for (int from = 0; from < toC.size(); from += 10) {
                        assertThat(onC.publish(toC.subList(from, from + 10))).containsOnly(PublishOutcome.SEALED).hasSize(10);
                    }
                    await("B's catalog cache knows C's pages").atMost(Duration.ofSeconds(20)).until(() ->
                            ClusterProcessTest.locate(channels, b, large.keys()).stream().allMatch(l -> l instanceof KeyLocation.Present));
                    Reply.QueryResult started = onB.query(large.query(ops.incrementAndGet()));
                    c.process().destroyForcibly();
                    assertThat(started.status()).as("the peer fetches were under way when C was killed")
                            .isEqualTo(io.orbitkv.state.protocol.QueryStatus.PENDING);
                    assertThat(c.process().waitFor(20, TimeUnit.SECONDS)).isTrue();
                    all.remove(c);
                    Reply.QueryResult killed = onB.awaitSettled(started);
                    assertThat(killed.boundaryTokens()).isLessThanOrEqualTo(large.fullBoundary());
                    int resident = assertSameBytes(onB, killed, large);
                    System.out.printf("source killed: B answered hit=%s boundary=%d of %d tokens, %d resident pages%n",
                            killed.hit(), killed.boundaryTokens(), large.fullBoundary(), resident);
                    onB.release(killed.operationId());
                    Managers.awaitMembers(all, 2);
                    awaitDrained(all);
                    assertThat(authorize(toA, "c", c.incarnation(), a.incarnation(), first.keys().getFirst()))
                            .as("the killed C's incarnation is stale").isEqualTo("STALE_REQUESTER_INCARNATION");
                }
                for (ManagerProcess m : all) assertThat(m.terminate()).as("exit status of " + m.dir()).isZero();
            } finally {
                for (ManagerProcess m : all) m.close();
            }
        }
    }

    /**
     * Queries (without a peer wait) until every page is a hit: the first QUERY of a remote prefix
     * only starts the catalog lookup of the whole missing prefix, a later one finds the peer and
     * reads from it (PeerFirstQueryProcessTest covers the QUERY that waits).
     */
    static Reply.QueryResult awaitFullHit(OrbitKvClient client, Prefix prefix, AtomicLong ops) {
        AtomicReference<Reply.QueryResult> hit = new AtomicReference<>();
        await("a full remote hit").atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(50)).until(() -> {
            Reply.QueryResult r = client.awaitSettled(client.query(prefix.query(ops.incrementAndGet())));
            if (r.hit() && r.boundaryTokens() == prefix.fullBoundary()) {
                hit.set(r);
                return true;
            }
            client.release(r.operationId());
            return false;
        });
        return hit.get();
    }

    /** Every resident page of {@code r} holds exactly the published bytes; returns how many. */
    static int assertSameBytes(OrbitKvClient client, Reply.QueryResult r, Prefix prefix) {
        int resident = 0;
        for (Reply.Span span : r.groups().getFirst().spans()) {
            for (int j = 0; j < span.pages().size(); j++) {
                int i = (int) span.firstPage() + j;
                if (span.pages().get(j) instanceof Reply.Resident page) {
                    MemorySegment bytes = client.readLease(page.lease());
                    assertThat(bytes.mismatch(MemorySegment.ofArray(prefix.images().get(i)))).as("page %d", i).isEqualTo(-1);
                    resident++;
                }
            }
        }
        assertThat((long) resident * PAGE_TOKENS).as("the boundary covers resident pages only").isGreaterThanOrEqualTo(r.boundaryTokens());
        return resident;
    }

    static JsonNode status(ManagerProcess m) throws Exception {
        return JSON.readTree(m.get("/status"));
    }

    /** Leases, reservations, staging bytes, peer fetches and tickets back to 0 on each of {@code managers}. */
    static void awaitDrained(List<ManagerProcess> managers) {
        for (ManagerProcess m : managers) {
            await("nothing held on " + m.dir()).atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(50)).until(() -> {
                JsonNode s = status(m);
                return s.get("leases").asLong() == 0 && s.get("reservations").asLong() == 0
                        && s.get("stagingBytes").asLong() == 0 && s.at("/peer/fetchesInFlight").asInt() == 0
                        && s.at("/peer/tickets").asInt() == 0 && s.at("/peer/activeTransfers").asInt() == 0;
            });
        }
    }

    /** An Authorize RPC with the given incarnations; the rejection name, or "GRANT". */
    static String authorize(PeerReadGrpc.PeerReadBlockingStub stub, String requester, long requesterIncarnation,
                            long sourceIncarnation, StateKey key) {
        AuthorizeReply reply = authorizeCall(stub, requester, requesterIncarnation, sourceIncarnation, key, new byte[32]);
        return reply.hasGrant() ? "GRANT" : reply.getRejection();
    }

    /** An Authorize RPC for the current generation of {@code key} in DRAM, in namespace {@code digest}. */
    static AuthorizeReply authorizeCall(PeerReadGrpc.PeerReadBlockingStub stub, String requester, long requesterIncarnation,
                                        long sourceIncarnation, StateKey key, byte[] digest) {
        return stub.withDeadlineAfter(5, TimeUnit.SECONDS).authorize(AuthorizeCall.newBuilder()
                .setRequester(Requester.newBuilder().setNodeId(requester).setIncarnation(requesterIncarnation))
                .setSourceIncarnation(sourceIncarnation).setKey(ByteString.copyFrom(key.toBytes()))
                .setNamespaceDigest(ByteString.copyFrom(digest)).setMedium(PageMedium.PAGE_DRAM)
                .setGeneration(0).setResidencySequence(1).build());
    }
}
