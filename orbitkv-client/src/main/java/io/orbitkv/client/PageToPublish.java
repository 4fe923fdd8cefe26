package io.orbitkv.client;

import io.orbitkv.state.StateKey;
import io.orbitkv.state.protocol.Hashes;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.Request;
import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.Objects;

/**
 * One page image an engine publishes: its state group, its name (an engine block hash or a
 * StateKey) and the bytes, which {@link OrbitKvClient#publish} copies into the arena slot the
 * Manager grants. Value; the image segment is borrowed, read once during {@code publish}.
 *
 * <p>Invariants are the wire entry's ({@link Request.PublishPage}): group id {@code >= 0}, a
 * 1..64-byte block hash or a 32-byte key, an image of 1..2^31-1 bytes.
 */
public record PageToPublish(int groupId, KeyForm form, byte[] name, MemorySegment image) {

    public PageToPublish {
        Objects.requireNonNull(form, "form");
        name = Objects.requireNonNull(name, "name").clone();
        Objects.requireNonNull(image, "image");
        if (image.byteSize() < 1 || image.byteSize() > Integer.MAX_VALUE) {
            throw new IllegalArgumentException("a page image is 1..2^31-1 bytes: " + image.byteSize());
        }
        entry(groupId, form, name, (int) image.byteSize());
    }

    /** A page named by its 32-byte StateKey. */
    public static PageToPublish ofKey(int groupId, StateKey key, MemorySegment image) {
        return new PageToPublish(groupId, KeyForm.STATE_KEY, Hashes.ofKeys(List.of(key)).get(0), image);
    }

    /** A page named by the engine's block hash (the Manager derives the key). */
    public static PageToPublish ofBlockHash(int groupId, byte[] blockHash, MemorySegment image) {
        return new PageToPublish(groupId, KeyForm.BLOCK_HASH, blockHash, image);
    }

    @Override
    public byte[] name() {
        return name.clone();
    }

    /** The PUBLISH_RESERVE entry of this page. */
    Request.PublishPage entry() {
        return entry(groupId, form, name, (int) image.byteSize());
    }

    private static Request.PublishPage entry(int groupId, KeyForm form, byte[] name, int lengthBytes) {
        return new Request.PublishPage(groupId, form, Hashes.of(List.of(name)), lengthBytes);
    }
}
