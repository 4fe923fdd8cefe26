package io.orbitkv.testkit;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.Test;

/** The command line a {@link ManagerProcess.Launch} runs: the one-directory layout, then the caller's options. */
class ManagerProcessTest {

    private static final Path DIR = Path.of("/tmp/m");

    @Test
    void theLayoutPutsEveryFileUnderTheDirectoryAndTheCallersOptionsComeLast() {
        List<String> cmd = ManagerProcess.over(DIR).options("--dram-bytes", "16m").options(List.of("--set", "x=1")).command();
        assertThat(cmd).containsSubsequence("--enable-native-access=ALL-UNNAMED", "-Xmx256m",
                "io.orbitkv.server.cli.OrbitKvCli", "manager");
        assertThat(String.join(" ", cmd)).contains("--ssd-dir /tmp/m/ssd --dram-dir /tmp/m/dram --socket /tmp/m/m.sock"
                + " --http 0 --ready-file /tmp/m/ready");
        assertThat(cmd.subList(cmd.size() - 4, cmd.size())).containsExactly("--dram-bytes", "16m", "--set", "x=1");
        assertThat(ManagerProcess.socket(DIR)).isEqualTo(Path.of("/tmp/m/m.sock"));
    }

    @Test
    void aJarAPrefixOtherJvmOptionsAndADramDirectoryReplaceTheDefaults() {
        List<String> cmd = ManagerProcess.over(DIR).jar(Path.of("/opt/m.jar")).prefix(List.of("setpriv", "--"))
                .jvm(List.of("-Xmx1g")).dramDir(Path.of("/dev/shm/x")).command();
        assertThat(cmd.subList(0, 2)).containsExactly("setpriv", "--");
        assertThat(cmd).containsSubsequence("-Xmx1g", "-jar", "/opt/m.jar", "manager").doesNotContain("-Xmx256m", "-cp");
        assertThat(String.join(" ", cmd)).contains("--dram-dir /dev/shm/x");
    }

    @Test
    void clusterOptionsNameTheMemberItsTokenAndShortLeases() {
        assertThat(ManagerProcess.clusterOptions("http://127.0.0.1:2379", "c", "a", Path.of("/t")))
                .containsSubsequence("--etcd", "http://127.0.0.1:2379", "--node-id", "a", "--cluster-id", "c",
                        "--cluster-token-file", "/t", "clusterLeaseTtlMillis=2000", "clusterLookupTimeoutMillis=1000");
    }
}
