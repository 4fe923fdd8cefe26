package io.orbitkv.llamacpp;

import io.orbitkv.testkit.ProcessTest;
import io.orbitkv.testmodel.TinyLlamaSpec;
import io.orbitkv.testmodel.TinyMambaSpec;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

/** The llama.cpp demo end to end: later turns restore, the restart turn is staged from SSD, every turn equals cold. */
@ProcessTest
class LlamaCppDemoTest {

    @Test
    void turnsRestoreAndEqualCold(@TempDir Path work) throws Exception {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        int differing = LlamaCppDemo.run(work, TinyLlamaSpec.ci(), new PrintStream(bytes, true, StandardCharsets.UTF_8));
        String out = bytes.toString(StandardCharsets.UTF_8);
        assertThat(differing).as(out).isZero();
        assertThat(out).containsPattern("turn 1 .* 0 .* NONE +yes");
        assertThat(out).containsPattern("turn 2 .* DRAM +yes");
        assertThat(out).containsPattern("turn 4 again .* STAGED +yes");
    }

    @Test
    void theRecurrentModelRestoresCheckpointsEveryTurnAndEqualsCold(@TempDir Path work) throws Exception {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        int differing = LlamaCppDemo.runRecurrent(work, TinyMambaSpec.ci(), new PrintStream(bytes, true, StandardCharsets.UTF_8));
        String out = bytes.toString(StandardCharsets.UTF_8);
        assertThat(differing).as(out).isZero();
        assertThat(out).contains("Mamba-1");
        assertThat(out).containsPattern("turn 1 .* 0 .* NONE +yes");
        assertThat(out).containsPattern("turn 2 .* 19524 +DRAM +yes");
        assertThat(out).containsPattern("turn 4 again .* 19524 +STAGED +yes");
    }
}
