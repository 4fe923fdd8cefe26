package io.orbitkv.engine;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Objects;

/**
 * The answer of a {@link KvPageStore} to "which prefix of these pages can I restore?".
 *
 * <p>Values. A {@link Hit} holds leases until {@link Hit#close()}: its images stay readable and
 * unchanged until then, and must not be read after.
 */
public sealed interface PrefixLookup {

    /** No page restorable; {@code why} is for logs and reports. */
    record Miss(String why) implements PrefixLookup {
        public Miss {
            Objects.requireNonNull(why, "why");
        }
    }

    /**
     * Pages {@code [0, images.size())} are restorable; image {@code i} is page {@code i}.
     *
     * @param images  leased page images, page 0 first, at least one
     * @param source  where the hit came from
     * @param release returns the leases; called once by {@link #close()}
     */
    record Hit(List<MemorySegment> images, HitSource source, Runnable release) implements PrefixLookup, AutoCloseable {
        public Hit {
            images = List.copyOf(images);
            if (images.isEmpty()) throw new IllegalArgumentException("a hit has at least one page");
            if (source == HitSource.NONE) throw new IllegalArgumentException("a hit has a source");
            Objects.requireNonNull(release, "release");
        }

        /** Restorable pages. */
        public int pages() {
            return images.size();
        }

        @Override
        public void close() {
            release.run();
        }
    }
}
