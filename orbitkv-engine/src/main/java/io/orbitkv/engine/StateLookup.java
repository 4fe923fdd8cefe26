package io.orbitkv.engine;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * The answer of a {@link KvPageStore} to "at which legal boundary of my recovery contract can I
 * restore, and with what?": the boundary and, for every group of the contract, exactly the images
 * its requirement names (the pages of an attention group, the one checkpoint of a recurrent group).
 *
 * <p>Values. A {@link Hit} holds leases until {@link Hit#close()}: its images stay readable and
 * unchanged until then, and must not be read after. Invariant: a hit carries every group of the
 * contract, each complete; a store that cannot lease one group's requirement answers a
 * {@link Miss}, never a hit of the other groups alone (a hybrid model's attention pages without
 * the checkpoint at the same boundary restore nothing).
 */
public sealed interface StateLookup {

    /** Nothing restorable; {@code why} is for logs and reports. */
    record Miss(String why) implements StateLookup {
        public Miss {
            Objects.requireNonNull(why, "why");
        }
    }

    /**
     * The state at {@code boundaryTokens}.
     *
     * @param boundaryTokens the selected legal boundary {@code t} ({@code > 0}, a multiple of the page size)
     * @param images         per group id, its images in requirement order: pages {@code [0, t/P)} of a
     *                       full group, the checkpoint at {@code t} (one image) of a recurrent group
     * @param source         where the hit came from
     * @param release        returns the leases; called once by {@link #close()}
     */
    record Hit(long boundaryTokens, Map<Integer, List<MemorySegment>> images, HitSource source, Runnable release)
            implements StateLookup, AutoCloseable {
        public Hit {
            if (boundaryTokens <= 0) throw new IllegalArgumentException("a hit has a boundary > 0: " + boundaryTokens);
            images = Map.copyOf(images);
            if (images.isEmpty() || images.values().stream().anyMatch(List::isEmpty)) {
                throw new IllegalArgumentException("a hit has at least one image per group");
            }
            if (source == HitSource.NONE) throw new IllegalArgumentException("a hit has a source");
            Objects.requireNonNull(release, "release");
        }

        /** The images of group {@code groupId}. */
        public List<MemorySegment> group(int groupId) {
            List<MemorySegment> g = images.get(groupId);
            if (g == null) throw new IllegalArgumentException("no group " + groupId + " in this hit");
            return g;
        }

        @Override
        public void close() {
            release.run();
        }
    }
}
