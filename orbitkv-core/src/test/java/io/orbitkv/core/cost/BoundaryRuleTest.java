package io.orbitkv.core.cost;

import org.junit.jupiter.api.Test;

import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/**
 * The boundary scenario of the cost model: a prompt of 4,000 tokens, a longest legal boundary of 3,840
 * tokens that needs SSD staging, and a DRAM-only boundary of 3,584 tokens.
 */
class BoundaryRuleTest {

    private static final long PROMPT = 4_000;
    private static final long ADMISSION_NANOS = 1_000_000;
    private static final double PREFILL_TOKENS_PER_SECOND = 10_000; // 256 more tokens = 25.6 ms
    private static final BoundaryCandidate DRAM_ONLY = BoundaryCandidate.resident(3_584);

    private static BoundaryCandidate ssd(double readyMillis) {
        return new BoundaryCandidate(3_840, SourceMedium.SSD,
                new Lookup.Warm(new Estimate(readyMillis * 1e6, readyMillis * 1e5, 8, 0)));
    }

    @Test
    void slowSsdStagingAndACheapRecomputationSelectTheShorterDramBoundary() {
        BoundaryChoice c = BoundaryRule.choose(List.of(ssd(200), DRAM_ONLY), PROMPT, ADMISSION_NANOS,
                PREFILL_TOKENS_PER_SECOND, 0.05);
        assertThat(c.basis()).isEqualTo(BoundaryChoice.Basis.SHORTENED_BY_ESTIMATE);
        assertThat(c.chosen()).isEqualTo(DRAM_ONLY);
        assertThat(c.firstTokenNanos()).isCloseTo(1e6 + 416 * 1e5, org.assertj.core.data.Offset.offset(1.0));
    }

    @Test
    void fastSsdStagingKeepsTheLongestBoundary() {
        BoundaryChoice c = BoundaryRule.choose(List.of(ssd(5), DRAM_ONLY), PROMPT, ADMISSION_NANOS,
                PREFILL_TOKENS_PER_SECOND, 0.05);
        assertThat(c.basis()).isEqualTo(BoundaryChoice.Basis.LONGEST_BY_ESTIMATE);
        assertThat(c.chosen().boundaryTokens()).isEqualTo(3_840);
    }

    @Test
    void withoutEstimatesOrPrefillRateTheLongestStays() {
        BoundaryCandidate cold = new BoundaryCandidate(3_840, SourceMedium.SSD, new Lookup.Cold(3));
        assertThat(BoundaryRule.choose(List.of(cold, DRAM_ONLY), PROMPT, ADMISSION_NANOS, PREFILL_TOKENS_PER_SECOND, 0.05))
                .isEqualTo(new BoundaryChoice(cold, BoundaryChoice.Basis.NO_ESTIMATE, -1));
        assertThat(BoundaryRule.choose(List.of(ssd(200), DRAM_ONLY), PROMPT, ADMISSION_NANOS, 0, 0.05).basis())
                .isEqualTo(BoundaryChoice.Basis.NO_PREFILL_RATE);
        assertThat(BoundaryRule.choose(List.of(ssd(200)), PROMPT, ADMISSION_NANOS, 10_000, 0.05).basis())
                .isEqualTo(BoundaryChoice.Basis.ONLY_CANDIDATE);
    }

    @Test
    void candidatesAreBoundedAndOrdered() {
        List<BoundaryCandidate> nine = java.util.stream.LongStream.rangeClosed(1, 9).map(i -> 1_000 - i)
                .mapToObj(BoundaryCandidate::resident).toList();
        assertThatThrownBy(() -> BoundaryRule.choose(nine, PROMPT, 0, 1, 0.05)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> BoundaryRule.choose(List.of(DRAM_ONLY, ssd(1)), PROMPT, 0, 1, 0.05))
                .isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> BoundaryRule.choose(List.of(BoundaryCandidate.resident(PROMPT + 1)), PROMPT, 0, 1, 0.05))
                .isInstanceOf(IllegalArgumentException.class);
    }
}
