package io.orbitkv.core.query;

import io.orbitkv.testkit.StressTest;
import org.jetbrains.lincheck.datastructures.IntGen;
import org.jetbrains.lincheck.datastructures.ModelCheckingOptions;
import org.jetbrains.lincheck.datastructures.Operation;
import org.jetbrains.lincheck.datastructures.Param;
import org.jetbrains.lincheck.datastructures.ThreadIdGen;
import org.jetbrains.lincheck.datastructures.Validate;
import org.junit.jupiter.api.Test;

/**
 * {@link Budget} under Lincheck's model checker: every interleaving it explores of 3 threads
 * taking and giving back amounts of a 4-unit budget must be linearizable to {@link Spec}, the
 * sequential specification, and must leave {@code 0 <= used <= capacity} (checked after every
 * scenario).
 *
 * <p>Spec: {@code tryAcquire(n)} takes {@code n} exactly when {@code n <= capacity - used} and
 * otherwise changes nothing (all or nothing: a refused batch takes no unit); zero always fits;
 * {@code releaseHeld} gives back what the calling thread holds. A thread releases only what it
 * acquired, as every caller of a budget does, so the count can never go below zero; the units a
 * thread holds are its own (indexed by Lincheck's thread id) and not shared state under test.
 *
 * <p>Model checking rather than stress: the budget's race is one CAS loop, and the checker
 * switches threads at each shared read and CAS, which a stress run on 2 cores hits by chance.
 * Bounded at 20 scenarios of 1,000 interleavings each, 13-15 s on this 2-core build host with
 * other builds running, so tagged as a stress test (left out of the fast suite).
 */
@StressTest
public class BudgetLincheckTest {

    static final long CAPACITY = 4;
    /** Lincheck's thread ids run 0..threads-1; the scenario's before and after parts run as thread 0. */
    static final int THREAD_SLOTS = 4;

    private final Budget budget = new Budget("units", "units", CAPACITY);
    private final long[] held = new long[THREAD_SLOTS];

    @Operation
    public boolean tryAcquire(@Param(gen = ThreadIdGen.class) int thread,
                              @Param(gen = IntGen.class, conf = "0:3") int amount) {
        if (!budget.tryAcquire(amount)) return false;
        held[thread] += amount;
        return true;
    }

    @Operation
    public long releaseHeld(@Param(gen = ThreadIdGen.class) int thread) {
        long amount = held[thread];
        held[thread] = 0;
        budget.release(amount);
        return amount;
    }

    @Operation
    public long used() {
        return budget.used();
    }

    @Operation
    public long available() {
        return budget.available();
    }

    @Validate
    public void usedStaysWithinCapacity() {
        long used = budget.used();
        if (used < 0 || used > CAPACITY) throw new AssertionError("used " + used + " outside [0, " + CAPACITY + "]");
    }

    @Test
    void everyInterleavingIsLinearizableToTheSequentialBudget() {
        new ModelCheckingOptions()
                .iterations(20)
                .invocationsPerIteration(1_000)
                .threads(3)
                .actorsPerThread(2)
                .actorsBefore(1)
                .actorsAfter(1)
                .sequentialSpecification(Spec.class)
                .check(BudgetLincheckTest.class);
    }

    /** The sequential specification: a plain count that refuses what does not fit. */
    public static final class Spec {
        private long used;
        private final long[] held = new long[THREAD_SLOTS];

        public boolean tryAcquire(int thread, int amount) {
            if (amount > CAPACITY - used) return false;
            used += amount;
            held[thread] += amount;
            return true;
        }

        public long releaseHeld(int thread) {
            long amount = held[thread];
            held[thread] = 0;
            used -= amount;
            return amount;
        }

        public long used() {
            return used;
        }

        public long available() {
            return CAPACITY - used;
        }
    }
}
