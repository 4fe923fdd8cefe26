package io.orbitkv.jlama;

import io.orbitkv.testkit.ProcessTest;
import io.orbitkv.testmodel.TinyLlamaSpec;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.ByteArrayOutputStream;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;

/** The demo end to end: every turn after the first restores, the restart turn is staged from SSD, outputs equal cold. */
@ProcessTest
class JlamaDemoTest {

    @TempDir
    Path work;

    @Test
    void demoShowsWarmTurnsAndAnSsdHitWithIdenticalOutputs() throws Exception {
        ByteArrayOutputStream bytes = new ByteArrayOutputStream();
        JlamaDemo.run(work, TinyLlamaSpec.ci(), new PrintStream(bytes, true, StandardCharsets.UTF_8));
        String out = bytes.toString(StandardCharsets.UTF_8);
        assertThat(out).containsPattern("turn 1 +71 .* 0 +71 +NONE +yes");
        assertThat(out).containsPattern("turn 2 +111 .* 80 +31 +DRAM +yes");
        assertThat(out).containsPattern("turn 4 +174 .* 144 +30 +DRAM +yes");
        assertThat(out).containsPattern("turn 4 again +174 .* 160 +14 +STAGED +yes");
        assertThat(out).doesNotContainPattern(" NO\\b");
    }
}
