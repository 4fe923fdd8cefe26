package io.orbitkv.core.query;

import io.orbitkv.core.cost.Shape;
import io.orbitkv.core.cost.SourceOffer;
import io.orbitkv.core.storage.StageResult;
import io.orbitkv.state.StateKey;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

/**
 * The query layer's view of pages held by peer Managers: the last two routes of a read plan
 * (peer DRAM, then peer SSD) after local DRAM and local SSD. Implemented by the peer layer
 * ({@code io.orbitkv.core.peer.PeerPages}); {@link #NONE} for a single-node Manager.
 *
 * <p>Thread model: both methods are called with a session's lock held and must not block:
 * {@link #stagingBytes} answers from already-known evidence (the catalog's candidate cache),
 * {@link #fetch} only starts work.
 */
public interface RemotePages {

    /** No peers: every local miss stays a miss. */
    RemotePages NONE = new RemotePages() {
        @Override
        public long stagingBytes(StateKey key, SessionScope scope) {
            return 0;
        }

        @Override
        public CompletableFuture<StageResult> fetch(StateKey key, SessionScope scope) {
            return CompletableFuture.completedFuture(new StageResult.Miss(key, StageResult.MissReason.NOT_FOUND));
        }
    };

    /**
     * Bytes to admit from the staging budget if some live peer is known to hold {@code key} in
     * {@code scope}'s namespace and new remote work is allowed now; 0 otherwise (the page is a miss).
     * Starts no lookup for an unknown key: the planner's caller {@link #discover discovers} its
     * missing pages in one batch.
     */
    long stagingBytes(StateKey key, SessionScope scope);

    /**
     * Fetches {@code key} from peers into local DRAM, trying them in route order and replanning
     * past refusals: a {@link StageResult.Staged} lease ({@link StageResult.Source#PEER_READ}) the
     * caller owns, or a miss. Never completes exceptionally.
     */
    CompletableFuture<StageResult> fetch(StateKey key, SessionScope scope);

    /**
     * Fetches {@code keys} (each one a page no local tier held when planned) from peers into local
     * DRAM; one future per key, in the order of {@code keys}, each as {@link #fetch} would
     * complete it. Pages that one source holds may travel in one request to that source (one
     * request per query batch per source). Default: one {@link #fetch} per key.
     */
    default List<CompletableFuture<StageResult>> fetchAll(List<StateKey> keys, SessionScope scope) {
        List<CompletableFuture<StageResult>> out = new ArrayList<>(keys.size());
        for (StateKey key : keys) out.add(fetch(key, scope));
        return out;
    }

    /**
     * Asks where {@code keys} are held (the catalog lookup) so that {@link #stagingBytes} and
     * {@link #fetch} know them once the returned future completes: with the answers in the
     * candidate evidence, or at the lookup's own deadline. Never completes exceptionally; no
     * lock is held while it runs. Default (no peers): already complete.
     */
    default CompletableFuture<Void> discover(List<StateKey> keys, SessionScope scope) {
        return CompletableFuture.completedFuture(null);
    }

    /** Whether {@link #discover} can find anything now (peers exist and remote work is allowed). */
    default boolean discoverable() {
        return false;
    }

    /**
     * The peer route's {@link SourceOffer} for a one-page staging of {@code key} of {@code shape}:
     * the owner {@link #fetch} would try first, keyed by its resource identity and incarnation
     * (see {@code PeerPages.fetchKey}); empty when no live peer is known to hold the page. A
     * Manager without peers offers nothing.
     */
    default Optional<SourceOffer> offer(StateKey key, SessionScope scope, Shape shape) {
        return Optional.empty();
    }

    /**
     * Time-driven peer duties at {@code nowNanos} (ticket windows, release retries, membership
     * changes), called from the Manager's tick thread every 100 ms; returns how much it did.
     */
    default int onTick(long nowNanos) {
        return 0;
    }
}
