package io.orbitkv.core.peer;

import io.orbitkv.core.log.UnexpectedErrors;
import io.orbitkv.core.log.UnexpectedErrors.Layer;
import io.orbitkv.core.storage.dram.AcquireResult;
import io.orbitkv.core.storage.dram.DramTier;
import io.orbitkv.core.storage.dram.Lease;
import io.orbitkv.core.storage.dram.Reservation;
import io.orbitkv.core.storage.dram.ReserveResult;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.function.LongSupplier;

/**
 * The requester side of a peer read: fetch from the source (authorize, then on the grant reserve a
 * local DRAM slot and stream the payload into it), commit only if whole and verified, then
 * release the ticket when the transport says one is owed (retried by the {@link ReleaseRetrier}). Also reads a batch of pages, replanning within the batch when an owner
 * refuses.
 *
 * <p>Borrows the local {@link DramTier}, the {@link MemberView}, the {@link PayloadTransport} and
 * the {@link ReleaseRetrier}; owns nothing between calls (each read owns its reservation until
 * it commits or aborts, and hands its ticket to the retrier exactly once).
 *
 * <p>Thread model: thread-safe; futures complete on the transport's threads.
 *
 * <p>Invariants: a page is never made resident unless its CRC32C matched (see
 * {@link PayloadAssembler}); every granted ticket is released (or left to its window if the
 * retrier gives up, or if the transport failed unexpectedly); every reservation is committed or
 * aborted exactly once; no read's future completes exceptionally.
 *
 * <p>Error boundary (layer {@code peer}): the transport's expected failures are values
 * (UNREACHABLE, BROKEN); a transport call that throws or whose future completes exceptionally is a
 * bug, recorded through {@link PeerBoundary} and answered as UNREACHABLE — a refusal before any
 * grant, a {@code TRANSFER_BROKEN} miss with the slot aborted after one (the future's completion,
 * normal or not, is the transport's word that it stopped writing into the slot). The receiver's
 * {@code onGrant} never throws into the transport: a bug there declines the grant, counted.
 *
 * <p>Design note: one {@link PayloadTransport#fetch} per page (authorize and stream in one call
 * over gRPC, so one round trip instead of three: Authorize 3–9 ms and Release 0.6–2.3 ms per read
 * were measured before). When the transport says a release is owed (the three-call default), the
 * ticket is released after commit, through the {@link ReleaseRetrier}; over gRPC the source frees
 * it itself when the stream ends (docs/manager-core.md, "Peer read tickets"). {@link #readBatch}
 * puts the pages of one source in one {@link PayloadTransport#fetchBatch}: over the bulk data plane
 * one request per query batch per source instead of one call per page (docs/peer-data-plane.md).
 */
public final class PeerReader {

    private final NodeIncarnation self;
    private final DramTier dram;
    private final MemberView members;
    private final PayloadTransport transport;
    private final ReleaseRetrier releases;
    private final LongSupplier nanoClock;

    /** What the boundary answers for a transport that failed unexpectedly (see {@link PeerBoundary}). */
    private static final PayloadTransport.FetchOutcome UNREACHABLE =
            new PayloadTransport.FetchOutcome.Rejected(AuthorizeResult.Rejection.UNREACHABLE);
    private static final String UNREACHABLE_ANSWER = "an unreachable source (a miss; a taken slot is freed)";

    public PeerReader(NodeIncarnation self, DramTier dram, MemberView members, PayloadTransport transport,
                      ReleaseRetrier releases, LongSupplier nanoClock) {
        this.self = Objects.requireNonNull(self, "self");
        this.dram = Objects.requireNonNull(dram, "dram");
        this.members = Objects.requireNonNull(members, "members");
        this.transport = Objects.requireNonNull(transport, "transport");
        this.releases = Objects.requireNonNull(releases, "releases");
        this.nanoClock = Objects.requireNonNull(nanoClock, "nanoClock");
    }

    /** Reads {@code candidate}'s page into local DRAM under local namespace {@code localNamespaceId}. */
    public CompletableFuture<PeerReadResult> read(PeerCandidate candidate, int localNamespaceId) {
        Objects.requireNonNull(candidate, "candidate");
        if (!members.validForRemoteWork()) {
            return CompletableFuture.completedFuture(new PeerReadResult.Miss(candidate, PeerReadResult.MissReason.MEMBERSHIP_INVALID));
        }
        Receiver receiver = new Receiver(candidate, localNamespaceId);
        return finish(candidate, receiver, PeerBoundary.call(Layer.PEER, "PeerReader.read", UNREACHABLE_ANSWER, UNREACHABLE,
                () -> transport.fetch(candidate.source(), request(candidate), receiver)));
    }

    /**
     * Reads the pages of {@code candidates}, which all name the same source endpoint, in one
     * {@link PayloadTransport#fetchBatch}: one future per candidate, in order, each completed as
     * {@link #read} would complete it (as soon as that page ended, not when the batch did). No
     * replanning here: a {@link PeerReadResult.Refused} page is the caller's to retry elsewhere.
     */
    public List<CompletableFuture<PeerReadResult>> readBatch(List<PeerCandidate> candidates, int localNamespaceId) {
        if (candidates.isEmpty()) return List.of();
        PeerEndpoint source = candidates.getFirst().source();
        for (PeerCandidate c : candidates) {
            if (!c.source().equals(source)) throw new IllegalArgumentException("one source per batch: " + c.source() + " vs " + source);
        }
        List<CompletableFuture<PeerReadResult>> out = new ArrayList<>(candidates.size());
        if (!members.validForRemoteWork()) {
            for (PeerCandidate c : candidates) {
                out.add(CompletableFuture.completedFuture(new PeerReadResult.Miss(c, PeerReadResult.MissReason.MEMBERSHIP_INVALID)));
            }
            return out;
        }
        List<AuthorizeRequest> requests = new ArrayList<>(candidates.size());
        List<Receiver> receivers = new ArrayList<>(candidates.size());
        for (PeerCandidate c : candidates) {
            requests.add(request(c));
            receivers.add(new Receiver(c, localNamespaceId));
        }
        List<CompletableFuture<PayloadTransport.FetchOutcome>> fetched;
        try {
            fetched = transport.fetchBatch(source, requests, receivers);
        } catch (RuntimeException e) {
            UnexpectedErrors.record(Layer.PEER, "PeerReader.readBatch", UNREACHABLE_ANSWER, e); // once for the batch
            fetched = Collections.nCopies(candidates.size(), CompletableFuture.completedFuture(UNREACHABLE));
        }
        for (int i = 0; i < candidates.size(); i++) {
            CompletableFuture<PayloadTransport.FetchOutcome> page = i < fetched.size() ? fetched.get(i)
                    : CompletableFuture.failedFuture(new IllegalStateException("no outcome for page " + i));
            out.add(finish(candidates.get(i), receivers.get(i),
                    PeerBoundary.call(Layer.PEER, "PeerReader.readBatch", UNREACHABLE_ANSWER, UNREACHABLE, () -> page)));
        }
        return out;
    }

    private AuthorizeRequest request(PeerCandidate candidate) {
        return new AuthorizeRequest(self, candidate.source().node().incarnation(), candidate.key(),
                candidate.namespace(), candidate.medium(), candidate.generation(), candidate.residencySequence());
    }

    private CompletableFuture<PeerReadResult> finish(PeerCandidate candidate, Receiver receiver,
                                                     CompletableFuture<PayloadTransport.FetchOutcome> fetched) {
        return fetched.thenApply(outcome -> {
            PeerReadResult result = receiver.finish(outcome);
            switch (outcome) {
                case PayloadTransport.FetchOutcome.Rejected r -> { }
                case PayloadTransport.FetchOutcome.Declined d -> owe(candidate, d.grant(), d.releaseOwed());
                case PayloadTransport.FetchOutcome.Streamed s -> owe(candidate, s.grant(), s.releaseOwed());
            }
            return result;
        });
    }

    private void owe(PeerCandidate candidate, AuthorizeResult.Granted grant, boolean releaseOwed) {
        if (releaseOwed) releases.submit(candidate.source(), grant.ticketId(), self, nanoClock.getAsLong());
    }

    /**
     * One read's requester state: on the grant, reserves the local slot (or finds the page
     * already resident, or no room); after the fetch, turns its outcome into the read's result.
     * Called on the transport's thread; {@link #finish} happens-after {@link #onGrant} through
     * the fetch future.
     */
    private final class Receiver implements PayloadTransport.FetchSink {
        private final PeerCandidate candidate;
        private final int namespaceId;
        private PayloadAssembler assembler;
        private PeerReadResult declined;

        Receiver(PeerCandidate candidate, int namespaceId) {
            this.candidate = candidate;
            this.namespaceId = namespaceId;
        }

        /** Never throws into the transport: a bug here declines the grant (a miss), counted. */
        @Override
        public Optional<PayloadSink> onGrant(AuthorizeResult.Granted ticket) {
            try {
                return take(ticket);
            } catch (RuntimeException e) {
                UnexpectedErrors.record(Layer.PEER, "PeerReader.onGrant", "a declined grant (a miss)", e);
                if (assembler != null) assembler.abort();
                assembler = null;
                return Optional.empty();
            }
        }

        private Optional<PayloadSink> take(AuthorizeResult.Granted ticket) {
            if (!ticket.key().equals(candidate.key())) {
                declined = new PeerReadResult.Miss(candidate, PeerReadResult.MissReason.LENGTH_MISMATCH);
                return Optional.empty();
            }
            switch (dram.reserve(candidate.key(), namespaceId, ticket.lengthBytes())) {
                case Reservation reservation -> {
                    assembler = new PayloadAssembler(dram, reservation);
                    return Optional.of(assembler);
                }
                case ReserveResult.AlreadyResident resident -> declined = switch (dram.acquire(candidate.key(), namespaceId)) {
                    case Lease lease -> new PeerReadResult.Fetched(lease, candidate);
                    case AcquireResult.Miss miss -> new PeerReadResult.Miss(candidate, PeerReadResult.MissReason.LOCAL_DRAM_FULL);
                };
                case ReserveResult.Full full -> declined = new PeerReadResult.Miss(candidate, PeerReadResult.MissReason.LOCAL_DRAM_FULL);
            }
            return Optional.empty();
        }

        PeerReadResult finish(PayloadTransport.FetchOutcome outcome) {
            return switch (outcome) {
                case PayloadTransport.FetchOutcome.Rejected r -> {
                    // after a grant only through the boundary (the transport failed unexpectedly):
                    // the slot is freed, or the local lease handed on, never left behind
                    if (assembler != null) {
                        assembler.abort();
                        yield new PeerReadResult.Miss(candidate, PeerReadResult.MissReason.TRANSFER_BROKEN);
                    }
                    yield declined != null ? declined : new PeerReadResult.Refused(candidate, r.reason());
                }
                case PayloadTransport.FetchOutcome.Declined d -> declined != null ? declined
                        : new PeerReadResult.Miss(candidate, PeerReadResult.MissReason.TRANSFER_BROKEN);
                case PayloadTransport.FetchOutcome.Streamed s -> switch (s.end()) {
                    case COMPLETED -> switch (assembler.complete()) {
                        case PayloadAssembler.Outcome.Resident r -> new PeerReadResult.Fetched(r.lease(), candidate);
                        case PayloadAssembler.Outcome.Discarded d -> new PeerReadResult.Miss(candidate, PeerReadResult.MissReason.DISCARDED);
                    };
                    case REFUSED -> {
                        assembler.abort();
                        yield new PeerReadResult.Miss(candidate, PeerReadResult.MissReason.TRANSFER_REFUSED);
                    }
                    case BROKEN -> {
                        assembler.abort();
                        yield new PeerReadResult.Miss(candidate, PeerReadResult.MissReason.TRANSFER_BROKEN);
                    }
                };
            };
        }
    }

    /**
     * Reads every plan's page from peers, in each plan's route order. A refusal removes the
     * candidate (or, for an owner-wide reason, every candidate of that owner in the whole batch)
     * and the page is retried on its next candidate; other misses end that page as a miss.
     * Results are in the order of {@code plans}; a plan with no usable candidate yields
     * {@link Batch.Entry#result()} empty (recompute).
     */
    public CompletableFuture<Batch> readAll(List<ReadPlan> plans, int localNamespaceId) {
        Batch batch = new Batch(plans);
        List<CompletableFuture<Void>> all = new ArrayList<>();
        for (int i = 0; i < plans.size(); i++) all.add(readOne(batch, i, localNamespaceId));
        return CompletableFuture.allOf(all.toArray(CompletableFuture[]::new)).thenApply(v -> batch);
    }

    private CompletableFuture<Void> readOne(Batch batch, int index, int namespaceId) {
        Optional<PeerCandidate> next = batch.nextFor(index);
        if (next.isEmpty()) return CompletableFuture.completedFuture(null);
        return read(next.get(), namespaceId).thenCompose(result -> {
            batch.record(index, result);
            return switch (result) {
                case PeerReadResult.Refused r -> readOne(batch, index, namespaceId);
                case PeerReadResult.Fetched f -> CompletableFuture.completedFuture(null);
                case PeerReadResult.Miss m -> CompletableFuture.completedFuture(null);
            };
        });
    }

    /** The state of one {@link #readAll}: per page, its current plan and last result. */
    public static final class Batch {

        /** One page's last plan and last result (empty result: nothing was tried). */
        public record Entry(ReadPlan plan, Optional<PeerReadResult> result) {}

        // @GuardedBy("this")
        private final List<ReadPlan> plans;
        // @GuardedBy("this")
        private final List<PeerReadResult> results;

        Batch(List<ReadPlan> plans) {
            this.plans = new ArrayList<>(plans);
            this.results = new ArrayList<>(Collections.nCopies(plans.size(), null));
        }

        synchronized Optional<PeerCandidate> nextFor(int index) {
            return plans.get(index).nextPeer();
        }

        synchronized void record(int index, PeerReadResult result) {
            results.set(index, result);
            if (result instanceof PeerReadResult.Refused r) {
                if (r.ownerWide()) {
                    plans.replaceAll(p -> p.withoutOwner(r.from().ownerId()));
                } else {
                    plans.set(index, plans.get(index).without(r.from()));
                }
            }
        }

        public synchronized List<Entry> entries() {
            List<Entry> out = new ArrayList<>();
            for (int i = 0; i < plans.size(); i++) out.add(new Entry(plans.get(i), Optional.ofNullable(results.get(i))));
            return out;
        }
    }
}
