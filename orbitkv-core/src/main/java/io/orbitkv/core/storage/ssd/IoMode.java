package io.orbitkv.core.storage.ssd;

/** How a store's files are accessed; chosen once at {@link SsdStore#open}. */
public enum IoMode {
    /** {@code O_DIRECT}: no page cache, 4 KiB-aligned buffers, offsets and lengths. */
    DIRECT,
    /** Page-cache I/O, used only where O_DIRECT is refused and {@code allowBufferedFallback} is set. */
    BUFFERED
}
