package io.orbitkv.server.cli;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.io.TempDir;

/** {@code orbitkv manager} refuses bad configuration (a bad cluster token file included) with one line and status 2, before touching any file. */
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
    @Timeout(60) // an accepted token would start a Manager that runs until signalled
    void aRefusedClusterTokenIsStatusTwoBeforeTheStoreIsOpened() throws Exception {
        Path ssd = dir.resolve("ssd");
        Path open = Files.writeString(dir.resolve("open-token"), "0123456789abcdef-readable\n");
        Files.setPosixFilePermissions(open, PosixFilePermissions.fromString("rw-r--r--"));
        Path placeholder = Files.write(dir.resolve("nul-token"), new byte[32]);
        Files.setPosixFilePermissions(placeholder, PosixFilePermissions.fromString("rw-------"));
        Path shortToken = Files.writeString(dir.resolve("short-token"), "0123456789");
        Files.setPosixFilePermissions(shortToken, PosixFilePermissions.fromString("rw-------"));
        for (Path token : new Path[] {shortToken, placeholder, open}) {
            OrbitKvCliTest.Result r = OrbitKvCliTest.run("manager", "--ssd-dir", ssd.toString(),
                    "--etcd", "http://127.0.0.1:1", "--node-id", "n1", "--cluster-token-file", token.toString());
            assertThat(r.code()).as(token + ": " + r.err()).isEqualTo(2);
            assertThat(r.err().strip()).startsWith("orbitkv: error: ").contains(token.toString()).doesNotContain("\n");
        }
        assertThat(OrbitKvCliTest.run("manager", "--ssd-dir", ssd.toString(), "--etcd", "http://127.0.0.1:1",
                "--node-id", "n1", "--cluster-token-file", open.toString()).err()).contains("chmod 600");
        assertThat(ssd).as("nothing opened or recovered").doesNotExist();
    }

    @Test
    void helpListsTheOptions() {
        OrbitKvCliTest.Result help = OrbitKvCliTest.run("manager", "--help");
        assertThat(help.code()).isZero();
        assertThat(help.out()).contains("--config", "--dram-bytes", "--dram-dir", "--ssd-dir", "--ssd-bytes",
                "--socket", "--http", "--ready-file", "--set");
    }
}
