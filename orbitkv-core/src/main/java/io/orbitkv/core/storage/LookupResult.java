package io.orbitkv.core.storage;

import io.orbitkv.core.storage.dram.Lease;
import io.orbitkv.core.storage.ssd.Pin;
import io.orbitkv.state.StateKey;

import java.util.Objects;

/**
 * Outcome of {@link TieredStore#lookup}: where {@code key}'s bytes can be had now. The holder
 * owns what it got: release the {@link Lease}, or unpin the {@link Pin} (or stage instead).
 */
public sealed interface LookupResult {

    /** Resident in DRAM; the lease pins the image. */
    record InDram(Lease lease) implements LookupResult {
        public InDram {
            Objects.requireNonNull(lease, "lease");
        }
    }

    /** Not in DRAM, but an SSD extent is indexed; the pin holds that exact generation. */
    record OnSsd(Pin pin) implements LookupResult {
        public OnSsd {
            Objects.requireNonNull(pin, "pin");
        }
    }

    /** Neither tier has it. */
    record Miss(StateKey key) implements LookupResult {
        public Miss {
            Objects.requireNonNull(key, "key");
        }
    }
}
