package io.orbitkv.state;

import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeMap;

/**
 * What is available to recover from, per group id: the absolute page ranges or checkpoints that
 * the adapter (or the Manager's evidence) can back with leases.
 *
 * <p>Immutable and thread-safe. A group of the contract that has no entry has nothing available.
 * {@link #validateFor} checks the entries against a contract (known group ids, the right form for
 * each kind, page-aligned checkpoints); {@link RecoveryContract#select} requires a valid coverage.
 */
public final class Coverage {

    private static final GroupCoverage.Pages NO_PAGES = GroupCoverage.pages(List.of());
    private static final GroupCoverage.Checkpoints NO_CHECKPOINTS = GroupCoverage.checkpoints();

    private final Map<Integer, GroupCoverage> byGroup;

    private Coverage(Map<Integer, GroupCoverage> byGroup) {
        this.byGroup = byGroup;
    }

    /** Coverage from a map of group id to what that group has. */
    public static Coverage of(Map<Integer, ? extends GroupCoverage> byGroup) {
        Objects.requireNonNull(byGroup, "byGroup");
        Map<Integer, GroupCoverage> copy = new TreeMap<>();
        byGroup.forEach((id, c) -> copy.put(Objects.requireNonNull(id, "group id"), Objects.requireNonNull(c, "coverage")));
        return new Coverage(Collections.unmodifiableMap(copy));
    }

    /** The entries, ordered by group id. */
    public Map<Integer, GroupCoverage> byGroup() {
        return byGroup;
    }

    /** Accepts this coverage for {@code contract}, or names the first entry that does not fit. */
    public Validation validateFor(RecoveryContract contract) {
        for (Map.Entry<Integer, GroupCoverage> e : byGroup.entrySet()) {
            int id = e.getKey();
            StateGroup group = contract.group(id).orElse(null);
            if (group == null) {
                return Validation.rejected("coverage names group " + id + ", which the contract does not have");
            }
            Validation v = switch (group) {
                case StateGroup.Full f -> pagesExpected(id, f.kind(), e.getValue());
                case StateGroup.SlidingWindow w -> pagesExpected(id, w.kind(), e.getValue());
                case StateGroup.Recurrent r -> switch (e.getValue()) {
                    case GroupCoverage.Pages p ->
                            Validation.rejected("group " + id + " is recurrent: coverage must list checkpoints, not pages");
                    case GroupCoverage.Checkpoints c -> alignedCheckpoints(id, c, contract.pageTokens());
                };
            };
            if (!v.isOk()) return v;
        }
        return Validation.ok();
    }

    GroupCoverage.Pages pagesOf(int groupId) {
        return switch (byGroup.getOrDefault(groupId, NO_PAGES)) {
            case GroupCoverage.Pages p -> p;
            case GroupCoverage.Checkpoints c ->
                    throw new IllegalArgumentException("group " + groupId + " needs page coverage, has checkpoints");
        };
    }

    GroupCoverage.Checkpoints checkpointsOf(int groupId) {
        return switch (byGroup.getOrDefault(groupId, NO_CHECKPOINTS)) {
            case GroupCoverage.Checkpoints c -> c;
            case GroupCoverage.Pages p ->
                    throw new IllegalArgumentException("group " + groupId + " needs checkpoints, has pages");
        };
    }

    private static Validation pagesExpected(int id, String kind, GroupCoverage c) {
        return switch (c) {
            case GroupCoverage.Pages p -> Validation.ok();
            case GroupCoverage.Checkpoints cp ->
                    Validation.rejected("group " + id + " is " + kind + ": coverage must list pages, not checkpoints");
        };
    }

    private static Validation alignedCheckpoints(int id, GroupCoverage.Checkpoints c, int pageTokens) {
        for (long t : c.positions()) {
            if (t % pageTokens != 0) {
                return Validation.rejected("group " + id + " checkpoint " + t
                        + " is not a multiple of page_tokens " + pageTokens);
            }
        }
        return Validation.ok();
    }

    @Override
    public boolean equals(Object o) {
        return o instanceof Coverage c && c.byGroup.equals(byGroup);
    }

    @Override
    public int hashCode() {
        return byGroup.hashCode();
    }

    @Override
    public String toString() {
        return "Coverage" + byGroup;
    }
}
