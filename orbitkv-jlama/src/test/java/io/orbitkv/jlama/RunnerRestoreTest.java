package io.orbitkv.jlama;

import com.github.tjake.jlama.model.AbstractModel;
import io.orbitkv.state.Namespace;
import io.orbitkv.testmodel.TinyLlamaModel;
import io.orbitkv.testmodel.TinyLlamaSpec;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.Arrays;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;

class RunnerRestoreTest {

    static final int P = 16;
    @TempDir
    static Path dir;
    static TinyLlamaModel files;
    static AbstractModel model;
    static Namespace ns;

    @BeforeAll
    static void load() throws Exception {
        files = TinyLlamaModel.generate(TinyLlamaSpec.ci(), dir.resolve("m"));
        model = JlamaSessionRunner.loadModel(files.dir());
        ns = JlamaNamespace.of(files, P);
    }

    @AfterAll
    static void close() {
        model.close();
    }

    static int[] prompt(long seed, int n) {
        Random r = new Random(seed);
        int[] t = new int[n];
        t[0] = 1;
        for (int i = 1; i < n; i++) t[i] = 3 + r.nextInt(300);
        return t;
    }

    @Test
    void restoredPrefixGivesBitIdenticalLogits() {
        var store = new InMemoryPageStore();
        var warm = new JlamaSessionRunner(model, ns, store);
        var cold = new JlamaSessionRunner(model, ns, KvPageStore.cold());
        int[] first = prompt(7, 50);
        RequestReport r1 = warm.run(first, 20, System.nanoTime());
        System.out.println("first: " + r1.published() + " tokens " + Arrays.toString(r1.generated()));
        int[] second = Arrays.copyOf(first, 50 + 19 + 10);
        System.arraycopy(r1.generated(), 0, second, 50, 19);
        int[] more = prompt(8, 10);
        System.arraycopy(more, 0, second, 69, 10);
        RequestReport w = warm.run(second, 20, System.nanoTime());
        RequestReport c = cold.run(second, 20, System.nanoTime());
        System.out.println("restored " + w.restoredTokens() + " src " + w.source());
        assertThat(w.restoredTokens()).isEqualTo(64);
        assertThat(w.generated()).isEqualTo(c.generated());
        for (int i = 0; i < c.logits().length; i++) {
            int[] a = bits(w.logits()[i]), b = bits(c.logits()[i]);
            assertThat(a).as("step " + i).isEqualTo(b);
        }
    }

    static int[] bits(float[] f) {
        int[] out = new int[f.length];
        for (int i = 0; i < f.length; i++) out[i] = Float.floatToRawIntBits(f[i]);
        return out;
    }
}
