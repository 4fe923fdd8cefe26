package io.orbitkv.server.log;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.logging.Level;
import java.util.logging.LogRecord;
import java.util.logging.Logger;
import io.orbitkv.core.log.RateLimitedLog;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The backend as the Manager configures it: one line per event with time, level and component,
 * the chosen threshold, libraries held at WARN, messages that cannot forge a second line, a
 * failure repeated at a loop's rate written once per window with its count, and the recent
 * WARN/ERROR events kept for /status (bounded).
 */
class LoggingTest {

    private final ByteArrayOutputStream err = new ByteArrayOutputStream();

    @AfterEach
    void restore() {
        Logging.configure(LogLevel.INFO, System.err);
    }

    private List<String> lines() {
        return err.toString(StandardCharsets.UTF_8).lines().toList();
    }

    @Test
    void oneLinePerEventWithLevelAndComponentAtTheChosenLevel() {
        Logging.configure(LogLevel.INFO, new PrintStream(err, true, StandardCharsets.UTF_8));
        System.getLogger("io.orbitkv.core.storage.ssd.SsdStore").log(System.Logger.Level.INFO, "SSD store ready");
        Logger.getLogger("io.orbitkv.server.daemon.ManagerDaemon").warning("two\nlines");
        Logger.getLogger("io.orbitkv.server.daemon.ManagerDaemon").fine("not at INFO");
        Logger.getLogger("io.netty.util.internal.PlatformDependent").info("a library's INFO line");
        Logger.getLogger("io.grpc.internal.ManagedChannelImpl").log(Level.SEVERE, "a library's error", new IOException("boom"));

        List<String> lines = lines();
        assertThat(lines).hasSize(3);
        assertThat(lines.get(0)).matches("\\d{4}-\\d\\d-\\d\\dT\\d\\d:\\d\\d:\\d\\d\\.\\d{3}Z INFO  storage\\.ssd: SSD store ready");
        assertThat(lines.get(1)).endsWith("WARN  daemon: two | lines");
        assertThat(lines.get(2)).contains("ERROR io.grpc: a library's error | java.io.IOException: boom (at ");
    }

    @Test
    void debugShowsFineRecordsAndStackTraces() {
        Logging.configure(LogLevel.DEBUG, new PrintStream(err, true, StandardCharsets.UTF_8));
        Logger.getLogger("io.orbitkv.server.daemon.ManagerDaemon").fine("detail");
        Logger.getLogger("io.orbitkv.server.daemon.ManagerDaemon").log(Level.WARNING, "failed", new IOException("boom"));
        String out = err.toString(StandardCharsets.UTF_8);
        assertThat(out).contains("DEBUG daemon: detail").contains("WARN  daemon: failed | java.io.IOException: boom")
                .contains("\tat io.orbitkv.server.log.LoggingTest");
    }

    @Test
    void repeatedFailuresAreWrittenOncePerWindowWithTheirCount() {
        Logging.configure(LogLevel.INFO, new PrintStream(err, true, StandardCharsets.UTF_8));
        RateLimitedLog log = new RateLimitedLog(System.getLogger("io.orbitkv.server.cluster.AuthFailures"), 10_000_000_000L);
        for (int i = 0; i < 50; i++) log.log(System.Logger.Level.WARNING, "bad_token", "refused", i * 1_000_000L);
        log.log(System.Logger.Level.WARNING, "bad_token", "refused again", 11_000_000_000L);
        assertThat(lines()).hasSize(2);
        assertThat(lines().get(0)).endsWith("WARN  cluster: refused");
        assertThat(lines().get(1)).endsWith("WARN  cluster: refused again (49 more like this in the last 10 s)");
    }

    @Test
    void recentErrorsKeepTheLastWarnAndErrorEventsOnly() {
        RecentErrors recent = new RecentErrors();
        recent.publish(new LogRecord(Level.INFO, "not kept"));
        for (int i = 0; i < RecentErrors.CAPACITY + 5; i++) {
            LogRecord r = new LogRecord(i % 2 == 0 ? Level.WARNING : Level.SEVERE, "event " + i);
            r.setLoggerName("io.orbitkv.core.storage.ssd.SsdStore");
            recent.publish(r);
        }
        assertThat(recent.total()).isEqualTo(RecentErrors.CAPACITY + 5);
        assertThat(recent.snapshot()).hasSize(RecentErrors.CAPACITY);
        assertThat(recent.snapshot().getFirst().message()).isEqualTo("event 5");
        assertThat(recent.snapshot().getLast()).satisfies(e -> {
            assertThat(e.level()).isEqualTo("WARN");
            assertThat(e.component()).isEqualTo("storage.ssd");
        });
    }

    @Test
    void levelWordsAndComponents() {
        assertThat(LogLevel.parse(" Debug ")).isEqualTo(LogLevel.DEBUG);
        assertThatThrownBy(() -> LogLevel.parse("verbose")).hasMessage("log level 'verbose' is not one of error, warn, info, debug, trace");
        assertThat(OneLineFormatter.component("io.orbitkv.server.peer.bulk.BulkServer")).isEqualTo("peer.bulk");
        assertThat(OneLineFormatter.component("io.orbitkv.server.daemon.ManagerDaemon")).isEqualTo("daemon");
        assertThat(OneLineFormatter.component("io.orbitkv.core.storage.ssd.uring.UringReader")).isEqualTo("storage.ssd.uring");
        assertThat(OneLineFormatter.component("io.etcd.jetcd.Watch")).isEqualTo("io.etcd");
        assertThat(OneLineFormatter.component("")).isEqualTo("-");
    }
}
