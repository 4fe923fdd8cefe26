package io.orbitkv.jlama;

import com.github.tjake.jlama.tensor.AbstractTensor;
import com.github.tjake.jlama.tensor.KvBufferCache;

import java.lang.foreign.MemorySegment;

/**
 * The Jlama KV page image ({@code kv_layout = "jlama-kv-v1"}): every layer's K and V vectors of
 * {@code P} consecutive absolute positions, as Jlama holds them (F32, after RoPE).
 *
 * <pre>
 *   offset(layer, kind, slot) = ((layer * 2 + kind) * P + slot) * W * 4      kind: 0 = K, 1 = V
 *
 *   +--------------------------- one page image: L * 2 * P * W * 4 bytes ---------------------------+
 *   | L0 K slot0 [W f32] | L0 K slot1 | ... | L0 K slot P-1 | L0 V slot0 | ... | L(L-1) V slot P-1     |
 *   +------------------------------------------------------------------------------------------------+
 *   W = kvHeads * headSize (the K/V width of one position in one layer), f32 little-endian.
 *   slot s of page i holds absolute position i * P + s.
 * </pre>
 *
 * <p>Immutable and thread-safe; the {@link KvBufferCache.KvBuffer} passed in is owned by the
 * calling runner. Publication rule: an image is complete only after {@link #exportPage} returns;
 * the runner commits it to the Manager after that, never before. Invariant: a page exported from
 * positions {@code [i*P, (i+1)*P)} is imported at the same positions, because keys were rotated
 * for those positions (RoPE) and would be wrong anywhere else.
 *
 * <p>Design note: layer-major, K before V, one contiguous run per (layer, kind). Jlama keeps each
 * (layer, position) vector as its own tensor, so the copy is {@code 2 * L * P} small copies either
 * way; the order is chosen so that a future engine with a contiguous per-layer cache can copy one
 * {@code P * W} run per (layer, kind). CI model: L = 2, W = 32, P = 16 gives 8 KiB pages; bench
 * model: L = 8, W = 256, P = 16 gives 256 KiB pages. F32 because that is Jlama's working dtype
 * for F32 weights; a BF16 model would be another layout name.
 *
 * @param layers     transformer layers ({@code L})
 * @param kvWidth    K/V floats per position per layer ({@code W})
 * @param pageTokens positions per page ({@code P})
 */
public record JlamaKvPageLayout(int layers, int kvWidth, int pageTokens) {

    /** The layout's name, written into the namespace's {@code kv_layout}. */
    public static final String NAME = "jlama-kv-v1";
    /** The element type, written into the namespace's {@code dtype}. */
    public static final String DTYPE = "f32";

    public JlamaKvPageLayout {
        if (layers <= 0 || kvWidth <= 0 || pageTokens <= 0) {
            throw new IllegalArgumentException("layers, kvWidth and pageTokens must be > 0: "
                    + layers + ", " + kvWidth + ", " + pageTokens);
        }
    }

    /** Bytes of one position's vector in one layer. */
    public long vectorBytes() {
        return (long) kvWidth * Float.BYTES;
    }

    /** Bytes of one page image. */
    public long pageBytes() {
        return (long) layers * 2 * pageTokens * vectorBytes();
    }

    /** Byte offset of the vector of ({@code layer}, K if {@code kind == 0} else V, {@code slot}). */
    public long offset(int layer, int kind, int slot) {
        return (((long) layer * 2 + kind) * pageTokens + slot) * vectorBytes();
    }

    /** Copies page {@code pageIndex} of {@code kv} into {@code image} ({@link #pageBytes()} long). */
    public void exportPage(KvBufferCache.KvBuffer kv, int pageIndex, MemorySegment image) {
        requireImage(image);
        int first = pageIndex * pageTokens;
        for (int layer = 0; layer < layers; layer++) {
            for (int slot = 0; slot < pageTokens; slot++) {
                copy(kv.getKeyTensorForPosition(layer, first + slot), image, offset(layer, 0, slot), true);
                copy(kv.getValTensorForPosition(layer, first + slot), image, offset(layer, 1, slot), true);
            }
        }
    }

    /** Copies {@code image} into page {@code pageIndex}'s positions of {@code kv}. */
    public void importPage(MemorySegment image, KvBufferCache.KvBuffer kv, int pageIndex) {
        requireImage(image);
        int first = pageIndex * pageTokens;
        for (int layer = 0; layer < layers; layer++) {
            for (int slot = 0; slot < pageTokens; slot++) {
                copy(kv.getKeyTensorForPosition(layer, first + slot), image, offset(layer, 0, slot), false);
                copy(kv.getValTensorForPosition(layer, first + slot), image, offset(layer, 1, slot), false);
            }
        }
    }

    private void copy(AbstractTensor<?, ?> vector, MemorySegment image, long imageOffset, boolean toImage) {
        MemorySegment tensor = vector.getMemorySegment();
        if (tensor.byteSize() < vectorBytes()) {
            throw new IllegalStateException("Jlama KV vector is " + tensor.byteSize() + " bytes, layout expects "
                    + vectorBytes() + ": the model's working dtype is not " + DTYPE);
        }
        if (toImage) MemorySegment.copy(tensor, 0, image, imageOffset, vectorBytes());
        else MemorySegment.copy(image, imageOffset, tensor, 0, vectorBytes());
    }

    private void requireImage(MemorySegment image) {
        if (image.byteSize() < pageBytes()) {
            throw new IllegalArgumentException("page image is " + image.byteSize() + " bytes, needs " + pageBytes());
        }
    }
}
