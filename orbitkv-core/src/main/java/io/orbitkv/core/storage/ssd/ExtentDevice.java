package io.orbitkv.core.storage.ssd;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.util.function.UnaryOperator;

/**
 * The SSD store's file I/O seam: moves one whole extent (a 4 KiB header block and its padded
 * payload) to or from a position of a ring file. The store's own implementation is
 * {@link ExtentIo} (one {@code pwritev}/{@code preadv} per extent); a {@link Wrapper} given at
 * open may decorate it, which is how the reliability campaign injects device faults (errors,
 * delays, short reads, torn writes, flipped bytes, ENOSPC) into a real store.
 *
 * <p>Contract, for the real device and every decorator: {@link #write} writes every byte or
 * throws ({@code ENOSPC} as an {@link IOException} whose message {@link ExtentFiles#isNoSpace}
 * knows); {@link #read} reports how many bytes of each part it got and never pads. The store
 * trusts none of it beyond that: every read is verified (header, identity, CRC32C) before a
 * byte is served, so a device that lies is answered as corrupt, never served.
 *
 * <p>Thread model: called concurrently by the store's I/O workers for disjoint buffers.
 *
 * <p>Design note: a seam at this level, rather than at {@code FileChannel}, keeps the fault
 * model the device's (one extent in, one extent out) and costs nothing when off: the store calls
 * the {@link ExtentIo} instance itself through this interface (one implementation loaded, a
 * monomorphic call the JIT inlines). The io_uring read route submits its own reads to the kernel
 * and does not pass here; a faulted store uses the positional route.
 */
public interface ExtentDevice {

    /** What one {@link #read} got: bytes of the header block and of the payload region (short at end of file). */
    record ReadBytes(int headerBytes, int payloadBytes) {}

    /** Decorates the store's device at open; {@link #NONE} keeps it as is. */
    interface Wrapper extends UnaryOperator<ExtentDevice> {}

    /** The store's own device, undecorated. */
    Wrapper NONE = device -> device;

    /**
     * Writes {@code header} (one 4 KiB block) at {@code offset} of ring file {@code file} and
     * {@code payload} (padded, block multiple) right after it.
     */
    void write(int file, long offset, MemorySegment header, MemorySegment payload) throws IOException;

    /**
     * Reads the header block at {@code offset} of ring file {@code file} into {@code header} and
     * the padded payload after it into {@code payload}; counts are short only at end of file.
     */
    ReadBytes read(int file, long offset, MemorySegment header, MemorySegment payload) throws IOException;
}
