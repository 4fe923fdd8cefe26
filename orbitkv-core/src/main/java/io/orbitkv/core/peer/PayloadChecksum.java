package io.orbitkv.core.peer;

import java.lang.foreign.MemorySegment;
import java.util.zip.CRC32C;

/**
 * The end-to-end checksum of a peer payload: CRC32C over the payload bytes, computed by the
 * source while it sends and checked by the requester before it commits. CRC32C because the JDK
 * intrinsic runs at ~10 GB/s per core on SSE4.2/ARMv8 (≈ 0.2 ms per 2 MiB), well under a
 * loopback transfer of the same page, and the SSD extents already use it.
 */
public final class PayloadChecksum {

    private PayloadChecksum() {
    }

    /** CRC32C of {@code payload}'s bytes. */
    public static int of(MemorySegment payload) {
        CRC32C crc = new CRC32C();
        crc.update(payload.asByteBuffer());
        return (int) crc.getValue();
    }
}
