package io.orbitkv.core.storage.ssd;

import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.StateKey;

import java.util.concurrent.atomic.AtomicBoolean;

/**
 * A reader's hold on one exact extent generation: while held, the ring writer will not
 * overwrite the extent's bytes. Reads through the pin verify the on-disk header names this
 * key, namespace and generation and that the payload CRC matches before anything is served.
 *
 * <p>Thread-safe. The holder must release it exactly once with {@link SsdStore#unpin} (or
 * {@link #close()}); a released pin reads as {@link ReadResult.Released}, never as bytes.
 */
public final class Pin implements PinResult, AutoCloseable {

    private final SsdStore store;
    private final Extent extent;
    private final AtomicBoolean released = new AtomicBoolean();

    Pin(SsdStore store, Extent extent) {
        this.store = store;
        this.extent = extent;
    }

    public StateKey key() {
        return extent.key;
    }

    public NamespaceDigest namespace() {
        return extent.namespace;
    }

    /** The pinned generation: the SSD evidence token a lease carries. */
    public long generation() {
        return extent.generation;
    }

    /** Payload length in bytes (unpadded). */
    public int payloadBytes() {
        return extent.payloadBytes;
    }

    /** Smallest destination that a read can fill without a bounce copy: payload rounded up to 4 KiB. */
    public long paddedPayloadBytes() {
        return ExtentLayout.paddedPayloadBytes(extent.payloadBytes);
    }

    public boolean isReleased() {
        return released.get();
    }

    Extent extent() {
        return extent;
    }

    /** Marks released; true only for the first call. */
    boolean markReleased() {
        return released.compareAndSet(false, true);
    }

    SsdStore store() {
        return store;
    }

    @Override
    public void close() {
        store.unpin(this);
    }

    @Override
    public String toString() {
        return "Pin[" + extent + (released.get() ? ", released]" : "]");
    }
}
