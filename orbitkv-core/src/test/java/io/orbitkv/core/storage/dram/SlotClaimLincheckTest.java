package io.orbitkv.core.storage.dram;

import io.orbitkv.state.StateKey;
import io.orbitkv.testkit.StressTest;
import org.jetbrains.lincheck.datastructures.ModelCheckingOptions;
import org.jetbrains.lincheck.datastructures.Operation;
import org.jetbrains.lincheck.datastructures.Options;
import org.jetbrains.lincheck.datastructures.StressOptions;
import org.junit.jupiter.api.Test;


/**
 * {@link SlotClaim}'s one-shot end under Lincheck: commits, aborts and open-checks of one
 * {@link Reservation} from 3 threads must be linearizable to {@link Spec}, in which the first
 * end takes effect and every later one returns false and changes nothing. So a commit racing an
 * abort, or a double release of a {@link Lease}, is claimed exactly once: the slot table is
 * touched by one caller only.
 *
 * <p>The claim is built without a tier (its end touches only its own state word), so the test
 * checks the claim's contract alone; {@code DramTierRaceTest} races the tier's commit, abort and
 * release around it. Model checking explores the CAS interleavings; a short stress run executes
 * the same scenarios on real threads. Both bounded to 20 scenarios of 1,000 runs, 3-8 s each on
 * this 2-core build host with other builds running, so tagged as a stress test (left out of the
 * fast suite).
 */
@StressTest
public class SlotClaimLincheckTest {

    private final Reservation claim = new Reservation(null, StateKey.ofBytes(new byte[StateKey.BYTES]), 1, 0, 1,
            new SlotRef(0, 0, 4096));

    @Operation
    public boolean commit() {
        return claim.end(Reservation.COMMITTED);
    }

    @Operation
    public boolean abort() {
        return claim.end(Reservation.ABORTED);
    }

    @Operation
    public boolean isOpen() {
        return claim.isOpen();
    }

    @Test
    void everyInterleavingEndsTheClaimOnce() {
        check(new ModelCheckingOptions());
    }

    @Test
    void realThreadsEndTheClaimOnce() {
        check(new StressOptions());
    }

    /** 20 scenarios of 3 threads × 2 operations, each run 1,000 times, against {@link Spec}. */
    private static <O extends Options<O, ?>> void check(O options) {
        options.iterations(20)
                .invocationsPerIteration(1_000)
                .threads(3)
                .actorsPerThread(2)
                .sequentialSpecification(Spec.class)
                .check(SlotClaimLincheckTest.class);
    }

    /** The sequential specification: the first end wins; open until then. */
    public static final class Spec {
        private int state = SlotClaim.OPEN;

        private boolean end(int terminal) {
            if (state != SlotClaim.OPEN) return false;
            state = terminal;
            return true;
        }

        public boolean commit() {
            return end(Reservation.COMMITTED);
        }

        public boolean abort() {
            return end(Reservation.ABORTED);
        }

        public boolean isOpen() {
            return state == SlotClaim.OPEN;
        }
    }
}
