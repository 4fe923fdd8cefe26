package io.orbitkv.llamacpp;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;

import java.io.ByteArrayOutputStream;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * Carving and assembling against an independent writer of the b4916 sequence-state format (both
 * V orders, any shape): pages carved from an {@code n}-cell state reassemble to the state the
 * writer produces for the first {@code m*P} cells, byte for byte; each page holds exactly its
 * cells; a state that is not positions {@code 0..n-1} is refused.
 */
class SeqStatePageProperties {

    /** A byte that names (layer, K or V, cell, byte-in-cell), so any misplaced copy shows. */
    static byte value(int layer, int kind, int cell, int b) {
        int h = layer * 0x9E3779B1 ^ kind * 0x85EBCA77 ^ cell * 0xC2B2AE3D ^ b * 0x27D4EB2F;
        return (byte) (h ^ (h >>> 15) ^ (h >>> 24));
    }

    /** The state_write of b4916 for cells {@code 0..n-1}, written from the header's description. */
    static byte[] state(int layers, int kRow, boolean vTrans, int el, int vDims, int n) {
        ByteArrayOutputStream out = new ByteArrayOutputStream();
        ByteBuffer b = ByteBuffer.allocate(16).order(ByteOrder.LITTLE_ENDIAN);
        writeInt(out, b, n);
        for (int c = 0; c < n; c++) {
            writeInt(out, b, c);
            writeInt(out, b, 0);
        }
        writeInt(out, b, vTrans ? 1 : 0);
        writeInt(out, b, layers);
        for (int l = 0; l < layers; l++) {
            writeInt(out, b, 1);
            writeLong(out, b, kRow);
            for (int c = 0; c < n; c++) for (int i = 0; i < kRow; i++) out.write(value(l, 0, c, i));
        }
        for (int l = 0; l < layers; l++) {
            writeInt(out, b, 1);
            if (vTrans) {
                writeInt(out, b, el);
                writeInt(out, b, vDims);
                for (int d = 0; d < vDims; d++) {
                    for (int c = 0; c < n; c++) for (int e = 0; e < el; e++) out.write(value(l, 1, c, d * el + e));
                }
            } else {
                writeLong(out, b, (long) vDims * el);
                for (int c = 0; c < n; c++) for (int i = 0; i < vDims * el; i++) out.write(value(l, 1, c, i));
            }
        }
        return out.toByteArray();
    }

    private static void writeInt(ByteArrayOutputStream out, ByteBuffer b, int v) {
        out.write(b.clear().putInt(v).array(), 0, 4);
    }

    private static void writeLong(ByteArrayOutputStream out, ByteBuffer b, long v) {
        out.write(b.clear().putLong(v).array(), 0, 8);
    }

    @Property(tries = 60)
    void carvedPagesReassembleToTheStateOfTheirPrefix(@ForAll @IntRange(min = 1, max = 4) int layers,
                                                     @ForAll @IntRange(min = 1, max = 6) int kvDims,
                                                     @ForAll boolean vTrans,
                                                     @ForAll @IntRange(min = 1, max = 8) int pageTokens,
                                                     @ForAll @IntRange(min = 0, max = 40) int cells) {
        int el = 2;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment blob = a.allocateFrom(java.lang.foreign.ValueLayout.JAVA_BYTE,
                    state(layers, kvDims * el, vTrans, el, kvDims, cells));
            LlamaCppKvPageLayout layout = LlamaCppKvPageLayout.of(blob, pageTokens);
            assertThat(layout).isEqualTo(new LlamaCppKvPageLayout(layers, 1, kvDims * el, 1, vTrans, el, kvDims, pageTokens));
            assertThat(layout.blobBytes(cells)).isEqualTo(blob.byteSize());
            int pages = cells / pageTokens;
            List<MemorySegment> images = new ArrayList<>();
            for (int p = 0; p < pages; p++) {
                MemorySegment image = a.allocate(layout.pageBytes());
                layout.exportPage(blob, p, image);
                images.add(image);
                // the page holds only its own cells: the first K byte of layer 0 is cell p*P's
                assertThat(image.get(java.lang.foreign.ValueLayout.JAVA_BYTE, 0)).isEqualTo(value(0, 0, p * pageTokens, 0));
            }
            if (pages == 0) {
                assertThatThrownBy(() -> layout.exportPage(blob, 0, a.allocate(layout.pageBytes())))
                        .isInstanceOf(IllegalArgumentException.class);
                return;
            }
            byte[] expected = state(layers, kvDims * el, vTrans, el, kvDims, pages * pageTokens);
            assertThat(layout.assemble(images, a).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE)).isEqualTo(expected);
            MemorySegment dirty = a.allocate(expected.length + 64L).fill((byte) 0x5A);
            assertThat(layout.assemble(images, dirty).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE))
                    .as("a reused buffer: every byte of the blob is written, whatever it held").isEqualTo(expected);
        }
    }

    @Property(tries = 20)
    void aStateWhoseCellsAreNotPositionsFromZeroIsNotCarved(@ForAll @IntRange(min = 1, max = 20) int cells,
                                                           @ForAll @IntRange(min = 0, max = 19) int shifted) {
        int at = shifted % cells;
        try (Arena a = Arena.ofConfined()) {
            MemorySegment blob = a.allocateFrom(java.lang.foreign.ValueLayout.JAVA_BYTE, state(2, 4, true, 2, 2, cells));
            blob.set(java.lang.foreign.ValueLayout.JAVA_INT_UNALIGNED, 4 + 8L * at, at + 100);
            assertThatThrownBy(() -> LlamaCppKvPageLayout.of(blob, 1))
                    .isInstanceOf(IllegalStateException.class).hasMessageContaining("cell " + at + " holds position " + (at + 100));
        }
    }
}
