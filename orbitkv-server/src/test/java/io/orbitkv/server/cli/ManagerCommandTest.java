package io.orbitkv.server.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** {@code orbitkv manager} refuses bad configuration with one line and status 2, before touching any file. */
class ManagerCommandTest {

    @TempDir
    Path dir;

    @Test
    void badConfigurationIsOneLineAndStatusTwoAndCreatesNothing() throws Exception {
        Path config = Files.writeString(dir.resolve("m.json"), "{\"dramBytez\": \"1g\"}");
        Path ssd = dir.resolve("ssd");
        OrbitKvCliTest.Result unknown = OrbitKvCliTest.run("manager", "--config", config.toString(),
                "--ssd-dir", ssd.toString());
        assertThat(unknown.code()).isEqualTo(2);
        assertThat(unknown.err().strip()).startsWith("orbitkv: error: ").contains("unknown key 'dramBytez'")
                .doesNotContain("\n");
        OrbitKvCliTest.Result size = OrbitKvCliTest.run("manager", "--dram-bytes", "a lot", "--ssd-dir", ssd.toString());
        assertThat(size.code()).isEqualTo(2);
        assertThat(size.err()).contains("key 'dramBytes'");
        OrbitKvCliTest.Result set = OrbitKvCliTest.run("manager", "--set", "noequals", "--ssd-dir", ssd.toString());
        assertThat(set.code()).isEqualTo(2);
        assertThat(set.err()).contains("KEY=VALUE");
        assertThat(ssd).doesNotExist();
    }

    @Test
    void helpListsTheOptions() {
        OrbitKvCliTest.Result help = OrbitKvCliTest.run("manager", "--help");
        assertThat(help.code()).isZero();
        assertThat(help.out()).contains("--config", "--dram-bytes", "--dram-dir", "--ssd-dir", "--ssd-bytes",
                "--socket", "--http", "--ready-file", "--set");
    }
}
