package io.orbitkv.engine;

import io.orbitkv.state.StateKey;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatCode;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The shared gate must reject any one-bit difference and accept only raw-bit equality; prompts are reproducible. */
class ParityGateSupportTest {

    private static RequestReport report(int[] tokens, float[][] logits) {
        return new RequestReport(tokens, logits, 4, 0, 4, 0, HitSource.NONE, 1, KvPageStore.PublishReport.NONE);
    }

    @Test
    void identicalReportsPass() {
        RequestReport a = report(new int[]{5, 6}, new float[][]{{0.5f, -1f}, {2f, Float.NaN}});
        RequestReport b = report(new int[]{5, 6}, new float[][]{{0.5f, -1f}, {2f, Float.NaN}});
        assertThatCode(() -> ParityGateSupport.assertBitIdentical(a, b)).doesNotThrowAnyException();
    }

    @Test
    void aSignedZeroAnOtherTokenOrAShorterRowFails() {
        RequestReport cold = report(new int[]{5, 6}, new float[][]{{0f, 1f}, {2f, 3f}});
        assertThatThrownBy(() -> ParityGateSupport.assertBitIdentical(
                report(new int[]{5, 6}, new float[][]{{-0f, 1f}, {2f, 3f}}), cold))
                .isInstanceOf(AssertionError.class).hasMessageContaining("step 0 logit 0");
        assertThatThrownBy(() -> ParityGateSupport.assertBitIdentical(
                report(new int[]{5, 7}, new float[][]{{0f, 1f}, {2f, 3f}}), cold))
                .isInstanceOf(AssertionError.class).hasMessageContaining("greedy tokens differ");
        assertThatThrownBy(() -> ParityGateSupport.assertBitIdentical(
                report(new int[]{5, 6}, new float[][]{{0f, 1f}, {2f}}), cold))
                .isInstanceOf(AssertionError.class).hasMessageContaining("step 1: logits length differs");
    }

    @Test
    void promptsAreSeededAndStayOutOfTheSpecialTokens() {
        int[] p = ParityGateSupport.prompt(7, 64, 32);
        assertThat(p).hasSize(64).startsWith(1).containsExactly(ParityGateSupport.prompt(7, 64, 32));
        for (int i = 1; i < p.length; i++) assertThat(p[i]).isBetween(3, 31);
        assertThat(p).isNotEqualTo(ParityGateSupport.prompt(8, 64, 32));
    }

    @Test
    void aReportWrittenByAnotherJvmReadsBackBitForBit(@TempDir Path dir) throws Exception {
        RequestReport r = new RequestReport(new int[]{9, 4}, new float[][]{{-0f, Float.intBitsToFloat(0x7FC0_0001)}, {1e-40f, 3f}},
                58, 48, 10, 12_288, HitSource.STAGED, 1_234_567, new KvPageStore.PublishReport(0, 3, 0));
        ParityGateSupport.writeReport(r, dir.resolve("r.bin"));
        RequestReport back = ParityGateSupport.readReport(dir.resolve("r.bin"));
        assertThatCode(() -> ParityGateSupport.assertBitIdentical(back, r)).doesNotThrowAnyException();
        assertThat(back).usingRecursiveComparison().ignoringFields("logits").isEqualTo(r);
        assertThat(Float.floatToRawIntBits(back.logits()[0][1])).isEqualTo(0x7FC0_0001);
    }

    @Test
    void noExtentFileMeansNothingToFlip(@TempDir Path ssd) throws Exception {
        assertThat(ParityGateSupport.flipPayloadByte(ssd, StateKey.ofBytes(new byte[32]))).isFalse();
    }
}
