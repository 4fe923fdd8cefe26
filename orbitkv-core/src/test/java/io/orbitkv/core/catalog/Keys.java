package io.orbitkv.core.catalog;

import io.orbitkv.state.StateKey;
import java.nio.ByteBuffer;

/** Deterministic test keys: structured (not hashed), so rendezvous must mix them itself. */
final class Keys {
    private Keys() {
    }

    static StateKey key(long i) {
        ByteBuffer b = ByteBuffer.allocate(StateKey.BYTES);
        b.putLong(i).putLong(i * 31).putLong(7).putLong(i ^ 0x55);
        return StateKey.ofBytes(b.array());
    }
}
