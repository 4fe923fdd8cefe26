package io.orbitkv.core.peer;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.catalog.CatalogLookups;
import io.orbitkv.core.catalog.CatalogTransport;
import io.orbitkv.core.catalog.Holder;
import io.orbitkv.core.catalog.KeyLocation;
import io.orbitkv.core.catalog.Member;
import io.orbitkv.core.catalog.MembershipView;
import io.orbitkv.core.catalog.PushBatch;
import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.state.StateKey;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.Test;

/**
 * Candidates from the catalog without blocking: a miss in the candidate cache starts one batched
 * lookup and answers "none"; the next call sees the holders; self and holders of another
 * incarnation are never candidates; an invalid view offers nothing; the in-flight bound holds.
 */
class CatalogCandidatesTest {

    static final Member A = new Member("a", "127.0.0.1:1001", 3);
    static final Member B = new Member("b", "127.0.0.1:1002", 4);

    /** Holds every lookup until the test completes it; answers each key with the configured location. */
    static final class HeldTransport implements CatalogTransport {
        final List<CompletableFuture<List<KeyLocation>>> pending = new CopyOnWriteArrayList<>();
        final List<List<StateKey>> asked = new CopyOnWriteArrayList<>();

        @Override
        public CompletableFuture<PushBatch.Reply> push(Member owner, PushBatch batch, long timeoutMillis) {
            return CompletableFuture.failedFuture(new UnsupportedOperationException("no pushes here"));
        }

        @Override
        public CompletableFuture<List<KeyLocation>> lookup(Member owner, List<StateKey> keys, List<Member> live,
                                                           long viewDigest, long timeoutMillis) {
            asked.add(List.copyOf(keys));
            CompletableFuture<List<KeyLocation>> f = new CompletableFuture<>();
            pending.add(f);
            return f;
        }

        void answerAll(KeyLocation each) {
            for (int i = 0; i < pending.size(); i++) {
                int n = asked.get(i).size();
                List<KeyLocation> answers = new ArrayList<>();
                for (int k = 0; k < n; k++) answers.add(each);
                pending.get(i).complete(answers);
            }
        }
    }

    final AtomicReference<MembershipView> view = new AtomicReference<>(MembershipView.valid(List.of(A, B), 7));
    final HeldTransport transport = new HeldTransport();
    final CatalogLookups lookups = new CatalogLookups(view::get, transport, Duration.ofMinutes(1), 1_000, new SimpleMeterRegistry());

    CatalogCandidates candidates(int inFlight) {
        return new CatalogCandidates(lookups, view::get, "b", Duration.ofSeconds(1), inFlight);
    }

    @Test
    void aCacheMissStartsOneLookupAndALaterCallSeesThePeer() {
        CatalogCandidates c = candidates(16);
        StateKey k = PeerNode.key(1);
        assertThat(c.known(k, PeerNode.DIGEST)).as("nothing known yet: answered at once").isEmpty();
        assertThat(c.known(k, PeerNode.DIGEST)).isEmpty();
        assertThat(transport.asked).as("one lookup for the same key").hasSize(1);
        transport.answerAll(new KeyLocation.Present(List.of(new Holder("a", 3, ResidencyEvent.Medium.SSD, 42))));
        List<PeerCandidate> found = c.known(k, PeerNode.DIGEST);
        assertThat(found).singleElement().satisfies(p -> {
            assertThat(p.source()).isEqualTo(new PeerEndpoint(new NodeIncarnation("a", 3), "127.0.0.1:1001"));
            assertThat(p.medium()).isEqualTo(PeerMedium.SSD);
            assertThat(p.generation()).isEqualTo(AuthorizeRequest.CURRENT_GENERATION);
            assertThat(p.residencySequence()).isEqualTo(42);
            assertThat(p.namespace()).isEqualTo(PeerNode.DIGEST);
        });
        assertThat(c.lookupKeysInFlight()).isZero();
    }

    /**
     * The planner's read ({@code cached}) starts no lookup: a QUERY's missing pages are asked for
     * in one discovery batch, so a per-page lookup from planning is a second RPC for the same key.
     */
    @Test
    void theCachedReadStartsNoLookupAndSeesWhatADiscoveryFound() {
        CatalogCandidates c = candidates(16);
        StateKey k = PeerNode.key(1);
        assertThat(c.cached(k, PeerNode.DIGEST)).isEmpty();
        assertThat(transport.asked).as("no lookup from a cached read").isEmpty();
        assertThat(c.lookupsStarted()).isZero();
        CompletableFuture<Void> discovered = c.discover(List.of(k, PeerNode.key(2)));
        int calls = transport.asked.size();
        assertThat(calls).as("one call per shard owner of the two keys").isBetween(1, 2);
        transport.answerAll(new KeyLocation.Present(List.of(new Holder("a", 3, ResidencyEvent.Medium.DRAM, 9))));
        assertThat(discovered).isCompleted();
        assertThat(c.cached(k, PeerNode.DIGEST)).singleElement()
                .satisfies(p -> assertThat(p.source().node()).isEqualTo(new NodeIncarnation("a", 3)));
        assertThat(transport.asked).as("still the discovery's one batch").hasSize(calls);
        assertThat(c.lookupsStarted()).isEqualTo(1);
    }

    @Test
    void keysArrivingDuringALookupGoInTheNextBatch() {
        CatalogCandidates c = candidates(16);
        c.known(PeerNode.key(1), PeerNode.DIGEST);
        for (int i = 2; i <= 5; i++) c.known(PeerNode.key(i), PeerNode.DIGEST);
        assertThat(transport.asked).hasSize(1);
        assertThat(c.lookupsStarted()).isEqualTo(1);
        transport.pending.getFirst().complete(List.of(new KeyLocation.Absent()));
        assertThat(c.lookupsStarted()).as("the queued keys went in one batch (one call per shard owner)").isEqualTo(2);
        assertThat(transport.asked.subList(1, transport.asked.size()).stream().mapToInt(List::size).sum()).isEqualTo(4);
        assertThat(transport.asked.size() - 1).isLessThanOrEqualTo(2);
    }

    @Test
    void selfAndOtherIncarnationsAreNeverCandidatesAndAnInvalidViewOffersNothing() {
        CatalogCandidates c = candidates(16);
        StateKey k = PeerNode.key(9);
        c.known(k, PeerNode.DIGEST);
        transport.answerAll(new KeyLocation.Present(List.of(new Holder("b", 4, ResidencyEvent.Medium.DRAM, 5),
                new Holder("a", 3, ResidencyEvent.Medium.DRAM, 6))));
        assertThat(c.known(k, PeerNode.DIGEST)).extracting(PeerCandidate::ownerId).containsExactly("a");
        view.set(MembershipView.valid(List.of(new Member("a", "127.0.0.1:1001", 4), B), 8));
        assertThat(c.known(k, PeerNode.DIGEST)).as("a restarted: its old evidence is not used").isEmpty();
        view.set(view.get().invalidate("etcd down"));
        int asked = transport.asked.size();
        assertThat(c.known(PeerNode.key(10), PeerNode.DIGEST)).isEmpty();
        assertThat(transport.asked).as("no lookups without membership").hasSize(asked);
    }

    @Test
    void lookupsInFlightAreBounded() {
        CatalogCandidates c = candidates(3);
        for (int i = 0; i < 10; i++) c.known(PeerNode.key(100 + i), PeerNode.DIGEST);
        assertThat(c.lookupKeysInFlight()).isEqualTo(3);
        assertThat(c.lookupsSkipped()).isEqualTo(7);
    }

    @Test
    void discoveryBatchesShareTheInFlightBoundAndKeepTheirPrefix() {
        CatalogCandidates c = candidates(8);
        c.known(PeerNode.key(200), PeerNode.DIGEST); // one background key in flight
        List<StateKey> prefix = new ArrayList<>();
        for (int i = 0; i < 10; i++) prefix.add(PeerNode.key(300 + i));
        CompletableFuture<Void> first = c.discover(prefix);
        assertThat(transport.asked.stream().flatMap(List::stream).filter(k -> !k.equals(PeerNode.key(200))).toList())
                .as("the batch is cut to the first 7 keys of the prefix").containsExactlyInAnyOrderElementsOf(prefix.subList(0, 7));
        assertThat(c.lookupKeysInFlight()).isEqualTo(8);
        assertThat(c.lookupsSkipped()).isEqualTo(3);
        int asked = transport.asked.size();
        assertThat(c.discover(List.of(PeerNode.key(400)))).as("nothing fits: done at once, no call").isDone();
        assertThat(transport.asked).hasSize(asked);
        transport.answerAll(new KeyLocation.Absent());
        assertThat(first).isDone();
        assertThat(c.lookupKeysInFlight()).as("every key given back when its lookup ended").isZero();
    }
}
