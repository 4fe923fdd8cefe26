package io.orbitkv.server.daemon;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.orbitkv.server.channel.RawClient;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.FrameEncoder;
import io.orbitkv.state.protocol.QueryStatus;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import io.orbitkv.state.protocol.SettleOutcome;
import io.orbitkv.testkit.ManagerProcess;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermissions;
import java.time.Duration;
import java.util.Arrays;
import java.util.concurrent.TimeUnit;
import io.orbitkv.testkit.ProcessTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The real Manager as a separate process ({@code orbitkv manager}), spoken to with raw frames over
 * its socket: a hit with bytes read from the mapped arena, {@code /metrics} and {@code /status};
 * bad input from one client while another keeps working, with nothing leaked; the store lock;
 * SIGTERM; and both restart behaviours (engine reconnect, Manager restart from SSD).
 */
@ProcessTest
class ManagerProcessTest {

    @TempDir
    Path tmp;

    private static final ObjectMapper JSON = new ObjectMapper();

    private static JsonNode status(ManagerProcess m) throws IOException {
        return JSON.readTree(m.get("/status"));
    }

    private static void assertError(RawClient.Received r, long requestId, ErrorCode code) {
        assertThat(r).isInstanceOf(RawClient.Frame.class);
        RawClient.Frame f = (RawClient.Frame) r;
        assertThat(f.requestId()).isEqualTo(requestId);
        assertThat(f.reply()).isInstanceOfSatisfying(Reply.Error.class, e -> assertThat(e.code()).isEqualTo(code));
    }

    @Test
    void hitWithArenaBytesShowsInMetricsAndStatusOneManagerPerStoreAndSigtermExitsZero() throws Exception {
        Path dir = tmp.resolve("a");
        try (ManagerProcess m = Managers.start(dir)) {
            Path socket = ManagerProcess.socket(dir);
            assertThat(PosixFilePermissions.toString(Files.getPosixFilePermissions(socket))).isEqualTo("rw-------");
            try (Engine e = new Engine(socket)) {
                Reply.Registered registered = e.register("engine-1", 1);
                // memfds of the engine's namespace, passed as descriptors (SCM_RIGHTS): no path, no file in dramDir
                assertThat(registered.descriptorSocket()).isEqualTo(socket.toAbsolutePath() + ".fd");
                assertThat(e.arenaFds).hasSize(registered.arenas().size());
                for (int fd : e.arenaFds) {
                    assertThat(Files.readSymbolicLink(Path.of("/proc/self/fd/" + fd)).toString()).startsWith("/memfd:");
                }
                try (var files = Files.list(ManagerProcess.dramDir(dir))) {
                    assertThat(files.map(f -> f.getFileName().toString()).toList()).containsExactly("manager.lock");
                }
                assertThat(e.publish(7, 4)).containsOnly(SettleOutcome.SEALED);
                Reply.QueryResult r = e.query(1, 7, 4);
                assertThat(r.status()).isEqualTo(QueryStatus.FINAL);
                e.assertHitWithBytes(r, 7, 4);
                assertThat(e.raw.call(new Request.Release(1))).isInstanceOf(Reply.Released.class);
            }
            assertThat(m.metric("orbitkv_manager_queries_total{outcome=\"hit\"")).isGreaterThanOrEqualTo(1);
            assertThat(m.metric("orbitkv_channel_frames_in_total")).isGreaterThanOrEqualTo(5);
            assertThat(m.get("/metrics")).contains("jvm_memory_used_bytes");
            JsonNode status = status(m);
            assertThat(status.get("instances").findValuesAsText("instanceId")).containsExactly("engine-1");
            assertThat(status.get("queries").get("hits").asLong()).isEqualTo(1);
            assertThat(status.get("cost").get("enabled").asBoolean())
                    .isEqualTo("1".equals(System.getenv("ORBITKV_COST_OBSERVATIONS")));
            assertThat(m.get("/healthz")).isEqualTo("ok\n");

            Process second = new ProcessBuilder(Managers.command(dir)).redirectErrorStream(true).start();
            assertThat(second.waitFor(60, TimeUnit.SECONDS)).isTrue();
            String out = new String(second.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            assertThat(second.exitValue()).as(out).isEqualTo(2);
            assertThat(out).contains("orbitkv: error: another Manager holds").contains("(pid " + m.process().pid() + ")");
            Path other = tmp.resolve("other");
            String sharedDram = exitsTwo(with(Managers.command(other), "--dram-dir", ManagerProcess.dramDir(dir)));
            assertThat(sharedDram).contains("another Manager holds " + ManagerProcess.dramDir(dir).resolve("manager.lock"));
            String sharedSocket = exitsTwo(with(Managers.command(other), "--socket", socket));
            assertThat(sharedSocket).contains("a Manager is already listening on " + socket);
            assertThat(m.process().isAlive()).isTrue();
            e2eStillServes(socket);

            assertThat(m.terminate()).as(m.stderr()).isZero();
            assertThat(socket).doesNotExist();
            assertThat(ManagerProcess.ssdDir(dir).resolve("manager.lock")).doesNotExist();
            assertThat(dir.resolve("ready")).doesNotExist();
            assertThat(ManagerProcess.dramDir(dir)).doesNotExist();
            assertThat(m.stderr()).contains("SIGTERM received").contains("released");
        }
    }

    /** {@code command} with the value of {@code option} replaced by {@code value}. */
    private static java.util.List<String> with(java.util.List<String> command, String option, Path value) {
        java.util.List<String> out = new java.util.ArrayList<>(command);
        out.set(out.indexOf(option) + 1, value.toString());
        return out;
    }

    /** Runs {@code command} to its end; asserts status 2 and returns its output. */
    private static String exitsTwo(java.util.List<String> command) throws Exception {
        Process p = new ProcessBuilder(command).redirectErrorStream(true).start();
        assertThat(p.waitFor(60, TimeUnit.SECONDS)).isTrue();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        assertThat(p.exitValue()).as(out).isEqualTo(2);
        return out;
    }

    /** A new engine still gets the hit published in the first test: the refused Managers touched nothing. */
    private static void e2eStillServes(Path socket) throws IOException {
        try (Engine e = new Engine(socket)) {
            e.register("engine-1", 2);
            e.assertHitWithBytes(e.query(1, 7, 4), 7, 4);
        }
    }

    @Test
    void badFramesGetTheirErrorsTheOtherClientKeepsWorkingAndNothingLeaks() throws Exception {
        Path dir = tmp.resolve("b");
        try (ManagerProcess m = Managers.start(dir)) {
            Path socket = ManagerProcess.socket(dir);
            try (Engine good = new Engine(socket); Engine bad = new Engine(socket)) {
                good.register("good", 1);
                assertThat(good.publish(7, 2)).containsOnly(SettleOutcome.SEALED);

                long id = bad.raw.send(Engine.query(1, 1, 7, 2));                      // QUERY before REGISTER
                assertError(bad.raw.next(), id, ErrorCode.OUT_OF_ORDER);
                byte[] unknown = FrameEncoder.toBytes(50, new Request.Stats());
                ByteBuffer.wrap(unknown).order(ByteOrder.LITTLE_ENDIAN).putShort(6, (short) 0x0042);
                bad.raw.send(unknown);                                                  // unknown type
                assertError(bad.raw.next(), 50, ErrorCode.UNKNOWN_OPERATION);
                byte[] poll = FrameEncoder.toBytes(51, new Request.QueryPoll(1, 1));
                byte[] trailing = Arrays.copyOf(poll, poll.length + 3);
                ByteBuffer.wrap(trailing).order(ByteOrder.LITTLE_ENDIAN).putInt(0, trailing.length);
                bad.raw.send(trailing);                                                 // malformed body
                assertError(bad.raw.next(), 51, ErrorCode.MALFORMED);

                bad.register("bad", 1);                                                 // still served after refusals
                assertThat(bad.reserve(9, 3).outcomes()).allMatch(o -> o instanceof Reply.Granted);
                bad.assertHitWithBytes(bad.query(2, 7, 2), 7, 2);                       // holds 2 leases
                JsonNode held = status(m);
                assertThat(held.get("reservations").asLong()).isEqualTo(3);
                assertThat(held.get("leases").asLong()).isEqualTo(2);

                Reply.QueryResult hit = good.query(1, 7, 2);                            // the other client is served
                good.assertHitWithBytes(hit, 7, 2);
                good.raw.call(new Request.Release(1));

                bad.raw.send(new byte[] {(byte) 0xff, (byte) 0xff, (byte) 0xff, 0x7f}); // oversized: refused, closed
                assertError(bad.raw.next(), 0, ErrorCode.TOO_LARGE);
                assertThat(bad.raw.next()).isInstanceOf(RawClient.Closed.class);

                assertThat(good.raw.call(new Request.Stats())).isInstanceOf(Reply.StatsReply.class);
            }
            try (Engine truncated = new Engine(socket)) {
                truncated.register("truncated", 1);
                assertThat(truncated.reserve(11, 2).outcomes()).allMatch(o -> o instanceof Reply.Granted);
                byte[] frame = FrameEncoder.toBytes(9, new Request.Stats());
                truncated.raw.send(Arrays.copyOf(frame, 9));                            // then disconnect mid-frame
            }
            await().atMost(Duration.ofSeconds(20)).untilAsserted(() -> {
                JsonNode s = status(m);
                assertThat(s.get("leases").asLong()).isZero();
                assertThat(s.get("reservations").asLong()).isZero();
                assertThat(s.get("operations").asLong()).isZero();
                assertThat(s.get("sessions").asLong()).isZero();
                assertThat(s.get("dram").get("reservedBytes").asLong()).isZero();
            });
            assertThat(m.metric("orbitkv_channel_refused_frames_total{code=\"TOO_LARGE\"")).isEqualTo(1);
            assertThat(m.metric("orbitkv_channel_truncated_frames_total")).isEqualTo(1);
            try (Engine again = new Engine(socket)) {
                again.register("good", 2);
                again.assertHitWithBytes(again.query(1, 7, 2), 7, 2);
            }
            assertThat(m.terminate()).isZero();
        }
    }

    @Test
    void anEngineThatReconnectsAndAManagerThatRestartsBothServeHits() throws Exception {
        Path dir = tmp.resolve("c");
        Path socket = ManagerProcess.socket(dir);
        try (ManagerProcess m = Managers.start(dir, "--ssd-policy", "write-through")) {
            try (Engine first = new Engine(socket)) {
                first.register("engine-r", 1);
                assertThat(first.publish(11, 4)).containsOnly(SettleOutcome.SEALED);
            }
            try (Engine restarted = new Engine(socket)) {
                restarted.register("engine-r", 2);
                Reply.QueryResult r = restarted.query(1, 11, 4);
                assertThat(r.status()).isEqualTo(QueryStatus.FINAL);
                restarted.assertHitWithBytes(r, 11, 4);
            }
            await().atMost(Duration.ofSeconds(20)).until(() -> m.metric("orbitkv_ssd_writes_total") >= 4);
            assertThat(m.terminate()).isZero();
        }
        try (ManagerProcess m = Managers.start(dir)) {
            assertThat(m.stderr()).contains("extentsKept=4");
            try (Engine after = new Engine(socket)) {
                after.register("engine-r", 3);
                Reply.QueryResult r = after.query(1, 11, 4);
                long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
                while (r.status() == QueryStatus.PENDING) {                              // staged from SSD
                    assertThat(System.nanoTime()).as("settles within 20 s").isLessThan(deadline);
                    Reply polled = after.raw.call(new Request.QueryPoll(1, 1));
                    assertThat(polled).isInstanceOf(Reply.QueryResult.class);
                    r = (Reply.QueryResult) polled;
                }
                after.assertHitWithBytes(r, 11, 4);
            }
            assertThat(m.terminate()).isZero();
        }
    }
}
