package io.orbitkv.state;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Random;
import java.util.Set;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.statistics.Statistics;

/**
 * {@link RecoveryContract} against the brute-force {@link RecoveryModel}: legality, maximality,
 * and sufficiency and minimality of the required ranges. jqwik prints the seed of a failure;
 * rerun with {@code @Property(seed = "...")}.
 */
class RecoveryContractProperties {

    /** A random contract, coverage, prompt and origin, small enough to brute-force. */
    record Scenario(RecoveryModel model, long promptTokens, long originTokens) {
    }

    @Provide
    Arbitrary<Scenario> scenarios() {
        return Arbitraries.randomValue(RecoveryContractProperties::scenario);
    }

    static Scenario scenario(Random random) {
        int p = new int[] {1, 2, 4, 16}[random.nextInt(4)];
        int maxPages = 4 + random.nextInt(20);
        int groupCount = 1 + random.nextInt(4);
        List<StateGroup> groups = new ArrayList<>();
        Map<Integer, Set<Long>> pages = new HashMap<>();
        Map<Integer, Set<Long>> checkpoints = new HashMap<>();
        for (int i = 0; i < groupCount; i++) {
            int id = i * 3 + random.nextInt(3); // unique, not dense
            double density = 0.5 + 0.5 * random.nextDouble();
            switch (random.nextInt(3)) {
                case 0 -> groups.add(new StateGroup.Full(id));
                case 1 -> groups.add(new StateGroup.SlidingWindow(id, 1 + random.nextInt(p * 8),
                        random.nextBoolean() ? 0 : random.nextInt(p * 4 + 1)));
                default -> groups.add(new StateGroup.Recurrent(id));
            }
            if (groups.getLast() instanceof StateGroup.Recurrent) {
                if (random.nextInt(8) == 0) continue; // no coverage entry at all
                Set<Long> cps = new HashSet<>();
                for (long k = 1; k <= maxPages; k++) if (random.nextDouble() < density * 0.6) cps.add(k * p);
                checkpoints.put(id, cps);
            } else {
                if (random.nextInt(8) == 0) continue;
                Set<Long> avail = new HashSet<>();
                for (long k = 0; k < maxPages; k++) if (random.nextDouble() < density) avail.add(k);
                pages.put(id, avail);
            }
        }
        long prompt = 1 + random.nextInt(maxPages * p + p);
        long origin = random.nextInt(4) == 0 ? 0 : (long) random.nextInt(maxPages / 2 + 1) * p;
        return new Scenario(new RecoveryModel(p, groups, pages, checkpoints), prompt, origin);
    }

    @Property(tries = 400)
    void legalityMatchesTheModel(@ForAll("scenarios") Scenario s) {
        RecoveryContract c = s.model().contract();
        Coverage cov = s.model().coverage();
        for (long t = 0; t <= s.promptTokens() + s.model().pageTokens(); t++) {
            assertThat(c.isLegal(cov, s.promptTokens(), s.originTokens(), t))
                    .as("t=%d in %s", t, s).isEqualTo(s.model().legal(t, s.promptTokens(), s.originTokens()));
        }
    }

    @Property(tries = 400)
    void selectsTheLargestLegalBoundaryAndExplainsEveryLongerCandidate(@ForAll("scenarios") Scenario s) {
        RecoveryContract c = s.model().contract();
        Coverage cov = s.model().coverage();
        BoundarySelection sel = c.select(cov, s.promptTokens(), s.originTokens(), Integer.MAX_VALUE);
        long best = s.model().best(s.promptTokens(), s.originTokens());
        long p = c.pageTokens();
        long cap = c.capTokens(s.promptTokens());
        switch (sel) {
            case BoundarySelection.Hit h -> {
                assertThat(h.boundaryTokens()).as("%s", s).isEqualTo(best);
                assertThat(h.required()).isEqualTo(c.requiredRanges(best, s.originTokens()));
            }
            case BoundarySelection.NoHit n -> {
                assertThat(best).as("%s", s).isEqualTo(-1);
                assertThat(n.boundaryTokens()).isEqualTo(s.originTokens());
            }
        }
        Statistics.label("hit").collect(sel.hit());
        long floor = sel.boundaryTokens();
        List<Long> expectedCandidates = new ArrayList<>();
        for (long t = cap; t > floor; t -= p) expectedCandidates.add(t);
        assertThat(sel.rejected()).extracting(Rejection::boundaryTokens).containsExactlyElementsOf(expectedCandidates);
        assertThat(sel.rejectedCount()).isEqualTo(expectedCandidates.size());
        for (Rejection r : sel.rejected()) {
            // the reported group is the first, in contract order, that the model finds unrecoverable
            StateGroup first = s.model().groups().stream()
                    .filter(g -> !s.model().recoverable(g, r.boundaryTokens(), s.originTokens()))
                    .findFirst().orElseThrow();
            assertThat(r.groupId()).isEqualTo(first.id());
            if (r.reason() instanceof Rejection.MissingPage(long page, Rejection.Role role)) {
                Set<Long> needed = s.model().neededPages(first, r.boundaryTokens(), s.originTokens());
                assertThat(needed).contains(page);
                assertThat(s.model().pages().getOrDefault(first.id(), Set.of())).doesNotContain(page);
            }
        }
    }

    @Property(tries = 400)
    void requiredRangesAreExactlyTheNeededPagesAndSufficient(@ForAll("scenarios") Scenario s) {
        RecoveryContract c = s.model().contract();
        BoundarySelection sel = c.select(s.model().coverage(), s.promptTokens(), s.originTokens());
        if (!(sel instanceof BoundarySelection.Hit hit)) return;
        long t = hit.boundaryTokens();
        // coverage restricted to exactly the required ranges still makes t legal
        Map<Integer, GroupCoverage> only = new HashMap<>();
        for (Requirement r : hit.required()) {
            StateGroup g = c.group(r.groupId()).orElseThrow();
            switch (r) {
                case Requirement.Pages pr -> {
                    Set<Long> listed = new HashSet<>();
                    for (PageRange range : pr.ranges()) {
                        for (long q = range.startPage(); q < range.endPage(); q++) listed.add(q);
                    }
                    assertThat(listed).as("group %d at %d", g.id(), t)
                            .isEqualTo(s.model().neededPages(g, t, s.originTokens()));
                    only.put(r.groupId(), GroupCoverage.pages(pr.ranges()));
                }
                case Requirement.Checkpoint cp -> {
                    assertThat(cp.boundaryTokens()).isEqualTo(t);
                    only.put(r.groupId(), GroupCoverage.checkpoints(t));
                }
            }
        }
        assertThat(c.isLegal(Coverage.of(only), s.promptTokens(), s.originTokens(), t)).isTrue();
    }

    @Property(tries = 300)
    void removingAnyRequiredPageOrCheckpointMakesTheBoundaryIllegal(@ForAll("scenarios") Scenario s) {
        RecoveryModel m = s.model();
        RecoveryContract c = m.contract();
        BoundarySelection sel = c.select(m.coverage(), s.promptTokens(), s.originTokens());
        if (!(sel instanceof BoundarySelection.Hit hit)) return;
        long t = hit.boundaryTokens();
        for (Requirement r : hit.required()) {
            switch (r) {
                case Requirement.Pages pr -> {
                    for (PageRange range : pr.ranges()) {
                        for (long q = range.startPage(); q < range.endPage(); q++) {
                            Map<Integer, Set<Long>> fewer = new HashMap<>(m.pages());
                            Set<Long> set = new HashSet<>(fewer.get(r.groupId()));
                            set.remove(q);
                            fewer.put(r.groupId(), set);
                            RecoveryModel without = new RecoveryModel(m.pageTokens(), m.groups(), fewer, m.checkpoints());
                            Optional<Rejection> blocker = c.firstBlocker(without.coverage(), t, s.originTokens());
                            assertThat(blocker).as("without page %d of group %d", q, r.groupId()).isPresent();
                        }
                    }
                }
                case Requirement.Checkpoint cp -> {
                    Map<Integer, Set<Long>> fewer = new HashMap<>(m.checkpoints());
                    Set<Long> set = new HashSet<>(fewer.get(r.groupId()));
                    set.remove(t);
                    fewer.put(r.groupId(), set);
                    RecoveryModel without = new RecoveryModel(m.pageTokens(), m.groups(), m.pages(), fewer);
                    assertThat(c.isLegal(without.coverage(), s.promptTokens(), s.originTokens(), t)).isFalse();
                }
            }
        }
    }
}
