package io.orbitkv.testmodel;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;

import java.util.HashSet;
import java.util.Set;

import static org.assertj.core.api.Assertions.assertThat;

class RopePermutationProperties {

    /**
     * The GGUF Q/K reorder moves whole rows within a head, each HF row lands exactly once, and
     * pair (2j, 2j+1) of llama.cpp is pair (j, j + d/2) of HF.
     */
    @Property(tries = 40)
    void reorderIsAPerHeadBijectionPairingHalves(@ForAll @IntRange(min = 1, max = 4) int kvHeads,
                                                 @ForAll @IntRange(min = 1, max = 4) int groups,
                                                 @ForAll @IntRange(min = 1, max = 4) int halfHead,
                                                 @ForAll long seed) {
        int heads = kvHeads * groups;
        int headSize = 2 * halfHead;
        TinyLlamaSpec spec = new TinyLlamaSpec("p", 1, heads * headSize, heads, kvHeads, 8, 300, 16, seed);
        TinyLlamaWeights w = new TinyLlamaWeights(spec);
        for (LlamaTensor t : w.tensors()) {
            if (t.ropeHeads() == 0) continue;
            float[] hf = w.hfValues(t);
            float[] gg = w.ggufValues(t);
            int cols = t.cols();
            int headRows = t.rows() / t.ropeHeads();
            Set<Integer> seen = new HashSet<>();
            for (int row = 0; row < t.rows(); row++) {
                int head = row / headRows;
                int within = row % headRows;
                int hfRow = head * headRows + (within % 2 == 0 ? within / 2 : headRows / 2 + within / 2);
                assertThat(seen.add(hfRow)).isTrue();
                for (int c = 0; c < cols; c++) assertThat(gg[row * cols + c]).isEqualTo(hf[hfRow * cols + c]);
            }
            assertThat(seen).hasSize(t.rows());
        }
    }
}
