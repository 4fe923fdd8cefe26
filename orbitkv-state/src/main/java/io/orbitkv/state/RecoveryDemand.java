package io.orbitkv.state;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * A selected-boundary read as the engine sends it: page size, the origin it already holds, the
 * selected end, and every group's required range. The Manager serves it only if
 * {@link #validate(RecoveryContract)} accepts it; a rejected demand is never partly served.
 *
 * <p>Immutable value; it may carry anything a peer sent (the constructor only rejects nulls), and
 * validation says what is wrong with it.
 *
 * <p>Design note: validation recomputes the contract's {@link RecoveryContract#requiredRanges}
 * for the demand's end and compares group by group, rather than checking ranges for plausibility:
 * a demand that reads more or less than the contract requires is exactly the bug (an engine
 * trimming a window, a stale origin) that would restore state which does not match the prefix.
 *
 * @param pageTokens   tokens per page as the engine sees it
 * @param originTokens tokens the engine already holds (page-aligned)
 * @param endTokens    the selected boundary (page-aligned, {@code > originTokens})
 * @param groups       one requirement per contract group
 */
public record RecoveryDemand(int pageTokens, long originTokens, long endTokens, List<Requirement> groups) {

    public RecoveryDemand {
        groups = List.copyOf(Objects.requireNonNull(groups, "groups"));
    }

    /** Accepts the demand iff it is exactly what {@code contract} requires at its end. */
    public Validation validate(RecoveryContract contract) {
        int p = contract.pageTokens();
        if (pageTokens != p) {
            return Validation.rejected("page_tokens " + pageTokens + " differs from the contract's " + p);
        }
        if (originTokens < 0 || originTokens % p != 0) {
            return Validation.rejected("origin " + originTokens + " is not a non-negative multiple of " + p);
        }
        if (endTokens % p != 0) {
            return Validation.rejected("end " + endTokens + " is not a multiple of " + p);
        }
        if (endTokens <= originTokens) {
            return Validation.rejected("end " + endTokens + " is not above the origin " + originTokens);
        }
        Map<Integer, Requirement> byGroup = new HashMap<>();
        for (Requirement r : groups) {
            if (contract.group(r.groupId()).isEmpty()) {
                return Validation.rejected("group " + r.groupId() + " is not in the contract");
            }
            if (byGroup.put(r.groupId(), r) != null) {
                return Validation.rejected("group " + r.groupId() + " appears more than once");
            }
        }
        for (Requirement expected : contract.requiredRanges(endTokens, originTokens)) {
            Requirement given = byGroup.get(expected.groupId());
            if (given == null) {
                return Validation.rejected("group " + expected.groupId() + " is missing");
            }
            if (!given.equals(expected)) {
                return Validation.rejected("group " + expected.groupId() + " requires " + describe(expected)
                        + " at end " + endTokens + ", demand has " + describe(given));
            }
        }
        return Validation.ok();
    }

    /** {@link #validate(RecoveryContract)}, and the end must not pass the prompt's cap. */
    public Validation validate(RecoveryContract contract, long promptTokens) {
        if (promptTokens < 1) return Validation.rejected("prompt must have at least one token");
        long cap = contract.capTokens(promptTokens);
        if (endTokens > cap) {
            return Validation.rejected("end " + endTokens + " passes the cap " + cap + " for a "
                    + promptTokens + "-token prompt");
        }
        return validate(contract);
    }

    private static String describe(Requirement r) {
        return switch (r) {
            case Requirement.Pages p -> "pages " + p.ranges();
            case Requirement.Checkpoint c -> "checkpoint " + c.boundaryTokens();
        };
    }
}
