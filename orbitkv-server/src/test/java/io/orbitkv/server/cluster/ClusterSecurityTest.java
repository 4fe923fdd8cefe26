package io.orbitkv.server.cluster;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.orbitkv.server.config.ConfigException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Token hygiene: file mode, length, placeholder tokens; every refusal names the file. */
class ClusterSecurityTest {

    @TempDir
    Path dir;

    Path token(String name, byte[] content, String mode) throws Exception {
        Path p = Files.write(dir.resolve(name), content);
        Files.setPosixFilePermissions(p, PosixFilePermissions.fromString(mode));
        return p;
    }

    @Test
    void aPrivateRandomLookingTokenIsAccepted() throws Exception {
        Path ok = token("ok", "  3f9c2a7e51d84b06a1c9e2f7\n".getBytes(StandardCharsets.UTF_8), "rw-------");
        ClusterSecurity s = ClusterSecurity.fromTokenFile("c", ok, Optional.empty());
        assertThat(new String(s.token(), StandardCharsets.UTF_8)).isEqualTo("3f9c2a7e51d84b06a1c9e2f7");
        assertThat(s.toString()).doesNotContain("3f9c2a7e");
    }

    @Test
    void aTokenFileOthersMayReadIsRefusedLikeAnSshKey() throws Exception {
        for (String mode : new String[] {"rw-r--r--", "rw-r-----", "rw----r--", "rw--w----"}) {
            Path open = token("open-" + mode, "3f9c2a7e51d84b06a1c9e2f7".getBytes(StandardCharsets.UTF_8), mode);
            assertThatThrownBy(() -> ClusterSecurity.fromTokenFile("c", open, Optional.empty()))
                    .isInstanceOf(ConfigException.class).hasMessageContaining(open.toString())
                    .hasMessageContaining("group or others").hasMessageContaining("chmod 600");
        }
    }

    @Test
    void shortAndPlaceholderTokensAreRefused() throws Exception {
        byte[][] bad = {
            new byte[32],                                                   // all NUL
            "aaaaaaaaaaaaaaaaaaaaaaaa".getBytes(StandardCharsets.UTF_8),    // one value
            "abababababababababababab".getBytes(StandardCharsets.UTF_8),    // two values
            "abcdefgabcdefgabcdefg".getBytes(StandardCharsets.UTF_8),       // seven values
            "0123456789abcde".getBytes(StandardCharsets.UTF_8),             // 15 bytes
        };
        for (int i = 0; i < bad.length; i++) {
            Path p = token("bad" + i, bad[i], "rw-------");
            assertThatThrownBy(() -> ClusterSecurity.fromTokenFile("c", p, Optional.empty()))
                    .as("token %d", i).isInstanceOf(ConfigException.class).hasMessageContaining(p.toString());
        }
        assertThatThrownBy(() -> ClusterSecurity.fromTokenFile("c", dir.resolve("missing"), Optional.empty()))
                .isInstanceOf(ConfigException.class).hasMessageContaining("cannot read");
    }
}
