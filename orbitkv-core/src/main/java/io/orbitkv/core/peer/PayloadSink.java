package io.orbitkv.core.peer;

import java.nio.ByteBuffer;

/**
 * Where a {@link PayloadTransport} puts the chunks of one transfer, in order. Implemented by
 * {@link PayloadAssembler}; called from the transport's receiving thread only.
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
}
