package io.orbitkv.server.daemon;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.testkit.EtcdServer;
import io.orbitkv.testkit.ManagerProcess;
import io.orbitkv.testkit.ProcessTest;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.Comparator;
import java.util.List;
import java.util.stream.Stream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * A real etcd and one Manager process started twice, stopped, its SSD directory (which holds the
 * epoch file) wiped, and started again: it rejoins as a valid member with an incarnation above the
 * one etcd holds for its node id, and its log says why.
 */
@ProcessTest
class MembershipRejoinProcessTest {

    @TempDir
    Path dir;

    @Test
    void aManagerRestartedWithAWipedSsdDirectoryRejoinsWithAFreshIncarnation() throws Exception {
        Path token = Managers.clusterToken(dir);
        try (EtcdServer etcd = EtcdServer.start(dir)) {
            long registered = 0;
            for (int start = 0; start < 2; start++) {
                try (ManagerProcess a = Managers.startMember(dir, etcd.endpoint(), "a", token)) {
                    assertThat(a.awaitView(1, Duration.ofSeconds(15))).as(a.status()).isTrue();
                    registered = a.incarnation();
                }
            }
            assertThat(registered).isEqualTo(2);

            Path ssd = ManagerProcess.ssdDir(dir.resolve("a"));
            try (Stream<Path> wiped = Files.walk(ssd)) {
                for (Path p : wiped.sorted(Comparator.reverseOrder()).toList()) Files.delete(p);
            }
            try (ManagerProcess a = Managers.startMember(dir, etcd.endpoint(), "a", token)) {
                assertThat(a.incarnation()).as("above the incarnation etcd holds").isEqualTo(registered + 1);
                assertThat(a.awaitView(1, Duration.ofSeconds(15))).as("a valid member again: " + a.status()).isTrue();
                assertThat(a.stderr()).contains("WARN ", "etcd holds incarnation " + registered + " for node a",
                        "rejoining as incarnation " + (registered + 1));
                assertThat(List.of(a.status())).anySatisfy(s -> assertThat(s).doesNotContain("superseded"));
            }
        }
    }
}
