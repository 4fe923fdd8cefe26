package io.orbitkv.jlama;

import io.orbitkv.engine.KvPageStore;
import io.orbitkv.engine.ParityGateSupport;
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
        ParityGateSupport.assertBitIdentical(warm, expected);
    }
}
