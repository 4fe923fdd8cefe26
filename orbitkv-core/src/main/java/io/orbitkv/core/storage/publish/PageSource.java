package io.orbitkv.core.storage.publish;

import java.lang.foreign.MemorySegment;
import java.lang.ref.WeakReference;
import java.util.Optional;

/**
 * A producer's bytes waiting to be sealed, held weakly: the producer may reclaim its page under
 * pressure before the seal queue reaches it, and the pipeline then drops the block (counted)
 * instead of keeping the page alive. The pipeline calls {@link #tryOpen()} once, copies
 * {@link #lengthBytes()} bytes if it got a segment, then calls {@link #close()} exactly once
 * whether or not the open succeeded.
 *
 * <p>Thread model: {@code tryOpen} and {@code close} are called by the sealing thread; the
 * producer may reclaim concurrently, which an implementation must make safe (a reclaim after a
 * successful open waits for, or does not disturb, the copy until {@code close}).
 */
public interface PageSource {

    /** Bytes of the block; fixed for the source's life. */
    int lengthBytes();

    /** The bytes, pinned until {@link #close()}; empty when the producer has reclaimed them. */
    Optional<MemorySegment> tryOpen();

    /** Ends the pin taken by a successful {@link #tryOpen()}; called once in every case. */
    void close();

    /**
     * A source that holds {@code segment} through a {@link WeakReference}: once the producer drops
     * its last strong reference (an {@code Arena.ofAuto()} page) and the GC clears it, the block
     * is gone. {@code tryOpen} turns the weak reference into a strong one for the copy.
     */
    static PageSource weak(MemorySegment segment, int lengthBytes) {
        if (lengthBytes <= 0 || lengthBytes > segment.byteSize()) {
            throw new IllegalArgumentException("lengthBytes " + lengthBytes + " outside the segment of "
                    + segment.byteSize() + " B");
        }
        WeakReference<MemorySegment> ref = new WeakReference<>(segment);
        return new PageSource() {
            @Override
            public int lengthBytes() {
                return lengthBytes;
            }

            @Override
            public Optional<MemorySegment> tryOpen() {
                return Optional.ofNullable(ref.get());
            }

            @Override
            public void close() {
                ref.clear();
            }
        };
    }
}
