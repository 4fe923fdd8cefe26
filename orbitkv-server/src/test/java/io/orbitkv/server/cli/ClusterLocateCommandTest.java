package io.orbitkv.server.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.core.catalog.Holder;
import io.orbitkv.core.catalog.KeyLocation;
import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.server.cluster.ClusterInfoService;
import io.orbitkv.server.cluster.ClusterRpcServer;
import io.orbitkv.server.cluster.ClusterSecurity;
import io.orbitkv.state.StateKey;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * {@code orbitkv cluster locate} against a real loopback cluster endpoint (cluster token
 * authentication, {@code ClusterInfo.Locate}) whose catalog is scripted: the line per key, the
 * re-ask while Unknown, a wrong token, and bad input, all through {@link OrbitKvCli#run}.
 */
class ClusterLocateCommandTest {

    static final String TOKEN = "locate-test-token-0123456789";
    static final StateKey HELD = key(1);
    static final StateKey NOWHERE = key(2);
    static final StateKey LATE = key(3);

    @TempDir
    Path dir;

    ClusterRpcServer server;
    String endpoint;
    Path tokenFile;
    /** Asks served so far; LATE is Unknown for the first {@link #unknownAsks} of them. */
    final AtomicInteger asks = new AtomicInteger();
    volatile int unknownAsks;

    static StateKey key(int b) {
        byte[] bytes = new byte[StateKey.BYTES];
        bytes[0] = (byte) b;
        return StateKey.ofBytes(bytes);
    }

    @BeforeEach
    void start() throws Exception {
        ClusterSecurity security = new ClusterSecurity("orbitkv", TOKEN.getBytes(StandardCharsets.UTF_8), Optional.empty());
        server = ClusterRpcServer.start(new InetSocketAddress("127.0.0.1", 0), security,
                List.of(new ClusterInfoService("c", 1, keys -> {
                    int ask = asks.incrementAndGet();
                    Map<StateKey, KeyLocation> found = new HashMap<>();
                    found.put(HELD, new KeyLocation.Present(List.of(new Holder("a", 1, ResidencyEvent.Medium.DRAM, 5),
                            new Holder("b", 2, ResidencyEvent.Medium.SSD, 9))));
                    found.put(NOWHERE, new KeyLocation.Absent());
                    found.put(LATE, ask <= unknownAsks ? new KeyLocation.Unknown(KeyLocation.UnknownReason.NOT_CAUGHT_UP)
                            : new KeyLocation.Present(List.of(new Holder("a", 1, ResidencyEvent.Medium.SSD, 7))));
                    return CompletableFuture.completedFuture(found);
                })));
        endpoint = "127.0.0.1:" + server.address().getPort();
        tokenFile = ownerOnly(Files.writeString(dir.resolve("token"), TOKEN + "\n"));
    }

    @AfterEach
    void stop() {
        server.close();
    }

    OrbitKvCliTest.Result locate(String... extra) {
        List<String> args = new java.util.ArrayList<>(List.of("cluster", "locate", "--endpoint", endpoint,
                "--token-file", tokenFile.toString()));
        args.addAll(List.of(extra));
        return OrbitKvCliTest.run(args.toArray(String[]::new));
    }

    @Test
    void printsOneLinePerKeyInTheOrderGiven() {
        OrbitKvCliTest.Result r = locate(NOWHERE.toHex(), HELD.toHex(), LATE.toHex());
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out().lines().toList()).containsExactly(
                NOWHERE.toHex() + " absent",
                HELD.toHex() + " present a@1:DRAM b@2:SSD",
                LATE.toHex() + " present a@1:SSD");
        assertThat(asks.get()).as("nothing Unknown: one ask").isEqualTo(1);
    }

    @Test
    void unknownIsReAskedUntilItSettles() {
        unknownAsks = 3;
        OrbitKvCliTest.Result r = locate(LATE.toHex());
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out().strip()).isEqualTo(LATE.toHex() + " present a@1:SSD");
        assertThat(asks.get()).isEqualTo(4);
    }

    @Test
    void settleZeroAsksOnceAndPrintsTheUnknownReason() {
        unknownAsks = Integer.MAX_VALUE;
        OrbitKvCliTest.Result r = locate("--settle-millis", "0", LATE.toHex(), HELD.toHex());
        assertThat(r.code()).as(r.err()).isZero();
        assertThat(r.out().lines().toList()).containsExactly(LATE.toHex() + " unknown NOT_CAUGHT_UP",
                HELD.toHex() + " present a@1:DRAM b@2:SSD");
        assertThat(asks.get()).isEqualTo(1);
    }

    @Test
    void aWrongTokenOrClusterIsRefusedWithOneLine() throws Exception {
        tokenFile = ownerOnly(Files.writeString(dir.resolve("wrong"), "another-token-0123456789\n"));
        OrbitKvCliTest.Result wrongToken = locate(HELD.toHex());
        assertThat(wrongToken.code()).isEqualTo(OrbitKvCli.EXIT_BAD_INPUT);
        assertThat(wrongToken.err().strip()).isEqualTo("orbitkv: error: --endpoint " + endpoint + ": UNAUTHENTICATED: bad cluster token");

        tokenFile = dir.resolve("token");
        OrbitKvCliTest.Result wrongCluster = locate("--cluster-id", "other", HELD.toHex());
        assertThat(wrongCluster.code()).isEqualTo(OrbitKvCli.EXIT_BAD_INPUT);
        assertThat(wrongCluster.err()).contains("UNAUTHENTICATED: wrong cluster");
        assertThat(asks.get()).as("no refused call reached the service").isZero();
    }

    @Test
    void badInputIsOneLineAndExitTwo() throws Exception {
        OrbitKvCliTest.Result badKey = locate("abc");
        assertThat(badKey.code()).isEqualTo(OrbitKvCli.EXIT_BAD_INPUT);
        assertThat(badKey.err().strip()).isEqualTo("orbitkv: error: KEY \"abc\": a StateKey is 64 hex digits, got 3");

        tokenFile = ownerOnly(Files.writeString(dir.resolve("short"), "short\n"));
        OrbitKvCliTest.Result shortToken = locate(HELD.toHex());
        assertThat(shortToken.code()).isEqualTo(OrbitKvCli.EXIT_BAD_INPUT);
        assertThat(shortToken.err()).contains("at least 16 bytes");

        tokenFile = dir.resolve("token");
        OrbitKvCliTest.Result halfTls = locate("--tls-cert", dir.resolve("cert.pem").toString(), HELD.toHex());
        assertThat(halfTls.code()).isEqualTo(OrbitKvCli.EXIT_BAD_INPUT);
        assertThat(halfTls.err()).contains("--tls-cert, --tls-key and --tls-ca go together");
        assertThat(asks.get()).isZero();
    }

    @Test
    void anEndpointThatDoesNotAnswerFailsAtItsDeadline() {
        server.close();
        OrbitKvCliTest.Result r = locate("--deadline-millis", "300", HELD.toHex());
        assertThat(r.code()).isEqualTo(OrbitKvCli.EXIT_BAD_INPUT);
        assertThat(r.err()).startsWith("orbitkv: error: --endpoint " + endpoint + ": DEADLINE_EXCEEDED");
    }

    /** Token files must be readable by their owner only (the CLI refuses others, as members do). */
    static Path ownerOnly(Path file) throws java.io.IOException {
        return Files.setPosixFilePermissions(file, java.nio.file.attribute.PosixFilePermissions.fromString("rw-------"));
    }
}
