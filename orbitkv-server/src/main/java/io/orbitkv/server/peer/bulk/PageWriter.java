package io.orbitkv.server.peer.bulk;

import io.micrometer.core.instrument.Counter;
import io.orbitkv.core.peer.AuthorizeResult;
import io.orbitkv.core.peer.PinnedImage;
import io.orbitkv.core.peer.SentChecksums;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.util.Objects;
import java.util.OptionalInt;
import java.util.zip.CRC32C;

/**
 * Writes one granted page onto a source's bulk connection: the PAGE header, the pinned payload in
 * pieces of {@link #PIECE_BYTES}, then the CRC32C trailer (docs/peer-data-plane.md).
 *
 * <p>Owns the source's {@link SentChecksums}; borrows the counters it increments (registered by
 * {@link BulkServer}). Thread model: thread-safe; each call writes on its caller's socket.
 *
 * <p>Design note: the first send of an image checksums each piece right after its write (the
 * kernel's copy just brought it into cache, and the requester reads and checksums the piece
 * meanwhile, so the checksum overlaps the transfer instead of delaying the first byte) and
 * remembers the result; a later send of the same image checksums nothing and writes the trailer
 * with the last piece: one write less, and the requester is not woken again for four bytes.
 * Pieces are 1 MiB because each pause between two writes lets the requester drain the socket and
 * sleep, a wake-up the source pays for on its next write (256 KiB pieces cost a 2 MiB page ~19 of
 * them; docs/performance.md, "Peer reads: the source's pieces").
 */
final class PageWriter {

    /** Payload bytes written per gather call. */
    static final int PIECE_BYTES = 1 << 20;

    private final SentChecksums checksums;
    private final Counter pagesSent;
    private final Counter bytesSent;
    private final Counter checksumsReused;
    private final Counter checksumsComputed;
    private volatile int pieceBytes = PIECE_BYTES;

    PageWriter(SentChecksums checksums, Counter pagesSent, Counter bytesSent, Counter checksumsReused,
               Counter checksumsComputed) {
        this.checksums = Objects.requireNonNull(checksums, "checksums");
        this.pagesSent = pagesSent;
        this.bytesSent = bytesSent;
        this.checksumsReused = checksumsReused;
        this.checksumsComputed = checksumsComputed;
    }

    /** Tests: payload bytes per gather call. */
    void pieceBytes(int bytes) {
        if (bytes < 1) throw new IllegalArgumentException("piece bytes: " + bytes);
        this.pieceBytes = bytes;
    }

    /**
     * Writes page {@code index} of batch {@code batchId} from {@code image}'s pinned payload; the
     * trailer checksums the pinned bytes, whatever {@code hook} makes of each piece.
     */
    void write(BulkSocket socket, long batchId, int index, AuthorizeResult.Granted g, PinnedImage image,
               BulkServer.SendHook hook) throws IOException {
        MemorySegment payload = image.payload();
        long length = g.lengthBytes();
        if (payload.byteSize() != length) throw new IllegalStateException("pinned " + payload.byteSize() + " bytes for " + length);
        ByteBuffer header = new BulkLayout.PageHeader(batchId, index, g.lengthBytes(), g.ticketId()).encode();
        OptionalInt known = checksums.get(image.imageId());
        CRC32C crc = known.isPresent() ? null : new CRC32C();
        if (crc == null) checksumsReused.increment(); // counted before the trailer leaves: a reader of the count may be its requester
        int pieceBytes = this.pieceBytes;
        for (long offset = 0; offset < length; ) {
            int n = (int) Math.min(pieceBytes, length - offset);
            ByteBuffer piece = payload.asSlice(offset, n).asByteBuffer();
            ByteBuffer out = hook.piece(index, offset, piece.duplicate());
            ByteBuffer tail = crc == null && offset + n == length ? trailer(known.getAsInt()) : null;
            socket.write(gather(offset == 0 ? header : null, out, tail));
            if (crc != null) crc.update(piece); // the pinned bytes themselves, whatever the hook sent
            offset += n;
        }
        if (crc != null) {
            int value = (int) crc.getValue();
            checksums.put(image.imageId(), value); // remembered before the trailer leaves, so a send after this one reuses it
            checksumsComputed.increment();
            socket.write(trailer(value));
        }
        pagesSent.increment();
        bytesSent.increment(length);
    }

    /** Pages whose trailer came from an earlier send of the same image. */
    long checksumsReused() {
        return (long) checksumsReused.count();
    }

    /** {@code body}, with {@code head} before and {@code tail} after it where they are not null. */
    private static ByteBuffer[] gather(ByteBuffer head, ByteBuffer body, ByteBuffer tail) {
        if (head == null) return tail == null ? new ByteBuffer[] {body} : new ByteBuffer[] {body, tail};
        return tail == null ? new ByteBuffer[] {head, body} : new ByteBuffer[] {head, body, tail};
    }

    private static ByteBuffer trailer(int crc32c) {
        return ByteBuffer.allocate(BulkLayout.TRAILER_BYTES).putInt(crc32c).flip();
    }
}
