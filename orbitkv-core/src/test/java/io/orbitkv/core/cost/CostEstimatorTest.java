package io.orbitkv.core.cost;

import io.orbitkv.state.protocol.CompletionTarget;
import org.junit.jupiter.api.Test;

import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.within;

/** The estimate table on an injected clock: warm-up, expiry, EWMA and error, bound, contention. */
class CostEstimatorTest {

    private static final long MINUTE = TimeUnit.MINUTES.toNanos(1);
    private final CostEstimator estimator = new CostEstimator(CostConfig.defaults(true));
    private final CostKey key = CostKeys.route(CostPath.SSD_URING, 1 << 20);

    @Test
    void anEntryIsWarmAtExactlyFourSamples() {
        for (int i = 1; i <= 3; i++) {
            estimator.train(key, 100, i);
            assertThat(estimator.lookup(key, i)).isEqualTo(new Lookup.Cold(i));
        }
        estimator.train(key, 100, 4);
        assertThat(estimator.lookup(key, 4)).isInstanceOf(Lookup.Warm.class);
        assertThat(estimator.lookup(CostKeys.route(CostPath.SSD_POSITIONAL, 1 << 20), 4)).isInstanceOf(Lookup.Missing.class);
    }

    @Test
    void anEntryIdleForFiveMinutesExpiresAndMustWarmUpAgain() {
        for (int i = 0; i < 4; i++) estimator.train(key, 100, 0);
        assertThat(estimator.lookup(key, 5 * MINUTE - 1)).isInstanceOf(Lookup.Warm.class);
        assertThat(estimator.lookup(key, 5 * MINUTE)).isInstanceOf(Lookup.Missing.class);
        assertThat(estimator.expiredEntries()).isEqualTo(1);
        estimator.train(key, 100, 5 * MINUTE + 1);
        assertThat(estimator.lookup(key, 5 * MINUTE + 2)).isEqualTo(new Lookup.Cold(1));
    }

    @Test
    void aSampleKeepsAnIdleEntryAliveForAnotherFiveMinutes() {
        for (int i = 0; i < 4; i++) estimator.train(key, 100, 0);
        estimator.train(key, 100, 4 * MINUTE);
        assertThat(estimator.lookup(key, 8 * MINUTE)).isInstanceOf(Lookup.Warm.class);
    }

    @Test
    void meanAndErrorAreEwmasOfTheSamplesAndTheirDeviation() {
        estimator.train(key, 1000, 1);
        estimator.train(key, 2000, 2); // err = .25*1000 = 250; mean = 1250
        estimator.train(key, 1250, 3); // err = 250 + .25*(0 - 250) = 187.5; mean 1250
        estimator.train(key, 2250, 4); // err = 187.5 + .25*(1000 - 187.5) = 390.625; mean = 1500
        Lookup.Warm w = (Lookup.Warm) estimator.lookup(key, 10);
        assertThat(w.estimate().meanNanos()).isCloseTo(1500, within(1e-9));
        assertThat(w.estimate().errorNanos()).isCloseTo(390.625, within(1e-9));
        assertThat(w.estimate().samples()).isEqualTo(4);
        assertThat(w.estimate().ageNanos()).isEqualTo(6);
    }

    @Test
    void steadySamplesDriveTheErrorTowardsZero() {
        estimator.train(key, 0, 0);
        estimator.train(key, 10_000, 0);
        for (int i = 0; i < 60; i++) estimator.train(key, 5_000, 0);
        Lookup.Warm w = (Lookup.Warm) estimator.lookup(key, 0);
        assertThat(w.estimate().meanNanos()).isCloseTo(5_000, within(1.0));
        assertThat(w.estimate().errorNanos()).isLessThan(1.0);
    }

    @Test
    void theTableHoldsAtMost512EntriesAndEvictsTheLeastRecentlyUsed() {
        CostKey first = CostKeys.route(CostPath.SSD_URING, 1);
        estimator.train(first, 1, 0);
        for (int i = 1; i < 512; i++) {
            estimator.train(new CostKey(CostPath.SSD_URING, SampleKind.ROUTE, new ResourceId("ssd:x", i),
                    RepresentationFamily.RAW, CompletionTarget.HOST_READY, Shape.of(1, 1)), 1, 0);
        }
        assertThat(estimator.size()).isEqualTo(512);
        estimator.lookup(first, 0); // touch: no longer the least recently used
        CostKey second = new CostKey(CostPath.SSD_URING, SampleKind.ROUTE, new ResourceId("ssd:x", 1),
                RepresentationFamily.RAW, CompletionTarget.HOST_READY, Shape.of(1, 1));
        estimator.train(CostKeys.route(CostPath.DRAM_COPY, 1), 1, 0);
        assertThat(estimator.size()).isEqualTo(512);
        assertThat(estimator.evictedEntries()).isEqualTo(1);
        assertThat(estimator.lookup(first, 0)).isNotInstanceOf(Lookup.Missing.class);
        assertThat(estimator.lookup(second, 0)).isInstanceOf(Lookup.Missing.class);
    }

    @Test
    void aContendedEstimatorDropsTheUpdateInsteadOfBlocking() throws Exception {
        Thread[] other = new Thread[1];
        CostEstimator.Update[] seen = new CostEstimator.Update[1];
        var looked = new java.util.concurrent.atomic.AtomicReference<java.util.Optional<List<Lookup>>>();
        estimator.holdLockWhile(() -> {
            other[0] = Thread.ofPlatform().start(() -> {
                seen[0] = estimator.train(key, 100, 0);
                looked.set(estimator.tryLookup(List.of(key), 0));
            });
            try {
                other[0].join(); // returns although the lock is held: the update did not wait
            } catch (InterruptedException e) {
                throw new AssertionError(e);
            }
        });
        assertThat(seen[0]).isEqualTo(CostEstimator.Update.DROPPED_CONTENDED);
        assertThat(looked.get()).isEmpty();
        assertThat(estimator.droppedContended()).isEqualTo(2);
        assertThat(estimator.lookup(key, 0)).isInstanceOf(Lookup.Missing.class);
    }
}
