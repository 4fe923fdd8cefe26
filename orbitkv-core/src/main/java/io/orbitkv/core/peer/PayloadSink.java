package io.orbitkv.core.peer;

import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.Optional;

/**
 * Where a {@link PayloadTransport} puts the bytes of one transfer, in order. Implemented by
 * {@link PayloadAssembler}; called from the transport's receiving thread only.
 *
 * <p>Two ways in: {@link #onChunk} hands the sink a buffer to copy (gRPC, whose messages arrive
 * in its own buffers); {@link #target}/{@link #onWritten} let a transport read from its socket
 * straight into the reserved slot (the bulk data plane: no user-space copy on the receive side),
 * then tell the sink which bytes it wrote. A transport uses one way per transfer.
 */
public interface PayloadSink {

    /**
     * Copies {@code chunk} (position to limit) to {@code offsetBytes} of the payload. False means
     * the chunk cannot belong to this payload (out of order, past the end, or the sink was
     * aborted): the transport must cancel the stream.
     */
    boolean onChunk(long offsetBytes, ByteBuffer chunk);

    /** The source's trailer: the CRC32C it computed over everything it sent. */
    void onTrailer(int crc32c);

    /**
     * The memory the payload must end up in (exactly the payload's length), for a transport that
     * writes it itself and then calls {@link #onWritten}; empty when the sink only takes
     * {@link #onChunk} copies or can take nothing more. Default: empty.
     */
    default Optional<MemorySegment> target() {
        return Optional.empty();
    }

    /**
     * The transport wrote {@code [offsetBytes, offsetBytes + lengthBytes)} of {@link #target()}
     * itself. False as for {@link #onChunk} (out of order, past the end, aborted): the transport
     * must stop writing into the target and cancel the transfer. Default: false.
     */
    default boolean onWritten(long offsetBytes, long lengthBytes) {
        return false;
    }
}
