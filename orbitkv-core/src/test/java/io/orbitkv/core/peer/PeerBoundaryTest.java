package io.orbitkv.core.peer;

import io.orbitkv.core.log.UnexpectedErrors;
import io.orbitkv.core.log.UnexpectedErrors.Layer;
import io.orbitkv.core.storage.StageResult;
import io.orbitkv.state.StateKey;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The peer layer's error boundary on the real path ({@link PeerPages} over {@link PeerReader}
 * over a transport): a transport that throws, or whose future fails, where its contract says it
 * answers values, is a bug. The read still answers a miss (never a wrong hit, never an exception),
 * nothing is left behind (the requester's reserved bytes and leases, the source's tickets and
 * pins), and {@code orbitkv_unexpected_errors_total{layer="peer"}} counts it.
 */
class PeerBoundaryTest {

    static final NodeIncarnation A = new NodeIncarnation("a", 1);
    static final NodeIncarnation B = new NodeIncarnation("b", 1);

    /** Where the transport fails (a bug: its contract is to answer values). */
    enum Fault { NONE, AUTHORIZE_THROWS, TRANSFER_THROWS, FETCH_FAILS_AFTER_STREAM, BATCH_THROWS }

    /** {@link InMemoryTransport} with one injected bug. */
    static final class ThrowingTransport implements PayloadTransport {
        final InMemoryTransport inner = new InMemoryTransport();
        volatile Fault fault = Fault.NONE;

        @Override
        public CompletableFuture<FetchOutcome> fetch(PeerEndpoint source, AuthorizeRequest request, FetchSink receiver) {
            CompletableFuture<FetchOutcome> streamed = PayloadTransport.super.fetch(source, request, receiver);
            if (fault != Fault.FETCH_FAILS_AFTER_STREAM) return streamed;
            // the payload landed in the reserved slot, then the transport fails its future
            return streamed.thenApply(outcome -> {
                throw new IllegalStateException("injected: fetch failed after streaming");
            });
        }

        @Override
        public List<CompletableFuture<FetchOutcome>> fetchBatch(PeerEndpoint source, List<AuthorizeRequest> requests,
                                                                List<? extends FetchSink> receivers) {
            if (fault == Fault.BATCH_THROWS) throw new IllegalStateException("injected: fetchBatch threw");
            return PayloadTransport.super.fetchBatch(source, requests, receivers);
        }

        @Override
        public CompletableFuture<AuthorizeResult> authorize(PeerEndpoint source, AuthorizeRequest request) {
            if (fault == Fault.AUTHORIZE_THROWS) throw new IllegalStateException("injected: authorize threw");
            return inner.authorize(source, request);
        }

        @Override
        public CompletableFuture<TransferEnd> transfer(PeerEndpoint source, AuthorizeResult.Granted ticket,
                                                       NodeIncarnation requester, PayloadSink sink) {
            if (fault == Fault.TRANSFER_THROWS) throw new IllegalStateException("injected: transfer threw");
            return inner.transfer(source, ticket, requester, sink);
        }

        @Override
        public CompletableFuture<ReleaseAck> release(PeerEndpoint source, long ticketId, NodeIncarnation requester) {
            return inner.release(source, ticketId, requester);
        }
    }

    @TempDir
    Path dir;

    final PeerNode.Members members = new PeerNode.Members();
    final ThrowingTransport transport = new ThrowingTransport();
    final Map<StateKey, List<PeerCandidate>> known = new HashMap<>();
    PeerNode a;
    PeerNode b;
    ReleaseRetrier releases;
    PeerPages pages;

    @BeforeEach
    void open() throws Exception {
        members.live.put("a", A);
        members.live.put("b", B);
        a = new PeerNode(dir, A, members, 32);
        b = new PeerNode(dir, B, members, 32);
        transport.inner.add(a);
        releases = new ReleaseRetrier(transport, 16, 4, 100, 800);
        PeerReader reader = new PeerReader(B, b.store.dram(), members, transport, releases, b.clock::get);
        pages = new PeerPages((k, ns) -> known.getOrDefault(k, List.of()), reader, members, PeerNode.SLOT);
    }

    @AfterEach
    void close() {
        a.close();
        b.close();
    }

    StateKey onA(long i) {
        StateKey k = PeerNode.key(i);
        known.put(k, List.of(a.dramCandidate(k, a.putInDram(k))));
        return k;
    }

    /** Releases retried, then the source's ticket windows run out: what a lost release leaves is freed there. */
    void assertNothingLeaked() {
        releases.onTick(Long.MAX_VALUE / 2);
        a.clock.addAndGet(TimeUnit.SECONDS.toNanos(31));
        a.source.onTick();
        assertThat(releases.pending()).as("releases pending").isZero();
        assertThat(a.tickets.size()).as("source tickets").isZero();
        assertThat(a.store.dram().usage().leases()).as("source pins").isZero();
        assertThat(b.store.dram().usage().reservedBytes()).as("requester staging bytes").isZero();
        assertThat(b.store.dram().usage().leases()).as("requester leases").isZero();
    }

    StageResult fetch(StateKey k, Fault fault) {
        transport.fault = fault;
        long before = UnexpectedErrors.count(Layer.PEER);
        StageResult r = pages.fetch(k, PeerPagesBatchTest.SCOPE).join();
        assertThat(UnexpectedErrors.count(Layer.PEER) - before).as("counted under layer peer").isGreaterThanOrEqualTo(1);
        return r;
    }

    @Test
    void aTransportThatThrowsBeforeAnyGrantIsANotFoundMissCounted() {
        StateKey k = onA(1);
        assertThat(fetch(k, Fault.AUTHORIZE_THROWS)).isEqualTo(new StageResult.Miss(k, StageResult.MissReason.NOT_FOUND));
        assertThat(b.store.dram().contains(k)).isFalse();
        assertNothingLeaked();
    }

    @Test
    void aTransferThatThrowsAfterTheGrantIsABrokenStreamAndFreesTheSlot() {
        StateKey k = onA(2);
        // a miss after the grant: the query must not try another medium (IO_ERROR, as a broken stream)
        assertThat(fetch(k, Fault.TRANSFER_THROWS)).isEqualTo(new StageResult.Miss(k, StageResult.MissReason.IO_ERROR));
        assertThat(b.store.dram().contains(k)).isFalse();
        assertNothingLeaked();
    }

    @Test
    void aFetchThatFailsAfterThePayloadLandedCommitsNothingAndFreesTheSlot() {
        StateKey k = onA(3);
        assertThat(fetch(k, Fault.FETCH_FAILS_AFTER_STREAM)).isEqualTo(new StageResult.Miss(k, StageResult.MissReason.IO_ERROR));
        assertThat(b.store.dram().contains(k)).as("bytes whose fetch failed never become resident").isFalse();
        assertNothingLeaked();
    }

    @Test
    void aBatchThatThrowsIsAMissForEveryPageCounted() {
        List<StateKey> keys = List.of(onA(4), onA(5), onA(6));
        transport.fault = Fault.BATCH_THROWS;
        long before = UnexpectedErrors.count(Layer.PEER);
        List<StageResult> results = pages.fetchAll(keys, PeerPagesBatchTest.SCOPE).stream().map(CompletableFuture::join).toList();
        assertThat(UnexpectedErrors.count(Layer.PEER) - before).isGreaterThanOrEqualTo(1);
        assertThat(results).allSatisfy(r -> assertThat(r).isInstanceOf(StageResult.Miss.class));
        assertNothingLeaked();
    }

    @Test
    void theSameReadsHitOnceTheTransportAnswersValuesAgain() {
        StateKey k = onA(7);
        transport.fault = Fault.AUTHORIZE_THROWS;
        assertThat(pages.fetch(k, PeerPagesBatchTest.SCOPE).join()).isInstanceOf(StageResult.Miss.class);
        transport.fault = Fault.NONE;
        long before = UnexpectedErrors.count(Layer.PEER);
        StageResult r = pages.fetch(k, PeerPagesBatchTest.SCOPE).join();
        assertThat(r).isInstanceOf(StageResult.Staged.class);
        ((StageResult.Staged) r).lease().release();
        assertThat(UnexpectedErrors.count(Layer.PEER)).as("a good read counts nothing").isEqualTo(before);
        assertNothingLeaked();
    }
}
