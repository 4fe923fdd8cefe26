package io.orbitkv.engine;

import io.orbitkv.state.StateKey;
import io.orbitkv.state.StateKeys;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.List;

/**
 * Page keys that stand for a prompt without one: key {@code p} of {@code seed} is the block hash
 * of the 8 bytes (seed, p) in group 0, so distinct seeds never share a page. Shared with the
 * adapters' store tests through the test-jar.
 */
public final class SyntheticKeys {

    private SyntheticKeys() {
    }

    /** {@code pages} keys of prompt {@code seed} under {@code namespaceDigest}. */
    public static List<StateKey> of(byte[] namespaceDigest, int seed, int pages) {
        List<StateKey> out = new ArrayList<>(pages);
        for (int p = 0; p < pages; p++) {
            out.add(StateKeys.forBlockHash(namespaceDigest, 0, ByteBuffer.allocate(8).putInt(seed).putInt(p).array()));
        }
        return out;
    }
}
