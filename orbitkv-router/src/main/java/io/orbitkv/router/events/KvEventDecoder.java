package io.orbitkv.router.events;

import io.orbitkv.router.BlockKeys;
import io.orbitkv.router.IndexEvent;
import io.orbitkv.router.Tier;
import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.msgpack.core.MessageFormat;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessagePackException;
import org.msgpack.core.MessageUnpacker;
import org.msgpack.value.ValueType;

/**
 * Decodes a msgpack {@code KVEventBatch} in vLLM's schema (docs/kv-events.md) into
 * {@link IndexEvent}s:
 *
 * <pre>
 * KVEventBatch     = [ ts: float64, events: [ event, ... ] (, data_parallel_rank: int | nil) ]
 * BlockStored      = [ "BlockStored", block_hashes: [bin | int, ...], parent_block_hash: bin | int | nil,
 *                      token_ids: [int, ...], block_size: int, lora_id: int | nil (, medium: str | nil) ]
 * BlockRemoved     = [ "BlockRemoved", block_hashes: [bin | int, ...] (, medium: str | nil) ]
 * AllBlocksCleared = [ "AllBlocksCleared" ]
 * </pre>
 *
 * <p>What the Manager publishes is the full form; the decoder also takes vLLM's engines' own
 * batches: a hash may be an integer ({@code ExternalBlockHash = bytes | int}), the {@code medium}
 * field may be absent (the schema generation before it; read as the engine's HBM) and fields
 * appended by a later schema are skipped. An event of an unknown tag or an unknown medium is
 * skipped and counted in {@link Decoded#skippedEvents()}; anything else that does not match is
 * {@link Malformed}, and nothing of that batch is applied.
 *
 * <p>Bounds: every array length is checked against the bytes left before anything is allocated
 * (each element takes at least one byte), so a batch allocates in proportion to its size.
 * Stateless and thread-safe.
 */
public final class KvEventDecoder {

    static {
        // msgpack-core's default buffer reads through sun.misc.Unsafe (a JDK 25 warning at first
        // use); the universal buffer goes through ByteBuffer. Batches are small (tens of KiB).
        System.getProperties().putIfAbsent("msgpack.universal-buffer", "true");
    }

    /** A decode result: {@link Decoded} or {@link Malformed}. */
    public sealed interface Result permits Decoded, Malformed {
    }

    /** A batch: its timestamp (Unix seconds), its events, and how many events were skipped. */
    public record Decoded(double timestampSeconds, List<IndexEvent> events, int skippedEvents) implements Result {
        public Decoded {
            events = List.copyOf(events);
        }
    }

    /** Not a batch of this schema; {@code reason} says where. */
    public record Malformed(String reason) implements Result {
    }

    private KvEventDecoder() {}

    public static Result decode(byte[] payload) {
        try (MessageUnpacker u = MessagePack.newDefaultUnpacker(payload)) {
            int fields = arrayHeader(u, payload.length, "batch");
            if (fields < 2) return new Malformed("a batch is [ts, events, ...], got " + fields + " fields");
            if (!u.getNextFormat().getValueType().equals(ValueType.FLOAT) && !u.getNextFormat().getValueType().equals(ValueType.INTEGER)) {
                return new Malformed("batch ts is not a number");
            }
            double ts = u.getNextFormat().getValueType() == ValueType.FLOAT ? u.unpackDouble() : u.unpackLong();
            int count = arrayHeader(u, payload.length, "events");
            List<IndexEvent> events = new ArrayList<>(count);
            int skipped = 0;
            for (int i = 0; i < count; i++) {
                Optional<IndexEvent> e = event(u, payload.length, i);
                if (e.isPresent()) events.add(e.get()); else skipped++;
            }
            for (int i = 2; i < fields; i++) u.skipValue();
            if (u.hasNext()) return new Malformed("bytes after the batch");
            return new Decoded(ts, events, skipped);
        } catch (Bad e) {
            return new Malformed(e.getMessage());
        } catch (MessagePackException | IOException | IllegalArgumentException e) {
            // MessagePackException: truncated input, a value of another type than the header said
            return new Malformed(e.getClass().getSimpleName() + ": " + e.getMessage());
        }
    }

    /** A schema mismatch inside the batch; becomes {@link Malformed}. */
    private static final class Bad extends Exception {
        private static final long serialVersionUID = 1L;

        Bad(String message) {
            super(message, null, false, false);
        }
    }

    private static Optional<IndexEvent> event(MessageUnpacker u, int size, int i) throws IOException, Bad {
        String where = "events[" + i + "]";
        int fields = arrayHeader(u, size, where);
        if (fields < 1 || u.getNextFormat().getValueType() != ValueType.STRING) throw new Bad(where + " has no tag");
        String tag = u.unpackString();
        switch (tag) {
            case "BlockStored" -> {
                if (fields < 6) throw new Bad(where + " BlockStored has " + fields + " fields, needs 6 or more");
                long[] keys = hashes(u, size, where);
                skipHashOrNil(u, where);                 // parent_block_hash: the index keeps no chain links
                int tokens = arrayHeader(u, size, where + ".token_ids");
                for (int t = 0; t < tokens; t++) u.skipValue();
                if (u.getNextFormat().getValueType() != ValueType.INTEGER) throw new Bad(where + ".block_size is not an integer");
                u.skipValue();
                u.skipValue();                           // lora_id
                Optional<Tier> tier = fields >= 7 ? medium(u, where) : Optional.of(Tier.HBM);
                for (int f = 7; f < fields; f++) u.skipValue();
                return tier.map(t -> new IndexEvent.Stored(keys, t));
            }
            case "BlockRemoved" -> {
                if (fields < 2) throw new Bad(where + " BlockRemoved has " + fields + " fields, needs 2 or more");
                long[] keys = hashes(u, size, where);
                Optional<Tier> tier = fields >= 3 ? medium(u, where) : Optional.of(Tier.HBM);
                for (int f = 3; f < fields; f++) u.skipValue();
                return tier.map(t -> new IndexEvent.Removed(keys, t));
            }
            case "AllBlocksCleared" -> {
                for (int f = 1; f < fields; f++) u.skipValue();
                return Optional.of(new IndexEvent.Cleared());
            }
            default -> {
                for (int f = 1; f < fields; f++) u.skipValue();
                return Optional.empty();
            }
        }
    }

    private static long[] hashes(MessageUnpacker u, int size, String where) throws IOException, Bad {
        int n = arrayHeader(u, size, where + ".block_hashes");
        if (n == 0) throw new Bad(where + ".block_hashes is empty");
        long[] keys = new long[n];
        for (int i = 0; i < n; i++) {
            MessageFormat f = u.getNextFormat();
            keys[i] = switch (f.getValueType()) {
                case BINARY -> {
                    int len = u.unpackBinaryHeader();
                    if (len < 1 || len > 64) throw new Bad(where + ".block_hashes[" + i + "] has " + len + " bytes, not 1..64");
                    yield BlockKeys.of(u.readPayload(len));
                }
                case INTEGER -> BlockKeys.of(u.unpackLong());
                default -> throw new Bad(where + ".block_hashes[" + i + "] is " + f.getValueType() + ", not bin or int");
            };
        }
        return keys;
    }

    private static void skipHashOrNil(MessageUnpacker u, String where) throws IOException, Bad {
        ValueType t = u.getNextFormat().getValueType();
        if (t != ValueType.NIL && t != ValueType.BINARY && t != ValueType.INTEGER) {
            throw new Bad(where + ".parent_block_hash is " + t);
        }
        u.skipValue();
    }

    private static Optional<Tier> medium(MessageUnpacker u, String where) throws IOException, Bad {
        ValueType t = u.getNextFormat().getValueType();
        if (t == ValueType.NIL) {
            u.unpackNil();
            return Tier.ofMedium(null);
        }
        if (t != ValueType.STRING) throw new Bad(where + ".medium is " + t + ", not str or nil");
        return Tier.ofMedium(u.unpackString());
    }

    private static int arrayHeader(MessageUnpacker u, int size, String where) throws IOException, Bad {
        if (!u.hasNext()) throw new Bad(where + ": truncated");
        if (u.getNextFormat().getValueType() != ValueType.ARRAY) throw new Bad(where + " is not an array");
        int n = u.unpackArrayHeader();
        if (n < 0 || n > size - u.getTotalReadBytes()) throw new Bad(where + " claims " + n + " elements in fewer bytes");
        return n;
    }
}
