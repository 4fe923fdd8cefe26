package io.orbitkv.jlama;

import com.github.tjake.jlama.tensor.AbstractTensor;
import com.github.tjake.jlama.tensor.KvBufferCache;

import java.lang.foreign.MemorySegment;
import java.util.List;

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
 * <p>Design note: layer-major, K before V, one contiguous run per (layer, kind). Jlama 0.8.4's
 * {@link KvBufferCache.KvBuffer} holds, per (layer, kind), the vectors of consecutive positions
 * back to back within one of its context pages ({@code getKeyTensorsUptoPosition} hands out one
 * {@code [positions, W]} tensor per context page), so a page of {@code P} positions that lies in
 * one context page is one {@code P * W} copy per (layer, kind): {@code 2 * L} copies per page
 * instead of {@code 2 * L * P} vector copies (5,632 for a 22-page bench hit, against 352). A page
 * that straddles two context pages (the CI model's 256-token context makes Jlama pick one
 * position per context page) is copied vector by vector. The buffer must be an ephemeral one
 * ({@link KvBufferCache#getEphemeralKvBuffer()}, pages from Jlama's tensor pool): a session
 * buffer maps each context page from a file in the model's working directory, and
 * {@code getKeyTensorsUptoPosition} names every page it creates after the last one, so the pages
 * it creates map one file and alias each other. CI model: L = 2, W = 32, P = 16 gives 8 KiB pages; bench
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
        for (int layer = 0; layer < layers; layer++) {
            for (int kind = 0; kind < 2; kind++) {
                copyRun(runs(kv, layer, kind, (pageIndex + 1) * pageTokens), layer, kind, pageIndex, image, true);
            }
        }
    }

    /**
     * Copies {@code images} (image {@code i} is page {@code i}) into positions
     * {@code [0, images.size() * P)} of {@code kv}: per layer and kind, the buffer's runs are
     * looked up once and every page is one contiguous copy.
     */
    public void importPages(List<MemorySegment> images, KvBufferCache.KvBuffer kv) {
        for (MemorySegment image : images) requireImage(image);
        for (int layer = 0; layer < layers; layer++) {
            for (int kind = 0; kind < 2; kind++) {
                AbstractTensor<?, ?>[] runs = runs(kv, layer, kind, images.size() * pageTokens);
                for (int page = 0; page < images.size(); page++) copyRun(runs, layer, kind, page, images.get(page), false);
            }
        }
    }

    /**
     * The buffer's {@code [positions per context page, W]} tensors of ({@code layer}, {@code kind})
     * covering positions {@code [0, positions)}, context page 0 first.
     */
    private AbstractTensor<?, ?>[] runs(KvBufferCache.KvBuffer kv, int layer, int kind, int positions) {
        AbstractTensor<?, ?>[] runs = kind == 0 ? kv.getKeyTensorsUptoPosition(layer, positions - 1)
                : kv.getValTensorsUptoPosition(layer, positions - 1);
        for (AbstractTensor<?, ?> run : runs) {
            if (run.getMemorySegment().byteSize() != (long) run.shape().first() * vectorBytes()) {
                throw new IllegalStateException("Jlama KV run of " + run.shape().first() + " positions is "
                        + run.getMemorySegment().byteSize() + " bytes, layout expects " + vectorBytes()
                        + " per position: the model's working dtype is not " + DTYPE);
            }
        }
        return runs;
    }

    /** Copies the ({@code layer}, {@code kind}) part of page {@code page} between the buffer's {@code runs} and {@code image}. */
    private void copyRun(AbstractTensor<?, ?>[] runs, int layer, int kind, int page, MemorySegment image, boolean toImage) {
        int perRun = runs[0].shape().first();
        int first = page * pageTokens;
        long imageAt = offset(layer, kind, 0);
        if (first / perRun == (first + pageTokens - 1) / perRun) {
            move(runs[first / perRun].getMemorySegment(), (long) (first % perRun) * vectorBytes(), image, imageAt,
                    pageTokens * vectorBytes(), toImage);
            return;
        }
        for (int slot = 0; slot < pageTokens; slot++) {
            int position = first + slot;
            move(runs[position / perRun].getMemorySegment(), (long) (position % perRun) * vectorBytes(), image,
                    imageAt + slot * vectorBytes(), vectorBytes(), toImage);
        }
    }

    private static void move(MemorySegment buffer, long bufferAt, MemorySegment image, long imageAt, long bytes,
                             boolean toImage) {
        if (toImage) MemorySegment.copy(buffer, bufferAt, image, imageAt, bytes);
        else MemorySegment.copy(image, imageAt, buffer, bufferAt, bytes);
    }

    private void requireImage(MemorySegment image) {
        if (image.byteSize() < pageBytes()) {
            throw new IllegalArgumentException("page image is " + image.byteSize() + " bytes, needs " + pageBytes());
        }
    }
}
