package io.orbitkv.server.cli;

import static org.assertj.core.api.Assertions.assertThat;

import io.etcd.jetcd.ByteSequence;
import io.etcd.jetcd.Client;
import io.etcd.jetcd.options.GetOption;
import io.orbitkv.testkit.EtcdServer;
import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SplittableRandom;
import java.util.concurrent.TimeUnit;
import java.util.regex.Pattern;
import io.orbitkv.testkit.ProcessTest;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The cluster walk-through of {@code docs/cluster.md} ("Walk-through: three Managers and etcd on
 * one machine", which the README's "Cluster" section points to) run as written: its {@code sh}
 * blocks are read from the document now ({@link ReadmeBlocks}: not copied, so they cannot drift),
 * joined in order and run by {@code bash -e} in a temporary working directory. Only the
 * variables the block reads from the environment are set: free ports, a private DRAM directory
 * prefix, and {@code ORBITKV}, {@link ReadmeBlocks#standInLauncher a launcher} that runs the same
 * CLI over this test's classpath.
 *
 * <p>Asserts: the block exits 0; the demo shows a full cross-node hit with equal bytes; locate
 * shows {@code a} holding every demo page; every Manager left the cluster and stopped cleanly; no
 * SLF4J warning; etcd stopped by its SIGTERM, and last: restarted on the block's data directory,
 * etcd holds the three incarnation records but no member key, so each Manager revoked its lease,
 * which needs a running etcd (had etcd gone first, the leases would outlive the Managers).
 */
@ProcessTest
class ClusterWalkthroughTest {

    static final Path DOC = Path.of("..", "docs", "cluster.md");
    static final String SECTION = "## Walk-through: three Managers and etcd on one machine";
    /** The whole walk-through took 15-25 s on 2 cores shared with other builds; 240 s leaves room for a slow host. */
    static final Duration BLOCK_LIMIT = Duration.ofSeconds(240);

    @TempDir
    Path dir;

    @Test
    void theWalkthroughBlocksShowACrossNodeHitAndStopEtcdLast() throws Exception {
        EtcdServer.requireInstalled();
        String script = ReadmeBlocks.shScript(Files.readString(DOC), SECTION);
        assertThat(script).as("the walk-through still runs the demo and locate").contains("cluster demo", "cluster locate");
        Files.writeString(dir.resolve("readme-cluster.sh"), script);
        Path launcher = ReadmeBlocks.standInLauncher(dir.resolve("orbitkv"));

        List<ServerSocket> held = new ArrayList<>();
        int etcdPort;
        int clusterPort;
        int httpPort;
        try {
            etcdPort = freeRun(held, 0, 2);    // etcd_port, etcd_port+1
            clusterPort = freeRun(held, 1, 3); // cluster_port+1..3
            httpPort = freeRun(held, 1, 3);    // http_port+1..3
        } finally {
            for (ServerSocket s : held) s.close();
        }
        String shm = "/dev/shm/orbitkv-readme-test-" + ProcessHandle.current().pid();
        Path log = dir.resolve("block.log");
        ProcessBuilder pb = new ProcessBuilder("bash", "-e", dir.resolve("readme-cluster.sh").toString())
                .directory(dir.toFile()).redirectErrorStream(true).redirectOutput(log.toFile());
        Map<String, String> env = pb.environment();
        env.put("ORBITKV", launcher.toString());
        env.put("ETCD_PORT", Integer.toString(etcdPort));
        env.put("CLUSTER_PORT", Integer.toString(clusterPort));
        env.put("HTTP_PORT", Integer.toString(httpPort));
        env.put("ORBITKV_SHM", shm);
        env.put("PATH", EtcdServer.BINARY.getParent() + ":" + env.getOrDefault("PATH", "/usr/bin:/bin"));

        Process bash = pb.start();
        Set<ProcessHandle> started = new LinkedHashSet<>();
        int exit;
        try {
            exit = awaitExit(bash, started);
        } finally {
            // whatever the block left running (it failed early, or ran past its limit) is stopped here
            for (ProcessHandle p : started) p.destroyForcibly();
            bash.destroyForcibly();
        }
        String output = Files.readString(log);
        System.out.print(output); // the walk-through as a user sees it, in the test report
        assertThat(exit).as("exit status of the walk-through blocks; their output:%n%s", output).isZero();

        assertThat(output).as("the demo's cross-node hit").containsPattern("cross-node hit: 4 pages .* boundary 64 tokens, bytes equal");
        List<String> keys = Files.readAllLines(dir.resolve("var/demo-keys"));
        assertThat(keys).hasSize(4);
        for (String key : keys) {
            assertThat(output).as("locate shows a holding %s", key)
                    .containsPattern(Pattern.compile("(?m)^" + key + " present (\\S+ )*a@1:(DRAM|SSD)"));
        }
        assertThat(count(output, "daemon: left the cluster")).as("Managers that left the cluster").isEqualTo(3);
        assertThat(count(output, "daemon: stopped in ")).as("Managers that stopped").isEqualTo(3);
        assertThat(output).doesNotContain("shutdown step failed", "SLF4J");
        assertThat(Files.readString(dir.resolve("var/etcd.log"))).as("etcd stopped by its SIGTERM")
                .contains("received terminated signal");
        assertThat(accepts(etcdPort)).as("etcd is stopped").isFalse();
        for (String n : List.of("a", "b", "c")) {
            assertThat(Path.of(shm + "-" + n)).as("the DRAM directory of %s is removed at stop", n).doesNotExist();
        }

        assertLeasesRevoked(dir.resolve("var/etcd"));
    }

    /**
     * Waits for the block to exit, at most {@link #BLOCK_LIMIT}, recording every process it
     * started meanwhile (so that none outlives the test). The exit status, or -1 past the limit.
     */
    static int awaitExit(Process bash, Set<ProcessHandle> started) throws InterruptedException {
        long deadline = System.nanoTime() + BLOCK_LIMIT.toNanos();
        while (!bash.waitFor(200, TimeUnit.MILLISECONDS)) {
            bash.descendants().forEach(started::add);
            if (System.nanoTime() - deadline >= 0) return -1;
        }
        return bash.exitValue();
    }

    /**
     * A base port such that {@code base+from .. base+from+count-1} are all free on loopback,
     * below the kernel's ephemeral range (32768+) so outgoing connections cannot take them
     * meanwhile; the sockets stay bound in {@code held} until the caller has chosen every run.
     */
    static int freeRun(List<ServerSocket> held, int from, int count) throws IOException {
        SplittableRandom random = new SplittableRandom();
        for (int attempt = 0; attempt < 200; attempt++) {
            int base = 20_000 + random.nextInt(12_000);
            List<ServerSocket> bound = new ArrayList<>();
            try {
                for (int i = 0; i < count; i++) bound.add(new ServerSocket(base + from + i, 1, InetAddress.getLoopbackAddress()));
                held.addAll(bound);
                return base;
            } catch (IOException taken) {
                for (ServerSocket s : bound) s.close();
            }
        }
        throw new IOException("no run of " + count + " free loopback ports found in 200 attempts");
    }

    static boolean accepts(int port) {
        try (Socket s = new Socket()) {
            s.connect(new InetSocketAddress("127.0.0.1", port), 200);
            return true;
        } catch (IOException e) {
            return false;
        }
    }

    private static int count(String text, String needle) {
        int n = 0;
        for (int i = text.indexOf(needle); i >= 0; i = text.indexOf(needle, i + 1)) n++;
        return n;
    }

    /**
     * Restarts etcd on the block's data directory and checks that no member key survived: a
     * Manager's key lives under its lease, and a lease outlives a stop of etcd (it is restored,
     * with a fresh TTL, at restart), so an empty members prefix means each Manager revoked its
     * lease while etcd still ran.
     */
    static void assertLeasesRevoked(Path dataDir) throws Exception {
        int client;
        int peer;
        List<ServerSocket> held = new ArrayList<>();
        try {
            client = freeRun(held, 0, 1);
            peer = freeRun(held, 0, 1);
        } finally {
            for (ServerSocket s : held) s.close();
        }
        Process etcd = new ProcessBuilder(EtcdServer.BINARY.toString(), "--data-dir", dataDir.toString(),
                "--listen-client-urls", "http://127.0.0.1:" + client, "--advertise-client-urls", "http://127.0.0.1:" + client,
                "--listen-peer-urls", "http://127.0.0.1:" + peer, "--log-level", "warn")
                .redirectErrorStream(true).redirectOutput(dataDir.resolveSibling("etcd-restart.log").toFile()).start();
        try (Client c = Client.builder().endpoints("http://127.0.0.1:" + client).build()) {
            Awaitility.await("the restarted etcd accepts").atMost(Duration.ofSeconds(20)).pollInterval(Duration.ofMillis(50))
                    .until(() -> {
                        if (!etcd.isAlive()) throw new AssertionError("etcd exited at restart: see etcd-restart.log");
                        return accepts(client);
                    });
            GetOption prefix = GetOption.builder().isPrefix(true).build();
            long incarnations = c.getKVClient().get(bytes("/orbitkv/orbitkv/incarnations/"), prefix)
                    .get(20, TimeUnit.SECONDS).getCount();
            long members = c.getKVClient().get(bytes("/orbitkv/orbitkv/members/"), prefix)
                    .get(20, TimeUnit.SECONDS).getCount();
            assertThat(incarnations).as("incarnation records of a, b, c (the block's etcd data)").isEqualTo(3);
            assertThat(members).as("member keys left under unrevoked leases").isZero();
        } finally {
            etcd.destroyForcibly();
            etcd.waitFor(20, TimeUnit.SECONDS);
        }
    }

    private static ByteSequence bytes(String s) {
        return ByteSequence.from(s, StandardCharsets.UTF_8);
    }
}
