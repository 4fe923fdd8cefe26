package io.orbitkv.state;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.List;
import java.util.Random;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

/** A demand is served only if it is exactly what the contract requires at its end. */
class RecoveryDemandProperties {

    private static final RecoveryContract HYBRID = new RecoveryContract(16, List.of(
            new StateGroup.Full(0),
            new StateGroup.SlidingWindow(1, 64, 20),
            new StateGroup.Recurrent(2)));

    @Property(tries = 300)
    void theContractsOwnDemandIsAcceptedAndEveryMutationRejected(
            @ForAll @IntRange(min = 0, max = 20) int originPages,
            @ForAll @IntRange(min = 1, max = 20) int spanPages,
            @ForAll @IntRange(min = 0, max = 13) int mutation,
            @ForAll long seed) {
        long origin = 16L * originPages;
        long end = origin + 16L * spanPages;
        RecoveryDemand good = new RecoveryDemand(16, origin, end, HYBRID.requiredRanges(end, origin));
        assertThat(good.validate(HYBRID)).isEqualTo(Validation.ok());
        assertThat(good.validate(HYBRID, end + 1)).isEqualTo(Validation.ok());

        RecoveryDemand bad = mutate(good, mutation, new Random(seed));
        if (mutation != 13) assertThat(bad).as("mutation %d", mutation).isNotEqualTo(good);
        Validation v = mutation == 13 ? bad.validate(HYBRID, end) : bad.validate(HYBRID);
        assertThat(v).as("mutation %d of %s gave %s", mutation, good, bad).isInstanceOf(Validation.Rejected.class);
    }

    /** Breaks {@code d} in one of 14 ways. */
    static RecoveryDemand mutate(RecoveryDemand d, int mutation, Random r) {
        List<Requirement> groups = new ArrayList<>(d.groups());
        int which = r.nextInt(groups.size());
        return switch (mutation) {
            case 0 -> new RecoveryDemand(d.pageTokens() * 2, d.originTokens(), d.endTokens(), groups);
            case 1 -> new RecoveryDemand(d.pageTokens(), d.originTokens() + 1 + r.nextInt(15), d.endTokens(), groups);
            case 2 -> new RecoveryDemand(d.pageTokens(), d.originTokens(), d.endTokens() + 1 + r.nextInt(15), groups);
            case 3 -> new RecoveryDemand(d.pageTokens(), d.endTokens(), d.endTokens(), groups); // end <= origin
            case 4 -> new RecoveryDemand(d.pageTokens(), d.originTokens(), d.endTokens() + 16, groups); // stale ranges
            case 5 -> new RecoveryDemand(d.pageTokens(), d.originTokens(), d.endTokens(), without(groups, which));
            case 6 -> new RecoveryDemand(d.pageTokens(), d.originTokens(), d.endTokens(), with(groups, groups.get(which)));
            case 7 -> new RecoveryDemand(d.pageTokens(), d.originTokens(), d.endTokens(), with(groups, new Requirement.Checkpoint(9, d.endTokens())));
            case 8 -> new RecoveryDemand(d.pageTokens(), d.originTokens(), d.endTokens(), replace(groups, 0, shrink(groups.get(0), r)));
            case 9 -> new RecoveryDemand(d.pageTokens(), d.originTokens(), d.endTokens(), replace(groups, 1, grow(groups.get(1))));
            case 10 -> new RecoveryDemand(d.pageTokens(), d.originTokens(), d.endTokens(),
                    replace(groups, 2, new Requirement.Checkpoint(2, d.endTokens() - 16 > 0 ? d.endTokens() - 16 : d.endTokens() + 16)));
            case 11 -> new RecoveryDemand(d.pageTokens(), d.originTokens(), d.endTokens(),
                    replace(groups, 2, new Requirement.Pages(2, List.of(new PageRange(0, d.endTokens() / 16)))));
            case 12 -> new RecoveryDemand(d.pageTokens(), d.originTokens(), d.endTokens(),
                    replace(groups, 0, new Requirement.Checkpoint(0, d.endTokens())));
            case 13 -> d; // valid in itself, but its end passes the cap of an end-token prompt
            default -> throw new IllegalArgumentException("mutation " + mutation);
        };
    }

    private static List<Requirement> without(List<Requirement> l, int i) {
        List<Requirement> out = new ArrayList<>(l);
        out.remove(i);
        return out;
    }

    private static List<Requirement> with(List<Requirement> l, Requirement extra) {
        List<Requirement> out = new ArrayList<>(l);
        out.add(extra);
        return out;
    }

    private static List<Requirement> replace(List<Requirement> l, int i, Requirement r) {
        List<Requirement> out = new ArrayList<>(l);
        out.set(i, r);
        return out;
    }

    /** Drops one page from the start or the end (or splits the range) of a page requirement. */
    private static Requirement shrink(Requirement req, Random r) {
        Requirement.Pages p = (Requirement.Pages) req;
        PageRange first = p.ranges().getFirst();
        List<PageRange> out = new ArrayList<>(p.ranges().subList(1, p.ranges().size()));
        if (first.pages() > 1) out.addFirst(new PageRange(first.startPage() + 1, first.endPage()));
        return new Requirement.Pages(p.groupId(), out);
    }

    /** Adds one page before the first range (or after the last when it starts at 0). */
    private static Requirement grow(Requirement req) {
        Requirement.Pages p = (Requirement.Pages) req;
        List<PageRange> out = new ArrayList<>(p.ranges());
        PageRange first = out.getFirst();
        if (first.startPage() > 0) out.set(0, new PageRange(first.startPage() - 1, first.endPage()));
        else out.set(out.size() - 1, new PageRange(out.getLast().startPage(), out.getLast().endPage() + 1));
        return new Requirement.Pages(p.groupId(), out);
    }

    @Test
    void nonNormalRangesAreRejectedEvenWhenTheyCoverTheSamePages() {
        RecoveryContract full = new RecoveryContract(16, List.of(new StateGroup.Full(0)));
        RecoveryDemand split = new RecoveryDemand(16, 0, 64, List.of(
                new Requirement.Pages(0, List.of(new PageRange(0, 2), new PageRange(2, 4)))));
        assertThat(split.validate(full)).isInstanceOf(Validation.Rejected.class);
        RecoveryDemand normal = new RecoveryDemand(16, 0, 64, List.of(
                new Requirement.Pages(0, List.of(new PageRange(0, 4)))));
        assertThat(normal.validate(full)).isEqualTo(Validation.ok());
    }

    @Test
    void reasonsNameTheBrokenRule() {
        RecoveryDemand missing = new RecoveryDemand(16, 0, 64, List.of(
                new Requirement.Pages(0, List.of(new PageRange(0, 4))),
                new Requirement.Checkpoint(2, 64)));
        assertThat(missing.validate(HYBRID)).isEqualTo(Validation.rejected("group 1 is missing"));
        RecoveryDemand pastCap = new RecoveryDemand(16, 0, 64, HYBRID.requiredRanges(64, 0));
        assertThat(pastCap.validate(HYBRID, 64)).isEqualTo(
                Validation.rejected("end 64 passes the cap 48 for a 64-token prompt"));
    }
}
