package io.orbitkv.bench.manager;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Files;
import java.nio.file.Path;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The echo baseline moves exactly the byte counts it is told to, on any number of connections. */
class UdsEchoTest {

    @TempDir
    Path dir;

    @Test
    void eachConnectionGetsRepliesOfTheSizeItsRequestsName() throws Exception {
        Path socket = dir.resolve("echo.sock");
        try (UdsEcho echo = new UdsEcho(socket);
             UdsEcho.Client big = echo.connect(32_828, 17_468);
             UdsEcho.Client small = echo.connect(24, 32)) {
            for (int i = 0; i < 100; i++) {
                assertThat(big.roundTrip()).isEqualTo(17_468);
                assertThat(small.roundTrip()).isEqualTo(32);
            }
        }
        assertThat(Files.exists(socket)).as("socket file removed on close").isFalse();
    }

    @Test
    void aFrameTooShortToNameItsReplyIsRefused() {
        assertThatThrownBy(() -> UdsEcho.frame(8, 16)).isInstanceOf(IllegalArgumentException.class);
    }
}
