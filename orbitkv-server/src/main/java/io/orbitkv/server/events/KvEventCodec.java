package io.orbitkv.server.events;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.List;
import org.msgpack.core.MessageBufferPacker;
import org.msgpack.core.MessagePack;

/**
 * Encodes a {@code KVEventBatch} as msgpack exactly as vLLM's msgspec structs do with
 * {@code array_like=True} and {@code tag=True} (field order of {@code docs/kv-events.md}):
 *
 * <pre>
 * KVEventBatch     = [ ts: float64, events: [ event, ... ] ]
 * BlockStored      = [ "BlockStored", block_hashes: [bin, ...], parent_block_hash: bin | nil,
 *                      token_ids: [int, ...], block_size: int, lora_id: int | nil, medium: str | nil ]
 * BlockRemoved     = [ "BlockRemoved", block_hashes: [bin, ...], medium: str | nil ]
 * AllBlocksCleared = [ "AllBlocksCleared" ]
 * </pre>
 *
 * <p>The tag is the struct's class name (msgspec's default tag), first in the array. No field is
 * omitted: {@code omit_defaults} only drops trailing fields that have defaults, and none of these
 * has one. Stateless and thread-safe.
 */
public final class KvEventCodec {

    static {
        // msgpack-core's default buffer reads arrays through sun.misc.Unsafe, which JDK 25 warns
        // about on stderr at first use; its "universal" buffer goes through ByteBuffer instead.
        // A batch is at most ~40 KiB every 2 ms, so the difference in speed does not matter here.
        // Set before msgpack's MessageBuffer is first initialised (this class is its only user).
        System.getProperties().putIfAbsent("msgpack.universal-buffer", "true");
    }

    private KvEventCodec() {
    }

    /** The msgpack bytes of a batch of {@code events} stamped {@code tsSeconds} (Unix time, seconds). */
    public static byte[] encodeBatch(double tsSeconds, List<KvEvent> events) {
        try (MessageBufferPacker p = MessagePack.newDefaultBufferPacker()) {
            p.packArrayHeader(2);
            p.packDouble(tsSeconds);
            p.packArrayHeader(events.size());
            for (KvEvent e : events) pack(p, e);
            return p.toByteArray();
        } catch (IOException e) {
            // a buffer packer writes to memory only
            throw new UncheckedIOException(e);
        }
    }

    private static void pack(MessageBufferPacker p, KvEvent event) throws IOException {
        switch (event) {
            case KvEvent.BlockStored s -> {
                p.packArrayHeader(7);
                p.packString("BlockStored");
                hashes(p, s.blockHashes());
                binOrNil(p, s.parentBlockHash());
                p.packArrayHeader(s.tokenIds().length);
                for (int t : s.tokenIds()) p.packInt(t);
                p.packInt(s.blockSize());
                if (s.loraId() == null) p.packNil(); else p.packInt(s.loraId());
                p.packString(s.medium());
            }
            case KvEvent.BlockRemoved r -> {
                p.packArrayHeader(3);
                p.packString("BlockRemoved");
                hashes(p, r.blockHashes());
                p.packString(r.medium());
            }
            case KvEvent.AllBlocksCleared ignored -> {
                p.packArrayHeader(1);
                p.packString("AllBlocksCleared");
            }
        }
    }

    private static void hashes(MessageBufferPacker p, List<byte[]> hashes) throws IOException {
        p.packArrayHeader(hashes.size());
        for (byte[] h : hashes) binOrNil(p, h);
    }

    private static void binOrNil(MessageBufferPacker p, byte[] b) throws IOException {
        if (b == null) {
            p.packNil();
            return;
        }
        p.packBinaryHeader(b.length);
        p.writePayload(b);
    }
}
