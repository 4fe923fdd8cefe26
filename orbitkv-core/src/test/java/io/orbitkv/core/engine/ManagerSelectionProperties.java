package io.orbitkv.core.engine;

import io.orbitkv.state.BoundarySelection;
import io.orbitkv.state.Coverage;
import io.orbitkv.state.GroupCoverage;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.PageRange;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.Requirement;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.protocol.CompletionEvent;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.ProtocolLimits;
import io.orbitkv.state.protocol.QueryStatus;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.BeforeContainer;

import java.io.IOException;
import java.nio.file.Files;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The Manager's answer equals the recovery contract's own selection over what was published:
 * for a hybrid contract (full, sliding window with sinks, recurrent) and any published subset,
 * the boundary is {@link RecoveryContract#select}'s, the spans are exactly its required ranges,
 * every leased page holds its published bytes, and nothing stays leased after RELEASE.
 */
class ManagerSelectionProperties {

    static final int PAGES = 8;
    static ManagerFixture m;
    static final AtomicInteger NAMESPACES = new AtomicInteger();

    @BeforeContainer
    static void open() throws IOException {
        m = new ManagerFixture(Files.createTempDirectory("orbitkv-selection"), 640, ProtocolLimits.DEFAULTS,
                ManagerBounds.DEFAULTS);
    }

    @AfterContainer
    static void close() {
        m.close();
    }

    @Property(tries = 25)
    void theManagerSelectsWhatTheContractSelects(
            @ForAll @Size(PAGES) List<Boolean> full, @ForAll @Size(PAGES) List<Boolean> window,
            @ForAll @Size(PAGES) List<Boolean> checkpoints, @ForAll @IntRange(min = 1, max = 3) int windowPages,
            @ForAll @IntRange(min = 0, max = 1) int sinkPages, @ForAll @IntRange(min = 0, max = 2) int originPages,
            @ForAll @IntRange(min = 0, max = 15) int extraTokens) {
        RecoveryContract contract = new RecoveryContract(16, List.of(new StateGroup.Full(0),
                new StateGroup.SlidingWindow(1, windowPages * 16, sinkPages * 16), new StateGroup.Recurrent(2)));
        int n = NAMESPACES.incrementAndGet(); // a fresh namespace per try: earlier tries' pages are invisible
        Namespace ns = ManagerFixture.namespace("selection-" + n);
        long prompt = 42;
        long promptTokens = (long) PAGES * 16 + extraTokens;
        long origin = originPages * 16L;
        try (Client c = m.register("sel-" + n, 1, ns, contract)) {
            List<List<Boolean>> published = List.of(full, window, checkpoints);
            for (int g = 0; g < 3; g++) {
                for (int p = 0; p < PAGES; p++) if (published.get(g).get(p)) c.publish(prompt, g, p);
            }
            Reply.QueryResult r = (Reply.QueryResult) c.send(Client.query(1, 0, CompletionTarget.HOST_READY,
                    promptTokens, origin, prompt, new int[] {0, 1, 2}, PAGES));
            if (r.status() == QueryStatus.PENDING) {
                c.sink.await(1, CompletionEvent.QUERY_SETTLED);
                r = (Reply.QueryResult) c.send(new Request.QueryPoll(1, 0));
            }
            BoundarySelection expected = contract.select(coverage(published), promptTokens, origin);
            assertThat(r.hit()).isEqualTo(expected.hit());
            assertThat(r.boundaryTokens()).isEqualTo(expected.boundaryTokens());
            if (expected.hit()) {
                int required = 0;
                for (Requirement req : expected.required()) {
                    List<PageRange> want = switch (req) {
                        case Requirement.Pages pages -> pages.ranges();
                        case Requirement.Checkpoint cp -> List.of(new PageRange(cp.boundaryTokens() / 16 - 1,
                                cp.boundaryTokens() / 16));
                    };
                    List<PageRange> got = new ArrayList<>();
                    for (long[] s : ManagerCoreTest.spans(r, req.groupId())) got.add(new PageRange(s[0], s[1]));
                    assertThat(got).as("group %d", req.groupId()).isEqualTo(want.stream().filter(x -> x.pages() > 0).toList());
                    for (PageRange x : want) required += (int) x.pages();
                }
                assertThat(m.core.status().leases()).as("leases on exactly the required ranges").isEqualTo(required);
                c.assertBytes(r, prompt);
            }
            c.send(new Request.Release(1));
        }
        m.assertNothingHeld();
    }

    private static Coverage coverage(List<List<Boolean>> published) {
        Map<Integer, GroupCoverage> byGroup = new HashMap<>();
        for (int g = 0; g < 2; g++) {
            List<PageRange> ranges = new ArrayList<>();
            for (int p = 0; p < PAGES; p++) if (published.get(g).get(p)) ranges.add(new PageRange(p, p + 1));
            byGroup.put(g, GroupCoverage.pages(ranges));
        }
        long[] cps = new long[PAGES];
        int n = 0;
        for (int p = 0; p < PAGES; p++) if (published.get(2).get(p)) cps[n++] = (p + 1) * 16L;
        byGroup.put(2, GroupCoverage.checkpoints(java.util.Arrays.copyOf(cps, n)));
        return Coverage.of(byGroup);
    }
}
