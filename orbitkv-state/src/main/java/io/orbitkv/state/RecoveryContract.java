package io.orbitkv.state;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;

/**
 * A model's recovery rules: the page size and the state groups, each with its own rule. Decides
 * which boundaries are legal, selects the longest, and says exactly what to read for it.
 *
 * <p>Immutable and thread-safe. Invariants: {@code pageTokens > 0}; at least one group; group ids
 * unique. Normative semantics ({@code docs/state-contract.md} is the long form), with
 * {@code P = pageTokens}, {@code o = origin/P}, {@code k = t/P}:
 * <ul>
 *   <li>candidates are multiples of {@code P} with {@code origin < t <= cap}, where
 *       {@code cap} is the largest multiple of {@code P} that is {@code <= promptTokens - 1}
 *       (the engine always computes at least one prompt token);</li>
 *   <li>{@code full}: pages {@code [o, k)};</li>
 *   <li>{@code sliding_window(W, S)}: pages {@code [floor(max(origin, t-W)/P), k)} plus the sink
 *       pages {@code [o, min(ceil(S/P), k))};</li>
 *   <li>{@code recurrent}: the checkpoint at exactly {@code t};</li>
 *   <li>{@code t} is legal iff it is a candidate and every group has everything it needs; the
 *       selected boundary is the largest legal {@code t}.</li>
 * </ul>
 *
 * <p>Design note: each group check is one binary search over the coverage's merged ranges
 * ({@link GroupCoverage.Pages#firstMissing}), never a walk over the window's pages, so a
 * 128k-token window at {@code P = 16} (8,192 pages) costs the same as a 1-page window, and a
 * selection costs {@code O(C * G * log R)} for {@code C} candidates scanned from the top,
 * {@code G} groups, {@code R} coverage ranges. The scan stops at the first legal candidate;
 * 8,192 refused candidates of a 3-group hybrid with a 128k window took about 0.23 ms here.
 *
 * @param pageTokens tokens per page ({@code P})
 * @param groups     the state groups, in the order their blockers are reported
 */
public record RecoveryContract(int pageTokens, List<StateGroup> groups) {

    /** Rejections a {@link #select(Coverage, long, long)} reports before it only counts them. */
    public static final int DEFAULT_REPORTED_REJECTIONS = 1024;

    public RecoveryContract {
        if (pageTokens <= 0) throw new IllegalArgumentException("page_tokens must be > 0: " + pageTokens);
        groups = List.copyOf(groups);
        if (groups.isEmpty()) throw new IllegalArgumentException("a contract needs at least one group");
        Set<Integer> ids = new HashSet<>();
        for (StateGroup g : groups) {
            if (!ids.add(g.id())) throw new IllegalArgumentException("duplicate group id " + g.id());
        }
    }

    /** The group with this id, if the contract has one. */
    public Optional<StateGroup> group(int id) {
        for (StateGroup g : groups) {
            if (g.id() == id) return Optional.of(g);
        }
        return Optional.empty();
    }

    /** The largest multiple of {@code P} that is {@code <= promptTokens - 1}. */
    public long capTokens(long promptTokens) {
        if (promptTokens < 1) throw new IllegalArgumentException("prompt must have at least one token: " + promptTokens);
        return (promptTokens - 1) / pageTokens * pageTokens;
    }

    /**
     * Exactly what each group must read to recover at {@code boundaryTokens} from
     * {@code originTokens}, in contract order. Nothing outside these is read.
     */
    public List<Requirement> requiredRanges(long boundaryTokens, long originTokens) {
        requireSpan(boundaryTokens, originTokens);
        List<Requirement> out = new ArrayList<>(groups.size());
        for (StateGroup g : groups) out.add(required(g, boundaryTokens, originTokens));
        return List.copyOf(out);
    }

    /** What group {@code g} must read at {@code t} (see the class comment). */
    Requirement required(StateGroup g, long t, long origin) {
        long o = origin / pageTokens;
        long k = t / pageTokens;
        return switch (g) {
            case StateGroup.Full f -> new Requirement.Pages(f.id(), List.of(new PageRange(o, k)));
            case StateGroup.SlidingWindow w -> {
                List<PageRange> parts = new ArrayList<>(2);
                long sinkEnd = sinkEndPage(w, k);
                if (sinkEnd > o) parts.add(new PageRange(o, sinkEnd));
                parts.add(new PageRange(windowStartPage(w, t, origin), k));
                yield new Requirement.Pages(w.id(), PageRange.normalize(parts));
            }
            case StateGroup.Recurrent r -> new Requirement.Checkpoint(r.id(), t);
        };
    }

    /**
     * The first group (contract order) that cannot be recovered at {@code t}, with the first
     * thing it lacks; empty when every group can. Does not check {@code t} against the cap.
     */
    public Optional<Rejection> firstBlocker(Coverage coverage, long boundaryTokens, long originTokens) {
        requireSpan(boundaryTokens, originTokens);
        for (StateGroup g : groups) {
            Optional<Rejection.Reason> r = blocker(g, coverage, boundaryTokens, originTokens);
            if (r.isPresent()) return Optional.of(new Rejection(boundaryTokens, g.id(), r.get()));
        }
        return Optional.empty();
    }

    /** True iff {@code t} is a candidate for this prompt and origin and no group blocks it. */
    public boolean isLegal(Coverage coverage, long promptTokens, long originTokens, long boundaryTokens) {
        requireOrigin(originTokens);
        if (boundaryTokens % pageTokens != 0) return false;
        if (boundaryTokens <= originTokens || boundaryTokens > capTokens(promptTokens)) return false;
        return firstBlocker(coverage, boundaryTokens, originTokens).isEmpty();
    }

    /** {@link #select(Coverage, long, long, int)} reporting {@value #DEFAULT_REPORTED_REJECTIONS} rejections. */
    public BoundarySelection select(Coverage coverage, long promptTokens, long originTokens) {
        return select(coverage, promptTokens, originTokens, DEFAULT_REPORTED_REJECTIONS);
    }

    /**
     * Selects the largest legal boundary. Candidates are scanned from the cap down; each refused
     * one is reported (up to {@code maxReportedRejections}, then only counted) with its first
     * blocking group. Once no more are reported, the candidates above a full group's first missing
     * page are counted without being checked one by one (each is blocked by that group), so a
     * miss of an n-page prompt costs a few checks instead of n.
     *
     * @throws IllegalArgumentException if the coverage does not {@link Coverage#validateFor fit}
     *         this contract, the origin is negative or not page-aligned, or the prompt is empty
     */
    public BoundarySelection select(Coverage coverage, long promptTokens, long originTokens,
                                    int maxReportedRejections) {
        requireOrigin(originTokens);
        if (maxReportedRejections < 0) throw new IllegalArgumentException("maxReportedRejections < 0");
        if (coverage.validateFor(this) instanceof Validation.Rejected(String reason)) {
            throw new IllegalArgumentException(reason);
        }
        long cap = capTokens(promptTokens);
        List<Rejection> rejected = new ArrayList<>(Math.min(maxReportedRejections, 64));
        long rejectedCount = 0;
        for (long t = cap; t > originTokens; ) {
            Optional<Rejection> blocker = firstBlocker(coverage, t, originTokens);
            if (blocker.isEmpty()) {
                return new BoundarySelection.Hit(t, requiredRanges(t, originTokens), rejected, rejectedCount);
            }
            rejectedCount++;
            if (rejected.size() < maxReportedRejections) {
                rejected.add(blocker.get());
                t -= pageTokens;
                continue;
            }
            long next = Math.max(originTokens, highestUnblockedByFullGroups(coverage, t, originTokens));
            rejectedCount += (t - pageTokens - next) / pageTokens; // the candidates in (next, t)
            t = next;
        }
        return new BoundarySelection.NoHit(originTokens, rejected, rejectedCount);
    }

    /**
     * The highest candidate below {@code t} that no full group blocks: a boundary needs every page
     * of a full group from the origin up to it, so none lies above a full group's first missing page.
     */
    private long highestUnblockedByFullGroups(Coverage coverage, long t, long originTokens) {
        long below = t / pageTokens - 1;
        for (StateGroup g : groups) {
            if (g instanceof StateGroup.Full f) {
                below = Math.min(below, coverage.pagesOf(f.id()).firstMissing(originTokens / pageTokens, t / pageTokens));
            }
        }
        return below * pageTokens;
    }

    private Optional<Rejection.Reason> blocker(StateGroup g, Coverage coverage, long t, long origin) {
        long o = origin / pageTokens;
        long k = t / pageTokens;
        return switch (g) {
            case StateGroup.Full f -> missing(coverage.pagesOf(f.id()), o, k, Rejection.Role.PREFIX);
            case StateGroup.SlidingWindow w -> {
                GroupCoverage.Pages pages = coverage.pagesOf(w.id());
                Optional<Rejection.Reason> sink = missing(pages, o, sinkEndPage(w, k), Rejection.Role.SINK);
                yield sink.isPresent() ? sink
                        : missing(pages, windowStartPage(w, t, origin), k, Rejection.Role.WINDOW);
            }
            case StateGroup.Recurrent r -> coverage.checkpointsOf(r.id()).contains(t)
                    ? Optional.empty()
                    : Optional.of(new Rejection.MissingCheckpoint(t));
        };
    }

    /**
     * The retention rule: the pages of page group {@code groupId} that some future legal boundary
     * of one token chain can still need, given the chain's first {@code completeTokens} tokens
     * (rounded down to pages) and the boundaries at which every recurrent group of the contract has
     * a checkpoint on that chain. A page outside them can never be read (nothing outside
     * {@link #requiredRanges} is read), so a publisher need not publish or keep it.
     *
     * <ul>
     *   <li>Without a recurrent group every page boundary {@code t <= completeTokens} can be legal
     *       (for a prompt that ends right after it), and page {@code i} is needed at
     *       {@code (i+1)*P}: all pages {@code [0, completeTokens/P)}.</li>
     *   <li>With one, only checkpoint boundaries can be legal: the union of this group's
     *       {@code requiredRanges(t)} from origin 0 over the checkpoints {@code t <= completeTokens}.
     *       A full group keeps {@code [0, max t / P)}; a sliding window of {@code W} with
     *       {@code S} sinks keeps only the windows before the checkpoints and the sink pages.</li>
     * </ul>
     *
     * Work is proportional to the number of checkpoints (at most {@code completeTokens/P}), never to
     * the window. Ranges in normal form; empty when nothing is needed.
     *
     * @throws IllegalArgumentException if {@code groupId} is not a page group of this contract, or a
     *         checkpoint is not a positive multiple of {@code P}
     */
    public List<PageRange> retainedRanges(int groupId, long completeTokens, List<Long> checkpointBoundaries) {
        StateGroup g = group(groupId).orElseThrow(() -> new IllegalArgumentException("no group " + groupId));
        if (g instanceof StateGroup.Recurrent) throw new IllegalArgumentException("group " + groupId + " is recurrent: it keeps checkpoints, not pages");
        if (completeTokens < 0) throw new IllegalArgumentException("completeTokens must be >= 0: " + completeTokens);
        long pages = completeTokens / pageTokens;
        boolean recurrent = groups.stream().anyMatch(x -> x instanceof StateGroup.Recurrent);
        if (!recurrent) return pages == 0 ? List.of() : List.of(new PageRange(0, pages));
        List<PageRange> kept = new ArrayList<>();
        for (long t : checkpointBoundaries) {
            if (t <= 0 || t % pageTokens != 0) throw new IllegalArgumentException("checkpoint not a positive multiple of " + pageTokens + ": " + t);
            if (t > pages * pageTokens) continue;
            if (required(g, t, 0) instanceof Requirement.Pages r) kept.addAll(r.ranges());
        }
        return kept.isEmpty() ? List.of() : PageRange.normalize(kept);
    }

    private static Optional<Rejection.Reason> missing(GroupCoverage.Pages pages, long from, long to, Rejection.Role role) {
        long first = pages.firstMissing(from, to);
        return first < to ? Optional.of(new Rejection.MissingPage(first, role)) : Optional.empty();
    }

    /** {@code floor(max(origin, t - W) / P)}. */
    private long windowStartPage(StateGroup.SlidingWindow w, long t, long origin) {
        return Math.max(origin, t - w.windowTokens()) / pageTokens;
    }

    /** {@code min(ceil(S / P), k)}: one past the last sink page below the boundary page. */
    private long sinkEndPage(StateGroup.SlidingWindow w, long k) {
        return Math.min(Math.ceilDiv((long) w.sinkTokens(), pageTokens), k);
    }

    private void requireOrigin(long originTokens) {
        if (originTokens < 0 || originTokens % pageTokens != 0) {
            throw new IllegalArgumentException("origin must be a non-negative multiple of page_tokens "
                    + pageTokens + ": " + originTokens);
        }
    }

    private void requireSpan(long boundaryTokens, long originTokens) {
        requireOrigin(originTokens);
        if (boundaryTokens % pageTokens != 0 || boundaryTokens <= originTokens) {
            throw new IllegalArgumentException("boundary must be a multiple of page_tokens " + pageTokens
                    + " above the origin " + originTokens + ": " + boundaryTokens);
        }
    }
}
