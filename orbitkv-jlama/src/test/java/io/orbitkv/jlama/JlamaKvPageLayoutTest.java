package io.orbitkv.jlama;

import com.github.tjake.jlama.model.AbstractModel;
import com.github.tjake.jlama.tensor.AbstractTensor;
import com.github.tjake.jlama.tensor.KvBufferCache;
import io.orbitkv.testmodel.TinyLlamaModel;
import io.orbitkv.testmodel.TinyLlamaSpec;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;

import static java.lang.foreign.ValueLayout.JAVA_FLOAT_UNALIGNED;
import static org.assertj.core.api.Assertions.assertThat;

/**
 * The bulk copies of {@link JlamaKvPageLayout} against Jlama's own per-position view of the KV
 * buffer ({@code getKeyTensorForPosition}): every vector of an imported page lands where Jlama
 * reads that (layer, position), an exported page reads the same bytes back, and a page import
 * writes only its own positions.
 *
 * <p>The model is the CI model with a 32,768-token context: Jlama 0.8.4 then holds 16,384
 * positions of both layers per KV page, the layout a real context gets (the bench model: 512
 * positions of 8 layers). With the CI model's 256-token context, {@code computePageSize} finds no
 * page that fits and falls back to one page per (layer, position), whose vectors were seen to
 * share their memory in this JDK: a write to one position read back from every other.
 */
class JlamaKvPageLayoutTest {

    static final int P = ParityGateTest.PAGE_TOKENS;
    @TempDir
    static Path dir;
    static TinyLlamaModel files;
    static AbstractModel model;
    static JlamaKvPageLayout layout;

    @BeforeAll
    static void load() throws Exception {
        TinyLlamaSpec ci = TinyLlamaSpec.ci();
        TinyLlamaSpec longContext = new TinyLlamaSpec(ci.name() + "-32k", ci.layers(), ci.hidden(), ci.heads(), ci.kvHeads(),
                ci.intermediate(), ci.vocab(), 32_768, ci.seed());
        files = TinyLlamaModel.generate(longContext, dir.resolve("m"));
        model = JlamaSessionRunner.loadModel(files.dir());
        layout = new JlamaKvPageLayout(model.getConfig().numberOfLayers, model.getConfig().kvLength, P);
    }

    @AfterAll
    static void close() {
        model.close();
    }

    @Test
    void importedPagesLandWhereJlamaReadsEachPositionAndExportReadsThemBack() {
        try (KvBufferCache cache = new KvBufferCache(model); Arena a = Arena.ofConfined()) {
            KvBufferCache.KvBuffer kv = cache.getKvBuffer(UUID.randomUUID());
            List<MemorySegment> images = new ArrayList<>();
            for (int page = 0; page < 3; page++) images.add(distinctImage(a, page));
            layout.importPages(images, kv);
            for (int page = 0; page < images.size(); page++) {
                for (int layer = 0; layer < layout.layers(); layer++) {
                    for (int slot = 0; slot < P; slot++) {
                        int position = page * P + slot;
                        assertVector(kv.getKeyTensorForPosition(layer, position), images.get(page), layout.offset(layer, 0, slot));
                        assertVector(kv.getValTensorForPosition(layer, position), images.get(page), layout.offset(layer, 1, slot));
                    }
                }
                MemorySegment exported = a.allocate(layout.pageBytes());
                layout.exportPage(kv, page, exported);
                assertThat(exported.mismatch(images.get(page))).as("page %d read back", page).isEqualTo(-1);
            }
        }
    }

    @Test
    void importPageWritesOnlyItsOwnPositions() {
        try (KvBufferCache cache = new KvBufferCache(model); Arena a = Arena.ofConfined()) {
            KvBufferCache.KvBuffer kv = cache.getKvBuffer(UUID.randomUUID());
            MemorySegment image = distinctImage(a, 7);
            layout.importPage(image, kv, 2);
            MemorySegment exported = a.allocate(layout.pageBytes());
            layout.exportPage(kv, 2, exported);
            assertThat(exported.mismatch(image)).isEqualTo(-1);
            for (int page : new int[] {1, 3}) {
                layout.exportPage(kv, page, exported);
                assertThat(isZero(exported)).as("page %d untouched", page).isTrue();
            }
        }
    }

    /** An image whose every float is distinct: page * 1e6 + its index. */
    private static MemorySegment distinctImage(Arena a, int page) {
        MemorySegment image = a.allocate(layout.pageBytes(), 64);
        for (long i = 0; i < layout.pageBytes() / Float.BYTES; i++) {
            image.setAtIndex(JAVA_FLOAT_UNALIGNED, i, page * 1_000_000f + i + 1);
        }
        return image;
    }

    private static void assertVector(AbstractTensor<?, ?> vector, MemorySegment image, long offset) {
        MemorySegment expected = image.asSlice(offset, layout.vectorBytes());
        assertThat(vector.getMemorySegment().asSlice(0, layout.vectorBytes()).mismatch(expected)).isEqualTo(-1);
    }

    private static boolean isZero(MemorySegment s) {
        for (long i = 0; i < s.byteSize(); i++) if (s.get(java.lang.foreign.ValueLayout.JAVA_BYTE, i) != 0) return false;
        return true;
    }
}
