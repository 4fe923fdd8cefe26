package io.orbitkv.engine;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import io.orbitkv.testkit.EtcdServer;
import io.orbitkv.testkit.ManagerProcess;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;

/**
 * Two hosts for the engine adapters' prefill/decode handoff tests, published to them in this
 * module's test-jar: one real etcd and two clustered Manager processes, {@code a} (the prefill
 * host) and {@code b} (the decode host), each over its own directory. {@link #start} returns once
 * both membership views are valid with both members.
 *
 * <p>Owns the etcd and both Manager processes (closed in reverse order). Thread model: confined to
 * the test thread. Waits check a condition every 20 ms against a deadline and fail naming it;
 * they watch the Managers, never the engine, which queries once per request like a real one.
 *
 * <p>Design note: the launchers are {@link ManagerLauncher} (over the testkit's
 * {@link ManagerProcess}) and the testkit's {@link EtcdServer}, which the TTFT bench's cross-host
 * arm runs too, so the tests and the bench start the same two-host cluster (2 s lease, 1 s catalog
 * lookup deadline).
 */
public final class HandoffCluster implements AutoCloseable {

    private static final ObjectMapper JSON = new ObjectMapper();
    private static final Duration CONVERGE = Duration.ofSeconds(30);

    private final EtcdServer etcd;
    private final ManagerProcess prefillHost;
    private final ManagerProcess decodeHost;

    private HandoffCluster(EtcdServer etcd, ManagerProcess prefillHost, ManagerProcess decodeHost) {
        this.etcd = etcd;
        this.prefillHost = prefillHost;
        this.decodeHost = decodeHost;
    }

    /**
     * Starts etcd and Managers {@code a} and {@code b} (DRAM slots for {@code pageBytes}) under
     * {@code dir}; skips the calling test when etcd is not installed.
     */
    public static HandoffCluster start(Path dir, long pageBytes) throws IOException, InterruptedException {
        Path token = ManagerLauncher.Cluster.writeToken(Files.createDirectories(dir).resolve("cluster.token"));
        EtcdServer etcd = EtcdServer.start(dir.resolve("etcd"));
        ManagerProcess a = null;
        try {
            a = ManagerLauncher.start(dir.resolve("a"), pageBytes, new ManagerLauncher.Cluster(etcd.endpoint(), "a", token));
            ManagerProcess b = ManagerLauncher.start(dir.resolve("b"), pageBytes,
                    new ManagerLauncher.Cluster(etcd.endpoint(), "b", token));
            HandoffCluster cluster = new HandoffCluster(etcd, a, b);
            for (ManagerProcess m : new ManagerProcess[] {a, b}) {
                if (!m.awaitView(2, CONVERGE)) {
                    cluster.close();
                    throw new AssertionError("membership did not converge on 2 members within " + CONVERGE + ": " + m.stderr());
                }
            }
            return cluster;
        } catch (IOException | RuntimeException e) {
            if (a != null) a.close();
            etcd.close();
            throw e;
        }
    }

    /** Host A's Manager: the prefill engine publishes here. */
    public ManagerProcess prefillHost() {
        return prefillHost;
    }

    /** Host B's Manager: the decode engine's first QUERY lands here. */
    public ManagerProcess decodeHost() {
        return decodeHost;
    }

    /** {@code m}'s {@code /status} document. */
    public static JsonNode status(ManagerProcess m) {
        try {
            return JSON.readTree(m.status());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * Waits until host A's catalog streams have had at least {@code deltas} residency deltas
     * acknowledged by the shard owners and none is left unacknowledged: every page A published
     * is then listed by its owner, so B's first lookup can find it.
     */
    public void awaitCatalogAcknowledged(long deltas) throws InterruptedException {
        await("host A's catalog deltas acknowledged (>= " + deltas + ")", () ->
                prefillHost.metric("orbitkv_catalog_deltas_sent_total") >= deltas
                        && prefillHost.metric("orbitkv_catalog_journal_deltas") == 0);
    }

    /**
     * Throws unless {@code m} holds nothing and has answered no QUERY: no resident DRAM image, no
     * SSD bytes, no page fetched from a peer.
     */
    public static void assertUntouched(ManagerProcess m) {
        JsonNode s = status(m);
        long resident = s.at("/dram/residentImages").asLong(-1);
        long ssd = s.at("/ssdUsedBytes").asLong(-1);
        long queries = s.at("/queries/hits").asLong(-1) + s.at("/queries/misses").asLong(-1) + s.at("/queries/pending").asLong(-1);
        long fetched = s.at("/peer/fetchesStaged").asLong(-1);
        if (resident != 0 || ssd != 0 || queries != 0 || fetched != 0) {
            throw new AssertionError("the Manager was not untouched: resident images " + resident + ", SSD bytes " + ssd
                    + ", queries " + queries + ", peer fetches staged " + fetched);
        }
    }

    /**
     * Runs host B's engine: a separate JVM started with {@code command}, which serves one request
     * through the decode host and writes its {@link RequestReport} to {@code report}; returns that
     * report. Throws, with the child's output, unless it exits 0 within 120 s.
     */
    public static RequestReport decodeInAnotherJvm(List<String> command, Path report) throws IOException, InterruptedException {
        Process child = new ProcessBuilder(command).redirectErrorStream(true).start();
        String out = new String(child.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (!child.waitFor(120, TimeUnit.SECONDS)) {
            child.destroyForcibly();
            throw new AssertionError("host B's engine did not finish in 120 s: " + out);
        }
        if (child.exitValue() != 0) throw new AssertionError("host B's engine exited " + child.exitValue() + ": " + out);
        return ParityGateSupport.readReport(report);
    }

    /**
     * Throws unless {@code decoded} restored the whole {@code pages}-page prefix of
     * {@code pageTokens} tokens from host A on its first QUERY: every prefix token restored, the
     * first answer PENDING (it waited for the peer), and Manager B fetched exactly those pages.
     */
    public void assertRestoredFromPrefillHost(RequestReport decoded, int pages, int pageTokens, long pageBytes) {
        if (decoded.restoredTokens() != (long) pages * pageTokens || decoded.restoredBytes() != pages * pageBytes
                || decoded.source() != HitSource.STAGED) {
            throw new AssertionError("host B did not restore the whole " + pages + "-page prefix on its first QUERY: "
                    + decoded.restoredTokens() + " tokens, " + decoded.restoredBytes() + " bytes, first answer " + decoded.source());
        }
        long fetched = status(decodeHost).at("/peer/fetchesStaged").asLong(-1);
        if (fetched != pages) throw new AssertionError("Manager B fetched " + fetched + " pages from A, not " + pages);
    }

    /**
     * Waits until neither Manager holds anything for a request: leases, reservations, staging
     * bytes, live operations, peer tickets, active transfers and fetches in flight all 0.
     */
    public void awaitDrained() throws InterruptedException {
        for (ManagerProcess m : new ManagerProcess[] {prefillHost, decodeHost}) {
            await("nothing held on " + m.socket().getParent().getFileName(), () -> {
                JsonNode s = status(m);
                return s.get("leases").asLong() == 0 && s.get("reservations").asLong() == 0
                        && s.get("stagingBytes").asLong() == 0 && s.get("operations").asLong() == 0
                        && s.at("/peer/tickets").asInt() == 0 && s.at("/peer/activeTransfers").asInt() == 0
                        && s.at("/peer/fetchesInFlight").asInt() == 0;
            });
        }
    }

    private static void await(String what, Callable<Boolean> condition) throws InterruptedException {
        long deadline = System.nanoTime() + CONVERGE.toNanos();
        while (true) {
            try {
                if (condition.call()) return;
            } catch (InterruptedException e) {
                throw e;
            } catch (Exception e) {
                if (System.nanoTime() > deadline) throw new AssertionError(what + ": " + e, e);
            }
            if (System.nanoTime() > deadline) throw new AssertionError("not within " + CONVERGE + ": " + what);
            Thread.sleep(20);
        }
    }

    /** Stops both Managers (SIGTERM) and etcd; throws if a Manager exited with a non-zero status. */
    @Override
    public void close() {
        int b = decodeHost.terminate();
        int a = prefillHost.terminate();
        etcd.close();
        if (a != 0 || b != 0) throw new AssertionError("Manager exit status: a " + a + ", b " + b);
    }
}
