package io.orbitkv.server.daemon;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.PageToPublish;
import io.orbitkv.client.PublishOutcome;
import io.orbitkv.server.config.ManagerConfig;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.TokenChain;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.foreign.MemorySegment;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The publish counters as the dashboard reads them ({@code /metrics} of a Manager started in this
 * JVM), after a Java client published pages through the engine channel's zero-copy path
 * (PUBLISH_RESERVE, write into the granted slot, PUBLISH_COMMIT): every sealed page counts in
 * {@code orbitkv_publish_bytes_total{tier="dram"}} and {@code orbitkv_publish_seal_sealed_total{result="inserted"}},
 * as pages published through the copy path do, and a second publish of the same pages adds nothing.
 */
class PublishMetricsTest {

    private static final int PAGE_TOKENS = 16;
    private static final int PAGE_BYTES = 16 * 1024;
    private static final int PAGES = 5;

    @TempDir
    Path dir;
    private ManagerDaemon daemon;

    @BeforeEach
    void start() throws Exception {
        ManagerConfig config = ManagerConfig.defaults().withOverrides(Map.ofEntries(
                Map.entry("dramDir", dir.resolve("dram").toString()), Map.entry("arenaName", "pm"),
                Map.entry("dramBytes", "8m"), Map.entry("dramSlotBytes", "64k"), Map.entry("stagingBytes", "512k"),
                Map.entry("ssdDir", dir.resolve("ssd").toString()), Map.entry("ssdBytes", "4m"),
                Map.entry("ssdFiles", "2"), Map.entry("socket", dir.resolve("m.sock").toString()),
                Map.entry("httpPort", "0"), Map.entry("readyFile", dir.resolve("ready").toString())));
        daemon = switch (ManagerDaemon.start(config)) {
            case ManagerDaemon.Startup.Started s -> s.daemon();
            case ManagerDaemon.Startup.Locked l -> throw new AssertionError("locked: " + l);
        };
        daemon.announceReady(new PrintWriter(new StringWriter()));
    }

    @AfterEach
    void stop() {
        if (daemon != null) daemon.close();
    }

    @Test
    void pagesPublishedThroughTheClientCountInDramBytesAndSealedBlocks() throws Exception {
        Namespace ns = new Namespace("publish-metrics", "r1", "sha256:w", "sha256:t", "", "bf16", "nhd", PAGE_TOKENS,
                1, 0, 1, 0, 1);
        int[] tokens = new int[PAGES * PAGE_TOKENS + 1];
        for (int i = 0; i < tokens.length; i++) tokens[i] = 7_000 + i;
        byte[][] hashes = TokenChain.pageHashes(ns.digest(), tokens, PAGE_TOKENS, new byte[0]);
        List<PageToPublish> pages = new ArrayList<>();
        for (int p = 0; p < PAGES; p++) {
            byte[] image = new byte[PAGE_BYTES];
            for (int j = 0; j < image.length; j++) image[j] = (byte) (p * 31 + j);
            pages.add(PageToPublish.ofBlockHash(0, hashes[p], MemorySegment.ofArray(image)));
        }
        try (OrbitKvClient client = OrbitKvClient.connect(dir.resolve("m.sock"), Duration.ofSeconds(20))) {
            client.register(ns.modelId(), 1, ns, new RecoveryContract(PAGE_TOKENS, List.of(new StateGroup.Full(0))));

            assertThat(client.publish(pages)).containsOnly(PublishOutcome.SEALED).hasSize(PAGES);

            String metrics = metrics();
            assertThat(sample(metrics, "orbitkv_publish_bytes_total", "tier=\"dram\""))
                    .as("DRAM bytes published").isEqualTo((double) PAGES * PAGE_BYTES);
            assertThat(sample(metrics, "orbitkv_publish_seal_sealed_total", "result=\"inserted\""))
                    .as("blocks sealed as new images").isEqualTo(PAGES);

            // The same pages again: already resident, nothing new is sealed or counted as published.
            assertThat(client.publish(pages)).doesNotContain(PublishOutcome.SEALED);
            String again = metrics();
            assertThat(sample(again, "orbitkv_publish_bytes_total", "tier=\"dram\""))
                    .isEqualTo((double) PAGES * PAGE_BYTES);
            assertThat(sample(again, "orbitkv_publish_seal_sealed_total", "result=\"inserted\"")).isEqualTo(PAGES);
        }
    }

    private String metrics() throws Exception {
        HttpResponse<String> r = HttpClient.newHttpClient().send(HttpRequest.newBuilder(
                URI.create("http://127.0.0.1:" + daemon.httpPort() + "/metrics")).timeout(Duration.ofSeconds(10)).build(),
                HttpResponse.BodyHandlers.ofString());
        assertThat(r.statusCode()).isEqualTo(200);
        return r.body();
    }

    /** The value of the one sample of {@code name} whose labels contain {@code label}. */
    private static double sample(String metrics, String name, String label) {
        Pattern line = Pattern.compile("^" + Pattern.quote(name) + "\\{([^}]*)\\} (\\S+)$", Pattern.MULTILINE);
        List<Double> values = new ArrayList<>();
        for (Matcher m = line.matcher(metrics); m.find(); ) {
            if (m.group(1).contains(label)) values.add(Double.parseDouble(m.group(2)));
        }
        assertThat(values).as("samples of %s{%s}", name, label).hasSize(1);
        return values.getFirst();
    }
}
