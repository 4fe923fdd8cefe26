package io.orbitkv.core.query;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.cost.ByteCount;
import io.orbitkv.core.cost.CostConfig;
import io.orbitkv.core.cost.CostKey;
import io.orbitkv.core.cost.CostObserver;
import io.orbitkv.core.cost.CostPath;
import io.orbitkv.core.cost.Observation;
import io.orbitkv.core.cost.RepresentationFamily;
import io.orbitkv.core.cost.ResourceId;
import io.orbitkv.core.cost.SampleKind;
import io.orbitkv.core.cost.SelectionConfig;
import io.orbitkv.core.cost.SourceMedium;
import io.orbitkv.core.cost.SourceOffer;
import io.orbitkv.core.cost.Terminal;
import io.orbitkv.core.cost.Timeline;
import io.orbitkv.core.log.UnexpectedErrors;
import io.orbitkv.core.storage.StageResult;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.protocol.CompletionTarget;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;

import static org.assertj.core.api.Assertions.assertThat;

/** Attempt order and hand-over of {@link SourceSelector} over scripted routes (no I/O). */
class SourceSelectorTest {

    static final StateKey KEY = StateKey.ofBytes(new byte[32]);
    static final StageResult ABSENT = new StageResult.Miss(KEY, StageResult.MissReason.NOT_FOUND);

    /** A route answering {@code result}, logging its name when staged. */
    record Scripted(String name, Optional<SourceOffer> offer, StageResult result, List<String> log)
            implements SourceSelector.Route {
        @Override
        public CompletableFuture<StageResult> stage() {
            log.add(name);
            return CompletableFuture.completedFuture(result);
        }
    }

    static SourceOffer offer(String resource, SourceMedium medium) {
        return new SourceOffer(new CostKey(CostPath.PEER_FETCH, SampleKind.ROUTE, new ResourceId(resource, 1),
                RepresentationFamily.RAW, CompletionTarget.HOST_READY, SourceSelector.pageShape(20_480)), medium, 1);
    }

    static CostObserver observer(SelectionConfig selection) {
        return CostObserver.create(CostConfig.defaults(true), selection, new SimpleMeterRegistry(), () -> 0L);
    }

    static void inject(CostObserver o, SourceOffer offer, long nanos) {
        for (int i = 0; i < o.config().warmSamples() + 2; i++) {
            o.record(new Observation(offer.key(), Terminal.SUCCEEDED, new Timeline(0, 0, 0, nanos),
                    ByteCount.known(1), ByteCount.known(1)));
        }
    }

    @Test
    void everyResultIsClassifiedBeforeOrAfterPayload() {
        assertThat(SourceSelector.attempt(new StageResult.Busy(StageResult.BusyReason.DRAM_FULL)))
                .isEqualTo(SourceSelector.Attempt.REJECTED);
        for (StageResult.MissReason r : StageResult.MissReason.values()) {
            SourceSelector.Attempt expected = switch (r) {
                case NOT_FOUND, UNKNOWN_NAMESPACE, CLOSED -> SourceSelector.Attempt.REJECTED;
                case CORRUPT, EVICTED, IO_ERROR -> SourceSelector.Attempt.FAILED;
            };
            assertThat(SourceSelector.attempt(new StageResult.Miss(KEY, r))).as(r.name()).isEqualTo(expected);
        }
    }

    @Test
    void rejectionsHandOverInDefaultOrderAndAFailureStopsTheChain() {
        List<String> log = new ArrayList<>();
        SourceSelector s = new SourceSelector(CostObserver.disabled());
        StageResult busy = new StageResult.Busy(StageResult.BusyReason.INFLIGHT_TABLE_FULL);
        StageResult broken = new StageResult.Miss(KEY, StageResult.MissReason.IO_ERROR);
        List<SourceSelector.Route> routes = List.of(
                new Scripted("local", Optional.empty(), busy, log),
                new Scripted("peer", Optional.empty(), broken, log),
                new Scripted("third", Optional.empty(), ABSENT, log));
        assertThat(s.stage(routes, ABSENT).join()).isEqualTo(broken);
        assertThat(log).containsExactly("local", "peer");
    }

    @Test
    void allRejectedAnswersTheLastRejection() {
        List<String> log = new ArrayList<>();
        StageResult busy = new StageResult.Busy(StageResult.BusyReason.DRAM_FULL);
        List<SourceSelector.Route> routes = List.of(new Scripted("local", Optional.empty(), ABSENT, log),
                new Scripted("peer", Optional.empty(), busy, log));
        assertThat(new SourceSelector(CostObserver.disabled()).stage(routes, ABSENT).join()).isEqualTo(busy);
        assertThat(log).containsExactly("local", "peer");
    }

    @Test
    void aSwitchPutsTheChosenRouteFirstAndKeepsTheRestInDefaultOrder() {
        CostObserver o = observer(SelectionConfig.sameMedium());
        SourceOffer local = offer("ssd:local", SourceMedium.SSD);
        SourceOffer slowPeer = offer("peer:b/SSD", SourceMedium.SSD);
        SourceOffer fastPeer = offer("peer:c/SSD", SourceMedium.SSD);
        inject(o, local, 10_000_000);
        inject(o, slowPeer, 20_000_000);
        inject(o, fastPeer, 1_000);
        List<String> log = new ArrayList<>();
        List<SourceSelector.Route> routes = List.of(new Scripted("local", Optional.of(local), ABSENT, log),
                new Scripted("b", Optional.of(slowPeer), ABSENT, log),
                new Scripted("c", Optional.of(fastPeer), ABSENT, log));
        assertThat(new SourceSelector(o).order(routes)).extracting(r -> ((Scripted) r).name())
                .containsExactly("c", "local", "b");
        assertThat(o.selectionSwitched()).isEqualTo(1);
    }

    @Test
    void crossMediumNeedsItsFlagAndSelectionOffKeepsTheDefault() {
        SourceOffer local = offer("ssd:local", SourceMedium.SSD);
        SourceOffer peerDram = offer("peer:b/DRAM", SourceMedium.DRAM);
        List<String> log = new ArrayList<>();
        List<SourceSelector.Route> routes = List.of(new Scripted("local", Optional.of(local), ABSENT, log),
                new Scripted("b", Optional.of(peerDram), ABSENT, log));
        for (SelectionConfig config : List.of(SelectionConfig.off(), SelectionConfig.sameMedium(),
                SelectionConfig.crossMedium())) {
            CostObserver o = observer(config);
            inject(o, local, 10_000_000);
            inject(o, peerDram, 1_000);
            String first = ((Scripted) new SourceSelector(o).order(routes).getFirst()).name();
            assertThat(first).as(config.toString()).isEqualTo(config.crossMediumEnabled() ? "b" : "local");
        }
        assertThat(log).isEmpty();
    }

    @Test
    void aRouteThatThrowsIsCountedAsABugAndEndsAsAMiss() {
        List<String> log = new ArrayList<>();
        SourceSelector.Route broken = new SourceSelector.Route() {
            @Override
            public Optional<SourceOffer> offer() {
                return Optional.empty();
            }

            @Override
            public CompletableFuture<StageResult> stage() {
                log.add("broken");
                throw new IllegalStateException("a bug in a route");
            }
        };
        StageResult served = new StageResult.Miss(KEY, StageResult.MissReason.CORRUPT);
        long before = UnexpectedErrors.count(UnexpectedErrors.Layer.QUERY);

        StageResult r = new SourceSelector(CostObserver.disabled())
                .stage(List.of(broken, new Scripted("next", Optional.empty(), served, log)), ABSENT).join();

        assertThat(log).as("no other route after a bug").containsExactly("broken");
        assertThat(r).isEqualTo(ABSENT);
        assertThat(UnexpectedErrors.count(UnexpectedErrors.Layer.QUERY) - before).isEqualTo(1);
    }
}
