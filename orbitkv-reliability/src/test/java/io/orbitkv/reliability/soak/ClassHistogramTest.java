package io.orbitkv.reliability.soak;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.IOException;
import java.util.Map;
import org.junit.jupiter.api.Test;

class ClassHistogramTest {

    private static final String WITH_FILLER = """
            12345:
             num     #instances         #bytes  class name (module)
            -------------------------------------------------------
               1:          6920        8935552  [Ljdk.internal.vm.FillerElement; (java.base@25.0.3)
               2:         53047        5645168  [B (java.base@25.0.3)
               3:         65536        3145728  io.orbitkv.core.storage.residency.ResidencyEvent
            Total        125503       17726448
            """;

    private static final String WITHOUT_FILLER = """
            12345:
             num     #instances         #bytes  class name (module)
            -------------------------------------------------------
               1:         60000        6645168  [B (java.base@25.0.3)
               2:         65536        3145728  io.orbitkv.core.storage.residency.ResidencyEvent
               3:            10            320  io.orbitkv.core.query.BlockKeyCache$Entry
            Total        125546        9791216
            """;

    @Test
    void theLiveSetLeavesOutTheCollectorsFillerArrays() throws IOException {
        ClassHistogram h = ClassHistogram.parse(WITH_FILLER);

        assertThat(h.totalBytes()).isEqualTo(17_726_448);
        assertThat(h.liveBytes()).isEqualTo(17_726_448 - 8_935_552);
        assertThat(ClassHistogram.parse(WITHOUT_FILLER).liveBytes()).isEqualTo(9_791_216);
    }

    @Test
    void growthNamesTheClassesThatGrewLargestFirstAndIgnoresFillers() throws IOException {
        ClassHistogram before = ClassHistogram.parse(WITH_FILLER);
        ClassHistogram after = ClassHistogram.parse(WITHOUT_FILLER);

        assertThat(after.grownSince(before, 5)).containsExactly(
                Map.entry("[B", 1_000_000L), Map.entry("io.orbitkv.core.query.BlockKeyCache$Entry", 320L));
        assertThat(before.grownSince(after, 5)).isEmpty();
    }

    @Test
    void aReplyWithoutTotalIsAnError() {
        assertThatThrownBy(() -> ClassHistogram.parse("12345:\nAttachNotSupportedException\n"))
                .isInstanceOf(IOException.class).hasMessageContaining("no Total line");
    }
}
