package io.orbitkv.core.peer;

import io.orbitkv.core.catalog.Member;
import io.orbitkv.core.catalog.MembershipView;
import io.orbitkv.core.cost.Shape;
import io.orbitkv.core.cost.SourceOffer;
import io.orbitkv.core.query.RemotePages;
import io.orbitkv.core.query.SessionScope;
import io.orbitkv.core.storage.StageResult;
import io.orbitkv.state.StateKey;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Consumer;
import java.util.function.Supplier;

/**
 * A clustered Manager's peer routes as the query layer sees them ({@link RemotePages}): the
 * requester's {@link PeerPages} plus the periodic duties of both peer roles, driven by the
 * Manager's tick thread — ticket window expiry at the source ({@link PeerSource#onTick}), release
 * retries at the requester ({@link ReleaseRetrier#onTick}), ticket revocation when a
 * requester's membership changes ({@link TicketTable#onRequesterChanged}) and, for each member
 * incarnation that left the view, the transport's {@code memberLeft} hook
 * ({@link PayloadTransport#onMemberLeft}: fetches in flight to it end now as misses).
 *
 * <p>Borrows the pages, the source, the retrier and the view. Owns the fetch counters and the
 * last membership seen by the tick. Thread model: {@link #stagingBytes}/{@link #fetch} on session
 * threads (non-blocking), {@link #onTick} on the single tick thread; counters are atomics.
 *
 * <p>Invariant: every fetch started is counted in flight until its future completes, so
 * {@code /status} shows 0 fetches and 0 tickets once peer work has drained.
 *
 * <p>Design note: membership changes are found by comparing the view's digest each tick (100 ms)
 * rather than by a watch callback: a requester that died keeps its pins at most one tick longer,
 * far inside the 30 s ticket window, and the tick thread already exists.
 */
public final class PeerRoutes implements RemotePages {

    /** What {@code /status} shows of peer reads. */
    public record Status(int tickets, int activeTransfers, long ticketsExpired, int fetchesInFlight,
                         long fetchesStaged, long fetchesMissed, int releasesPending, long releasesAcked,
                         long releasesAbandoned, boolean remoteWorkAllowed) {}

    private final PeerPages pages;
    private final PeerSource source;
    private final ReleaseRetrier releases;
    private final Supplier<MembershipView> view;
    private final MemberView members;
    private final AtomicInteger fetchesInFlight = new AtomicInteger();
    private final AtomicLong fetchesStaged = new AtomicLong();
    private final AtomicLong fetchesMissed = new AtomicLong();
    // touched by the tick thread only
    private long lastDigest;
    private Set<String> lastNodes = Set.of();
    // touched by the tick thread only
    private Set<NodeIncarnation> lastMembers = Set.of();
    private final Consumer<NodeIncarnation> memberLeft;

    public PeerRoutes(PeerPages pages, PeerSource source, ReleaseRetrier releases, Supplier<MembershipView> view,
                      MemberView members) {
        this(pages, source, releases, view, members, m -> { });
    }

    /**
     * As above; {@code memberLeft} is called on the tick thread, once per member incarnation that
     * was in the last valid view and is not in the new one (left, or replaced by a restart).
     */
    public PeerRoutes(PeerPages pages, PeerSource source, ReleaseRetrier releases, Supplier<MembershipView> view,
                      MemberView members, Consumer<NodeIncarnation> memberLeft) {
        this.memberLeft = Objects.requireNonNull(memberLeft, "memberLeft");
        this.pages = Objects.requireNonNull(pages, "pages");
        this.source = Objects.requireNonNull(source, "source");
        this.releases = Objects.requireNonNull(releases, "releases");
        this.view = Objects.requireNonNull(view, "view");
        this.members = Objects.requireNonNull(members, "members");
    }

    @Override
    public long stagingBytes(StateKey key, SessionScope scope) {
        return pages.stagingBytes(key, scope);
    }

    @Override
    public Optional<SourceOffer> offer(StateKey key, SessionScope scope, Shape shape) {
        return pages.offer(key, scope, shape);
    }

    @Override
    public boolean discoverable() {
        return pages.discoverable();
    }

    @Override
    public CompletableFuture<Void> discover(List<StateKey> keys, SessionScope scope) {
        return pages.discover(keys, scope);
    }

    @Override
    public CompletableFuture<StageResult> fetch(StateKey key, SessionScope scope) {
        fetchesInFlight.incrementAndGet();
        return counted(pages.fetch(key, scope));
    }

    @Override
    public List<CompletableFuture<StageResult>> fetchAll(List<StateKey> keys, SessionScope scope) {
        fetchesInFlight.addAndGet(keys.size());
        List<CompletableFuture<StageResult>> started = pages.fetchAll(keys, scope);
        List<CompletableFuture<StageResult>> out = new ArrayList<>(started.size());
        for (CompletableFuture<StageResult> f : started) out.add(counted(f));
        return out;
    }

    /** Counts one started fetch (already counted in flight) when {@code fetch} completes. */
    private CompletableFuture<StageResult> counted(CompletableFuture<StageResult> fetch) {
        return fetch.whenComplete((r, t) -> {
            if (r instanceof StageResult.Staged) fetchesStaged.incrementAndGet();
            else fetchesMissed.incrementAndGet();
            fetchesInFlight.decrementAndGet();
        });
    }

    @Override
    public int onTick(long nowNanos) {
        int done = source.onTick() + releases.onTick(nowNanos);
        MembershipView v = view.get();
        if (v.valid() && v.digest() != lastDigest) {
            Set<String> nodes = new HashSet<>();
            Set<NodeIncarnation> incarnations = new HashSet<>();
            for (Member m : v.live()) {
                nodes.add(m.nodeId());
                incarnations.add(new NodeIncarnation(m.nodeId(), m.incarnation()));
            }
            for (NodeIncarnation gone : lastMembers) {
                if (!incarnations.contains(gone)) memberLeft.accept(gone);
            }
            lastMembers = Set.copyOf(incarnations);
            Set<String> changed = new HashSet<>(lastNodes);
            changed.addAll(nodes);
            for (String nodeId : changed) done += source.tickets().onRequesterChanged(nodeId, members.live(nodeId));
            lastDigest = v.digest();
            lastNodes = Set.copyOf(nodes);
        }
        return done;
    }

    /** A snapshot for {@code /status}. */
    public Status status() {
        TicketTable t = source.tickets();
        return new Status(t.size(), t.activeTransfers(), t.expiredTotal(), fetchesInFlight.get(), fetchesStaged.get(),
                fetchesMissed.get(), releases.pending(), releases.ackedTotal(), releases.abandonedTotal(),
                members.validForRemoteWork());
    }

    /** The nodes seen by the last membership change the tick handled (for tests). */
    List<String> lastNodes() {
        return List.copyOf(lastNodes);
    }
}
