package io.orbitkv.jlama;

import io.orbitkv.engine.KvPageStore;
import io.orbitkv.engine.RequestReport;
import com.github.tjake.jlama.model.AbstractModel;
import io.orbitkv.state.Namespace;

import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;

/**
 * The parity gates' reference: a runner on its own model instance with {@link KvPageStore#cold()}
 * (never touches OrbitKV), its results cached per prompt, and the bit-for-bit comparison.
 * Confined to the test thread.
 */
final class ColdControl {

    private final JlamaSessionRunner runner;
    private final int newTokens;
    private final Map<String, RequestReport> results = new HashMap<>();

    ColdControl(AbstractModel ownModel, Namespace ns, int newTokens) {
        this.runner = new JlamaSessionRunner(ownModel, ns, KvPageStore.cold());
        this.newTokens = newTokens;
    }

    RequestReport result(int[] prompt) {
        return results.computeIfAbsent(Arrays.toString(prompt), k -> runner.run(prompt, newTokens, System.nanoTime()));
    }

    /** The gate: greedy tokens and every logit of every step bit-identical to the cold run. */
    void assertParity(RequestReport warm, int[] prompt) {
        RequestReport expected = result(prompt);
        if (expected.restoredTokens() != 0) throw new AssertionError("the control restored something");
        if (!Arrays.equals(warm.generated(), expected.generated())) {
            throw new AssertionError("greedy tokens differ: warm " + Arrays.toString(warm.generated())
                    + " cold " + Arrays.toString(expected.generated()));
        }
        for (int step = 0; step < expected.logits().length; step++) {
            float[] w = warm.logits()[step];
            float[] c = expected.logits()[step];
            if (w.length != c.length) throw new AssertionError("step " + step + ": logits length differs");
            for (int v = 0; v < c.length; v++) {
                if (Float.floatToRawIntBits(w[v]) != Float.floatToRawIntBits(c[v])) {
                    throw new AssertionError("step " + step + " logit " + v + ": warm " + w[v] + " != cold " + c[v]);
                }
            }
        }
    }
}
