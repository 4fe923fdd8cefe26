package io.orbitkv.llamacpp;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.List;

import static java.lang.foreign.ValueLayout.JAVA_INT_UNALIGNED;
import static java.lang.foreign.ValueLayout.JAVA_LONG_UNALIGNED;

/**
 * The llama.cpp KV page image ({@code kv_layout = "llamacpp-seqstate-v1@b4916/..."}): the cells
 * of {@code P} consecutive positions cut out of a {@code llama_state_seq_get_data} blob, and the
 * reverse, a blob for positions {@code [0, n*P)} assembled from {@code n} page images.
 *
 * <p><b>The sequence-state format of b4916</b> ({@code llama_kv_cache_unified::state_write},
 * {@code src/llama-kv-cache.cpp} lines 848-1001; a single sequence, so {@code n_seq_id = 0}),
 * all little-endian, {@code n} cells:
 * <pre>
 *   u32 cell_count = n | n x (i32 pos, u32 n_seq_id = 0) | u32 v_trans | u32 n_layer
 *   K: n_layer x ( i32 k_type | u64 k_row_bytes | n x k_row )                 one row per cell
 *   V: v_trans = 0: n_layer x ( i32 v_type | u64 v_row_bytes | n x v_row )
 *      v_trans = 1: n_layer x ( i32 v_type | u32 v_el_bytes | u32 n_embd_v | n_embd_v x ( n x el ) )
 * </pre>
 * {@code v_trans = 1} whenever flash attention is off (the default, and the engine's setting):
 * V is stored transposed, one run of {@code n} elements per V dimension.
 *
 * <p><b>The page image</b> (no header; the geometry is this record, bound by the namespace):
 * <pre>
 *   +---- page i (cells of positions [i*P, (i+1)*P)): L * P * (kRow + vRow) bytes ----+
 *   | L0 K: P x kRow | L1 K | ... | L(L-1) K | L0 V | ... | L(L-1) V                 |
 *   +--------------------------------------------------------------------------------+
 *   V of a layer: v_trans = 1: n_embd_v x (P x el)   (dimension-major, as in the blob)
 *                 v_trans = 0: P x vRow
 *   vRow = n_embd_v * el. CI model (2 layers, 2 kv heads x 16, F16, P = 16): 4 KiB.
 * </pre>
 * Publication rule: an image is complete when {@link #exportPage} returns; the runner commits it
 * after that. Invariant: a blob is carved only if its cells hold positions {@code 0..n-1} in
 * order (a sequence decoded from an empty cache), so page {@code i} is cells {@code [i*P,
 * (i+1)*P)}; an assembled blob restores page {@code i} at the same positions, where its keys
 * were rotated (RoPE).
 *
 * <p>Immutable and thread-safe. Design note: pages keep the blob's own byte order (layer-major
 * K, then V dimension-major) so carving is {@code 2 * L} (K) plus {@code L * n_embd_v} (V)
 * contiguous copies per page, and assembling writes the same runs back; no element is converted,
 * which is what makes the restore bit-exact. The alternative, one {@code set_data} blob per page,
 * is impossible: {@code set_data} first removes the whole sequence.
 *
 * @param layers     {@code n_layer}
 * @param kType      {@code ggml_type} of K (1 = F16)
 * @param kRowBytes  bytes of one cell's K row in one layer
 * @param vType      {@code ggml_type} of V
 * @param vTrans     whether V is stored transposed
 * @param vElBytes   bytes of one V element
 * @param vDims      {@code n_embd_v}: V elements per cell per layer
 * @param pageTokens positions per page ({@code P})
 */
public record LlamaCppKvPageLayout(int layers, int kType, long kRowBytes, int vType, boolean vTrans, int vElBytes,
                                   int vDims, int pageTokens) {

    /** The layout's name, the prefix of the namespace's {@code kv_layout}. */
    public static final String NAME = "llamacpp-seqstate-v1";

    public LlamaCppKvPageLayout {
        if (layers <= 0 || kRowBytes <= 0 || vElBytes <= 0 || vDims <= 0 || pageTokens <= 0) {
            throw new IllegalArgumentException("layers, row sizes, V dims and page size must be > 0");
        }
    }

    /**
     * The geometry of {@code blob} (any cell count; an empty sequence's blob has the full header)
     * for {@code pageTokens}-token pages. Fails on a blob that is not a single-sequence b4916
     * state or whose layers differ in shape.
     */
    public static LlamaCppKvPageLayout of(MemorySegment blob, int pageTokens) {
        int n = blob.get(JAVA_INT_UNALIGNED, 0);
        long at = 4 + 8L * n;
        boolean vTrans = blob.get(JAVA_INT_UNALIGNED, at) != 0;
        int layers = blob.get(JAVA_INT_UNALIGNED, at + 4);
        at += 8;
        int kType = blob.get(JAVA_INT_UNALIGNED, at);
        long kRow = blob.get(JAVA_LONG_UNALIGNED, at + 4);
        long kSection = layers * (12 + n * kRow);
        at += kSection;
        int vType = blob.get(JAVA_INT_UNALIGNED, at);
        int vEl;
        int vDims;
        if (vTrans) {
            vEl = blob.get(JAVA_INT_UNALIGNED, at + 4);
            vDims = blob.get(JAVA_INT_UNALIGNED, at + 8);
        } else {
            long vRow = blob.get(JAVA_LONG_UNALIGNED, at + 4);
            vEl = typeBytes(vType);
            vDims = (int) (vRow / vEl);
        }
        LlamaCppKvPageLayout layout = new LlamaCppKvPageLayout(layers, kType, kRow, vType, vTrans, vEl, vDims, pageTokens);
        layout.requireBlob(blob);
        return layout;
    }

    /** The namespace's {@code kv_layout}: name, llama.cpp build, V order. */
    public String kvLayoutName() {
        return NAME + "@" + LlamaCppAbi.BUILD_TAG + (vTrans ? "/v-transposed" : "/v-rows");
    }

    /** Bytes of one cell's V in one layer. */
    public long vRowBytes() {
        return (long) vDims * vElBytes;
    }

    /** Bytes of one page image. */
    public long pageBytes() {
        return (long) layers * pageTokens * (kRowBytes + vRowBytes());
    }

    /** Bytes of a sequence-state blob of {@code cells} cells in this geometry. */
    public long blobBytes(int cells) {
        long header = 4 + 8L * cells + 8;
        long k = layers * (12 + cells * kRowBytes);
        long v = layers * (12 + cells * vRowBytes());      // v_trans: i32 + u32 + u32; else i32 + u64
        return header + k + v;
    }

    /** Cells (positions) in {@code blob}. */
    public static int cells(MemorySegment blob) {
        return blob.get(JAVA_INT_UNALIGNED, 0);
    }

    /** Copies page {@code page} of {@code blob} (cells {@code [page*P, (page+1)*P)}) into {@code image}. */
    public void exportPage(MemorySegment blob, int page, MemorySegment image) {
        int n = requireBlob(blob);
        if (page < 0 || (long) (page + 1) * pageTokens > n) {
            throw new IllegalArgumentException("page " + page + " is not complete in a blob of " + n + " cells");
        }
        requireImage(image);
        copyPage(blob, n, page, image, true);
    }

    /**
     * A blob restoring positions {@code [0, pages.size()*P)}: image {@code i} is page {@code i}.
     * Allocated in {@code arena}.
     */
    public MemorySegment assemble(List<MemorySegment> pages, Arena arena) {
        if (pages.isEmpty()) throw new IllegalArgumentException("nothing to assemble");
        return assemble(pages, arena.allocate(blobBytes(pages.size() * pageTokens), 8));
    }

    /**
     * As {@link #assemble(List, Arena)}, into {@code buffer} (at least {@link #blobBytes} of the
     * cells long; its old content does not matter: every byte of the blob is written). Returns
     * the blob, the first {@code blobBytes(pages.size() * P)} bytes of {@code buffer}.
     */
    public MemorySegment assemble(List<MemorySegment> pages, MemorySegment buffer) {
        if (pages.isEmpty()) throw new IllegalArgumentException("nothing to assemble");
        int n = pages.size() * pageTokens;
        if (buffer.byteSize() < blobBytes(n)) {
            throw new IllegalArgumentException("buffer of " + buffer.byteSize() + " bytes, a blob of " + n + " cells needs " + blobBytes(n));
        }
        MemorySegment blob = buffer.asSlice(0, blobBytes(n));
        blob.set(JAVA_INT_UNALIGNED, 0, n);
        for (int c = 0; c < n; c++) {
            blob.set(JAVA_INT_UNALIGNED, 4 + 8L * c, c);
            blob.set(JAVA_INT_UNALIGNED, 8 + 8L * c, 0);
        }
        long at = 4 + 8L * n;
        blob.set(JAVA_INT_UNALIGNED, at, vTrans ? 1 : 0);
        blob.set(JAVA_INT_UNALIGNED, at + 4, layers);
        for (int layer = 0; layer < layers; layer++) {
            blob.set(JAVA_INT_UNALIGNED, kLayerAt(n, layer), kType);
            blob.set(JAVA_LONG_UNALIGNED, kLayerAt(n, layer) + 4, kRowBytes);
            long v = vLayerAt(n, layer);
            blob.set(JAVA_INT_UNALIGNED, v, vType);
            if (vTrans) {
                blob.set(JAVA_INT_UNALIGNED, v + 4, vElBytes);
                blob.set(JAVA_INT_UNALIGNED, v + 8, vDims);
            } else {
                blob.set(JAVA_LONG_UNALIGNED, v + 4, vRowBytes());
            }
        }
        for (int page = 0; page < pages.size(); page++) {
            MemorySegment image = pages.get(page);
            requireImage(image);
            copyPage(blob, n, page, image, false);
        }
        return blob;
    }

    /** Copies one page between the blob of {@code n} cells and an image, in the direction given. */
    private void copyPage(MemorySegment blob, int n, int page, MemorySegment image, boolean toImage) {
        long first = (long) page * pageTokens;
        long img = 0;
        long kRun = pageTokens * kRowBytes;
        for (int layer = 0; layer < layers; layer++) {
            long src = kLayerAt(n, layer) + 12 + first * kRowBytes;
            move(blob, src, image, img, kRun, toImage);
            img += kRun;
        }
        for (int layer = 0; layer < layers; layer++) {
            long data = vLayerAt(n, layer) + 12;
            if (vTrans) {
                long run = (long) pageTokens * vElBytes;
                for (int d = 0; d < vDims; d++) {
                    move(blob, data + ((long) d * n + first) * vElBytes, image, img, run, toImage);
                    img += run;
                }
            } else {
                long run = pageTokens * vRowBytes();
                move(blob, data + first * vRowBytes(), image, img, run, toImage);
                img += run;
            }
        }
    }

    private static void move(MemorySegment blob, long blobAt, MemorySegment image, long imageAt, long bytes, boolean toImage) {
        if (toImage) MemorySegment.copy(blob, blobAt, image, imageAt, bytes);
        else MemorySegment.copy(image, imageAt, blob, blobAt, bytes);
    }

    private long kLayerAt(int n, int layer) {
        return 4 + 8L * n + 8 + layer * (12 + n * kRowBytes);
    }

    private long vLayerAt(int n, int layer) {
        return kLayerAt(n, layers) + layer * (12 + n * vRowBytes());
    }

    /** Checks {@code blob} against this geometry and the carving invariant; returns its cell count. */
    private int requireBlob(MemorySegment blob) {
        int n = cells(blob);
        if (n < 0 || blob.byteSize() != blobBytes(n)) {
            throw new IllegalStateException("sequence state of " + blob.byteSize() + " bytes is not a single-sequence "
                    + LlamaCppAbi.BUILD_TAG + " state of " + n + " cells in " + this + " (expected " + blobBytes(Math.max(n, 0)) + ")");
        }
        for (int c = 0; c < n; c++) {
            int pos = blob.get(JAVA_INT_UNALIGNED, 4 + 8L * c);
            int seqIds = blob.get(JAVA_INT_UNALIGNED, 8 + 8L * c);
            if (pos != c || seqIds != 0) {
                throw new IllegalStateException("cell " + c + " holds position " + pos + " (n_seq_id " + seqIds
                        + "): only a sequence decoded from position 0 into an empty cache can be carved");
            }
        }
        long at = 4 + 8L * n;
        if ((blob.get(JAVA_INT_UNALIGNED, at) != 0) != vTrans || blob.get(JAVA_INT_UNALIGNED, at + 4) != layers) {
            throw new IllegalStateException("v_trans / n_layer differ from " + this);
        }
        for (int layer = 0; layer < layers; layer++) {
            long k = kLayerAt(n, layer);
            long v = vLayerAt(n, layer);
            boolean kOk = blob.get(JAVA_INT_UNALIGNED, k) == kType && blob.get(JAVA_LONG_UNALIGNED, k + 4) == kRowBytes;
            boolean vOk = blob.get(JAVA_INT_UNALIGNED, v) == vType && (vTrans
                    ? blob.get(JAVA_INT_UNALIGNED, v + 4) == vElBytes && blob.get(JAVA_INT_UNALIGNED, v + 8) == vDims
                    : blob.get(JAVA_LONG_UNALIGNED, v + 4) == vRowBytes());
            if (!kOk || !vOk) throw new IllegalStateException("layer " + layer + " K/V header differs from " + this);
        }
        return n;
    }

    private void requireImage(MemorySegment image) {
        if (image.byteSize() < pageBytes()) {
            throw new IllegalArgumentException("page image is " + image.byteSize() + " bytes, needs " + pageBytes());
        }
    }

    /** Bytes of one element of an unquantized {@code ggml_type} (F32, F16, BF16 = 30). */
    static int typeBytes(int ggmlType) {
        return switch (ggmlType) {
            case 0 -> 4;
            case 1, 30 -> 2;
            default -> throw new IllegalStateException("ggml_type " + ggmlType + " is quantized; " + NAME + " needs F32/F16/BF16");
        };
    }
}
