package io.orbitkv.core.peer;

import io.orbitkv.core.query.RemotePages;
import io.orbitkv.core.query.SessionScope;
import io.orbitkv.core.storage.StageResult;
import io.orbitkv.core.storage.ssd.NamespaceDigest;
import io.orbitkv.state.StateKey;

import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;

/**
 * The peer routes of the query planner ({@link RemotePages}): pages only peers hold become
 * staging candidates, and staging them runs a {@link PeerReader} over the page's
 * {@link ReadPlan} (peer DRAM before peer SSD, refusals replanned within the plan).
 *
 * <p>Borrows the catalog's candidate evidence ({@link Candidates}), the reader and the member
 * view; owns nothing. Thread model: thread-safe and non-blocking (see {@link RemotePages}).
 *
 * <p>Invariants: no candidate is offered and no fetch starts while the member view is invalid;
 * a fetch ends as a lease on bytes whose CRC32C matched the source's, or as a miss.
 *
 * <p>Design note: a peer page is admitted against the staging budget at
 * {@code pageBytesBudget} (the largest DRAM slot) because catalog evidence carries no length;
 * over-admitting by at most one slot per page keeps the budget a true upper bound, where an
 * under-estimate would let peer fetches overrun it.
 */
public final class PeerPages implements RemotePages {

    /** The catalog's positive evidence for a key, without a lookup RPC (its candidate cache). */
    public interface Candidates {
        /** Live peers believed to hold {@code key} in {@code namespace}; empty when unknown. */
        List<PeerCandidate> known(StateKey key, NamespaceDigest namespace);
    }

    private final Candidates candidates;
    private final PeerReader reader;
    private final MemberView members;
    private final long pageBytesBudget;

    public PeerPages(Candidates candidates, PeerReader reader, MemberView members, long pageBytesBudget) {
        this.candidates = Objects.requireNonNull(candidates, "candidates");
        this.reader = Objects.requireNonNull(reader, "reader");
        this.members = Objects.requireNonNull(members, "members");
        if (pageBytesBudget <= 0) throw new IllegalArgumentException("pageBytesBudget: " + pageBytesBudget);
        this.pageBytesBudget = pageBytesBudget;
    }

    @Override
    public long stagingBytes(StateKey key, SessionScope scope) {
        if (!members.validForRemoteWork()) return 0;
        return candidates.known(key, scope.digest()).isEmpty() ? 0 : pageBytesBudget;
    }

    @Override
    public CompletableFuture<StageResult> fetch(StateKey key, SessionScope scope) {
        StageResult.Miss miss = new StageResult.Miss(key, StageResult.MissReason.NOT_FOUND);
        if (!members.validForRemoteWork()) return CompletableFuture.completedFuture(miss);
        List<PeerCandidate> known = candidates.known(key, scope.digest());
        if (known.isEmpty()) return CompletableFuture.completedFuture(miss);
        CompletableFuture<PeerReader.Batch> read;
        try {
            read = reader.readAll(List.of(new ReadPlan(key, false, false, known)), scope.namespaceId());
        } catch (RuntimeException e) {
            // a transport that cannot even start a call (closed at shutdown) is a miss, like any failure
            return CompletableFuture.completedFuture(miss);
        }
        return read
                .thenApply(batch -> batch.entries().getFirst().result()
                        .<StageResult>map(r -> switch (r) {
                            case PeerReadResult.Fetched f -> new StageResult.Staged(f.lease(), StageResult.Source.PEER_READ);
                            case PeerReadResult.Refused refused -> miss;
                            case PeerReadResult.Miss m -> miss;
                        })
                        .orElse(miss))
                .exceptionally(t -> miss);
    }
}
