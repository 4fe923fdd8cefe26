package io.orbitkv.core.storage.ssd;

import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;

/**
 * One extent this store has placed or recovered: where it is, what it must contain, and how
 * many readers pin it. The object is the index value and the ring's placement record at once,
 * so a pin, the index and the ring always talk about the same extent, not the same key.
 *
 * <p>Thread model: the identity fields are final. {@code pins} is the only mutable field and is
 * changed only by CAS: readers {@link #tryPin} / {@link #unpin}; the ring writer
 * {@link #tryRetire} / {@link #unretire}; the writer of an in-flight extent holds one pin from
 * placement until the write completes.
 *
 * <p>Invariant: {@code pins >= 0} while the extent may be read; {@code pins == RETIRED} once the
 * ring has claimed its bytes, after which no pin can be taken. The transition to RETIRED only
 * happens from 0, so a pinned extent is never overwritten.
 *
 * <p>Design note: a volatile int behind a {@link VarHandle} rather than an {@code AtomicInteger}
 * saves a 16-byte object per extent; with 1 M extents (64 GiB of 64 KiB pages) the whole entry
 * stays near 56 bytes plus the map node.
 */
final class Extent {

    static final int RETIRED = -1;
    private static final VarHandle PINS;

    static {
        try {
            PINS = MethodHandles.lookup().findVarHandle(Extent.class, "pins", int.class);
        } catch (ReflectiveOperationException e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    final NamespaceDigest namespace;
    final StateKey key;
    final int file;
    final long offset;
    final int payloadBytes;
    final int payloadCrc32c;
    final long generation;
    @SuppressWarnings("unused") // accessed through PINS
    private volatile int pins;

    Extent(NamespaceDigest namespace, StateKey key, int file, long offset, int payloadBytes, int payloadCrc32c,
           long generation, int initialPins) {
        this.namespace = namespace;
        this.key = key;
        this.file = file;
        this.offset = offset;
        this.payloadBytes = payloadBytes;
        this.payloadCrc32c = payloadCrc32c;
        this.generation = generation;
        this.pins = initialPins;
    }

    long footprintBytes() {
        return ExtentLayout.footprintBytes(payloadBytes);
    }

    long endOffset() {
        return offset + footprintBytes();
    }

    ExtentHeader header() {
        return new ExtentHeader(namespace, key, generation, payloadBytes, payloadCrc32c);
    }

    int pins() {
        return pins;
    }

    /** Takes a pin unless the extent is retired. */
    boolean tryPin() {
        for (;;) {
            int p = pins;
            if (p == RETIRED) return false;
            if (PINS.compareAndSet(this, p, p + 1)) return true;
        }
    }

    /** Drops a pin; returns true when it was the last one. */
    boolean unpin() {
        for (;;) {
            int p = pins;
            if (p <= 0) throw new IllegalStateException("unpin without a pin on " + this);
            if (PINS.compareAndSet(this, p, p - 1)) return p == 1;
        }
    }

    /** Claims the extent for overwrite; succeeds only when nobody pins it. */
    boolean tryRetire() {
        return PINS.compareAndSet(this, 0, RETIRED);
    }

    /** Gives back a claim the writer could not complete (it skipped a later pinned extent). */
    void unretire() {
        if (!PINS.compareAndSet(this, RETIRED, 0)) throw new IllegalStateException("not retired: " + this);
    }

    @Override
    public String toString() {
        return "Extent[key=" + key + ", gen=" + generation + ", file=" + file + ", offset=" + offset
                + ", payloadBytes=" + payloadBytes + ", pins=" + pins + "]";
    }
}
