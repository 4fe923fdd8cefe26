package io.orbitkv.jlama;

import com.github.tjake.jlama.model.AbstractModel;
import com.github.tjake.jlama.tensor.AbstractTensor;
import com.github.tjake.jlama.tensor.KvBufferCache;
import io.orbitkv.engine.RequestReport;
import io.orbitkv.testmodel.TinyLlamaModel;
import io.orbitkv.testmodel.TinyLlamaSpec;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The page image against Jlama's own per-position accessors, on both shapes of Jlama buffer the
 * layout meets: the CI model (256-token context: one position per Jlama context page, so pages
 * are copied vector by vector) and the same model with a 4,096-token context (2,048 positions per
 * context page, so a page is one run per layer and kind).
 */
class JlamaKvPageLayoutTest {

    static final int P = ParityGateTest.PAGE_TOKENS;
    static final int PAGES = 3;

    @TempDir
    static Path dir;
    static TinyLlamaModel shortFiles;
    static AbstractModel shortContext;
    static TinyLlamaModel longFiles;
    static AbstractModel longContext;
    static AbstractModel longControl;

    @BeforeAll
    static void load() throws IOException {
        shortFiles = TinyLlamaModel.generate(TinyLlamaSpec.ci(), dir.resolve("short"));
        shortContext = JlamaSessionRunner.loadModel(shortFiles.dir());
        longFiles = TinyLlamaModel.generate(longContextCi(), dir.resolve("long"));
        longContext = JlamaSessionRunner.loadModel(longFiles.dir());
        longControl = JlamaSessionRunner.loadModel(longFiles.dir());
    }

    @AfterAll
    static void close() {
        shortContext.close();
        longContext.close();
        longControl.close();
    }

    /** The CI model's shape and weights with a 4,096-token context. */
    static TinyLlamaSpec longContextCi() {
        TinyLlamaSpec ci = TinyLlamaSpec.ci();
        return new TinyLlamaSpec(ci.name(), ci.layers(), ci.hidden(), ci.heads(), ci.kvHeads(), ci.intermediate(),
                ci.vocab(), 4096, ci.seed());
    }

    @Test
    void importedPagesLandAtTheirPositionsAndExportBackUnchanged_oneVectorPerContextPage() {
        importThenExport(shortContext);
    }

    @Test
    void importedPagesLandAtTheirPositionsAndExportBackUnchanged_contiguousContextPages() {
        importThenExport(longContext);
    }

    @Test
    void aHitCopiedAsOneRunPerLayerAndKindIsBitIdenticalToColdControl() {
        var ns = JlamaNamespace.of(longFiles, P);
        var control = new ColdControl(longControl, ns, ParityGateTest.NEW_TOKENS);
        var store = new InMemoryPageStore();
        var runner = new JlamaSessionRunner(longContext, ns, store);
        int[] prompt = ParityGateTest.prompt(22, 120);
        control.assertParity(runner.run(prompt, ParityGateTest.NEW_TOKENS, System.nanoTime()), prompt);
        RequestReport hit = runner.run(prompt, ParityGateTest.NEW_TOKENS, System.nanoTime());
        assertThat(hit.restoredTokens()).as("7 pages").isEqualTo(7 * P);
        control.assertParity(hit, prompt);
    }

    @Test
    void aRequestLeavesNoPageFilesInTheModelsWorkingDirectory() throws IOException {
        var store = new InMemoryPageStore();
        var runner = new JlamaSessionRunner(shortContext, JlamaNamespace.of(shortFiles, P), store);
        int[] prompt = ParityGateTest.prompt(21, 60);
        runner.run(prompt, 4, System.nanoTime());
        assertThat(runner.run(prompt, 4, System.nanoTime()).restoredTokens()).isEqualTo(3 * P);
        Path work = shortContext.getConfig().workingDirectory().orElseThrow().toPath();
        try (Stream<Path> files = Files.list(work)) {
            assertThat(files.filter(f -> f.toString().endsWith(".page")))
                    .as("KV buffers come from Jlama's tensor pool, not from files in " + work)
                    .isEmpty();
        }
    }

    private static void importThenExport(AbstractModel model) {
        var c = model.getConfig();
        JlamaKvPageLayout layout = new JlamaKvPageLayout(c.numberOfLayers, c.kvLength, P);
        try (Arena arena = Arena.ofConfined();
             KvBufferCache.KvBuffer kv = new KvBufferCache(model).getEphemeralKvBuffer()) {
            List<MemorySegment> images = new ArrayList<>();
            for (int page = 0; page < PAGES; page++) {
                MemorySegment image = arena.allocate(layout.pageBytes(), Float.BYTES);
                for (long i = 0; i < image.byteSize() / Float.BYTES; i++) {
                    image.setAtIndex(ValueLayout.JAVA_FLOAT, i, page * 1_000_000f + i + 1);
                }
                images.add(image);
            }
            layout.importPages(images, kv);

            for (int page = 0; page < PAGES; page++) {
                for (int layer = 0; layer < c.numberOfLayers; layer++) {
                    for (int slot = 0; slot < P; slot++) {
                        int position = page * P + slot;
                        assertVector(kv.getKeyTensorForPosition(layer, position), images.get(page), layout.offset(layer, 0, slot),
                                c.kvLength, "K layer " + layer + " position " + position);
                        assertVector(kv.getValTensorForPosition(layer, position), images.get(page), layout.offset(layer, 1, slot),
                                c.kvLength, "V layer " + layer + " position " + position);
                    }
                }
                MemorySegment exported = arena.allocate(layout.pageBytes());
                layout.exportPage(kv, page, exported);
                assertThat(exported.mismatch(images.get(page))).as("page " + page + " exports as imported").isEqualTo(-1);
            }
        }
    }

    private static void assertVector(AbstractTensor<?, ?> vector, MemorySegment image, long offset, int width, String what) {
        float[] want = new float[width];
        float[] got = new float[width];
        for (int i = 0; i < width; i++) {
            want[i] = image.get(ValueLayout.JAVA_FLOAT, offset + (long) i * Float.BYTES);
            got[i] = vector.get(0, i);
        }
        assertThat(got).as(what).containsExactly(want);
    }
}
