package io.orbitkv.bench.ttft;

import io.orbitkv.testmodel.ByteFallbackVocab;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import org.junit.jupiter.api.Test;

import java.util.Arrays;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class WorkloadTest {

    private final Workload w = new Workload(3, 3, 40, 12, 5, 7L);

    @Test
    void everySessionSharesTheSystemPromptAndGetsItsOwnUserMessages() {
        int[] system = w.systemPrompt();
        assertThat(system).hasSize(40).startsWith(ByteFallbackVocab.BOS);
        assertThat(w.systemPrompt()).isEqualTo(system);
        int[] a = w.prompt(new int[0], 0, 0);
        int[] b = w.prompt(new int[0], 1, 0);
        assertThat(Arrays.copyOf(a, 40)).isEqualTo(system);
        assertThat(Arrays.copyOf(b, 40)).isEqualTo(system);
        assertThat(a).hasSize(52).isNotEqualTo(b);
        assertThat(w.userMessage(0, 1)).hasSize(12).isNotEqualTo(w.userMessage(0, 2)).doesNotContain(ByteFallbackVocab.BOS);
    }

    @Test
    void aLaterTurnExtendsTheHistoryAndTheLastPromptHasTheAdvertisedLength() {
        int[] history = new int[0];
        int[] prompt = null;
        for (int turn = 0; turn < w.turns(); turn++) {
            prompt = w.prompt(history, 2, turn);
            assertThat(Arrays.copyOf(prompt, history.length)).isEqualTo(history);
            history = Workload.concat(prompt, new int[w.answerTokens()]);
        }
        assertThat(prompt).hasSize(w.lastPromptTokens());
        assertThat(w.maxContextTokens()).isEqualTo(prompt.length + w.answerTokens());
    }

    @Test
    void theWarmupSharesNoTextWithTheMeasuredRun() {
        assertThat(w.warmup().systemPrompt()).isNotEqualTo(w.systemPrompt());
        assertThat(w.warmup().sessions()).isEqualTo(1);
    }

    @Property(tries = 200)
    void aFullHitPrefixIsWholePagesPlusTheMinimumPrefill(@ForAll @IntRange(min = 20, max = 600) int length,
                                                         @ForAll @IntRange(min = 1, max = 32) int page,
                                                         @ForAll @IntRange(min = 1, max = 2) int minPrefill) {
        if (length < page + minPrefill) return;
        int[] prompt = new int[length];
        for (int i = 0; i < length; i++) prompt[i] = i;
        int[] cut = Workload.fullHitPrefix(prompt, page, minPrefill);
        assertThat((cut.length - minPrefill) % page).isZero();
        assertThat(cut.length).isLessThanOrEqualTo(length).isGreaterThan(length - page);
        assertThat(cut).isEqualTo(Arrays.copyOf(prompt, cut.length));
    }

    @Test
    void aPromptShorterThanAPageHasNoFullHitPrefix() {
        assertThatThrownBy(() -> Workload.fullHitPrefix(new int[16], 16, 1)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> new Workload(0, 1, 2, 1, 1, 0)).isInstanceOf(IllegalArgumentException.class);
    }
}
