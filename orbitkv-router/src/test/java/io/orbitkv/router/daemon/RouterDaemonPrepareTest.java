package io.orbitkv.router.daemon;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.orbitkv.router.MeasuredCosts;
import io.orbitkv.router.Policy;
import io.orbitkv.router.RouterSettings;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import org.junit.jupiter.api.Test;

/**
 * What the router sends the chosen worker's Manager after a route, through a transport that
 * records each call and answers only when the test says so: the pages as the engine names them,
 * the namespace by precedence, the queue wait as first use; the route never waits for the call;
 * the outstanding calls are bounded and every outcome is counted.
 */
class RouterDaemonPrepareTest {

    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String NS = "11".repeat(32);

    /** A call the transport received, and the future it answered with. */
    record Call(String endpoint, PrepareTransport.Demand demand, CompletableFuture<String> answer) {
    }

    static final class Recording implements PrepareTransport {
        final List<Call> calls = new CopyOnWriteArrayList<>();

        @Override
        public CompletableFuture<String> prepare(String endpoint, Demand demand) {
            CompletableFuture<String> f = new CompletableFuture<>();
            calls.add(new Call(endpoint, demand, f));
            return f;
        }

        @Override
        public void close() {
        }
    }

    private static RouterDaemon start(Recording transport, String workerSpec) throws Exception {
        return RouterDaemon.start(new RouterDaemon.Options("127.0.0.1", 0, List.of(WorkerEndpoint.parse(workerSpec)),
                Policy.named("load"), RouterSettings.defaults(MeasuredCosts.forBlocks(16)), null, transport));
    }

    private static JsonNode post(HttpClient http, RouterDaemon d, String body) throws Exception {
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + d.port() + "/route"))
                .POST(HttpRequest.BodyPublishers.ofString(body)).build(), HttpResponse.BodyHandlers.ofString());
        assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
        return JSON.readTree(r.body());
    }

    private static double count(HttpClient http, RouterDaemon d, String outcome) throws Exception {
        String metrics = http.send(HttpRequest.newBuilder(URI.create("http://127.0.0.1:" + d.port() + "/metrics")).build(),
                HttpResponse.BodyHandlers.ofString()).body();
        return metrics.lines().filter(l -> l.startsWith("orbitkv_router_prepares_total{outcome=\"" + outcome + "\""))
                .mapToDouble(l -> Double.parseDouble(l.substring(l.lastIndexOf(' ') + 1))).findFirst().orElse(-1);
    }

    @Test
    void theChosenWorkersManagerGetsThePagesAsTheEngineNamesThemWithoutDelayingTheRoute() throws Exception {
        Recording transport = new Recording();
        HttpClient http = HttpClient.newHttpClient();
        try (RouterDaemon d = start(transport, "name=w,topic=t,events=tcp://127.0.0.1:9,manager=10.0.0.7:7400,namespace=" + NS)) {
            // the transport never answers: the route is answered all the same
            JsonNode r = post(http, d, "{\"prompt_tokens\": 40, \"block_hashes\": [\"a1b2\", 258], \"priority\": 7}");
            assertThat(r.get("worker").asText()).isEqualTo("w");
            assertThat(transport.calls).hasSize(1);
            Call c = transport.calls.getFirst();
            assertThat(c.endpoint()).isEqualTo("10.0.0.7:7400");
            assertThat(HexFormat.of().formatHex(c.demand().namespaceDigest())).isEqualTo(NS);
            assertThat(c.demand().stateKeys()).isFalse();
            assertThat(c.demand().pages()).satisfiesExactly(
                    p -> assertThat(p).containsExactly(0xa1, 0xb2),
                    p -> assertThat(p).as("an integer hash: 8 bytes little-endian").containsExactly(2, 1, 0, 0, 0, 0, 0, 0));
            assertThat(c.demand().promptTokens()).isEqualTo(40);
            assertThat(c.demand().priority()).isEqualTo(7);
            assertThat(c.demand().firstUseMillis()).as("the idle worker's queue wait")
                    .isEqualTo((int) Math.round(r.get("queue_s").asDouble() * 1e3));

            // the second request queues behind the first: its first use is that wait
            JsonNode second = post(http, d, "{\"prompt_tokens\": 4000, \"block_hashes\": [\"c3\"], \"namespace\": \"" + "22".repeat(32) + "\"}");
            Call c2 = transport.calls.get(1);
            assertThat(second.get("queue_s").asDouble()).isPositive();
            assertThat(c2.demand().firstUseMillis()).isEqualTo((int) Math.round(second.get("queue_s").asDouble() * 1e3)).isPositive();
            assertThat(HexFormat.of().formatHex(c2.demand().namespaceDigest())).as("the request's namespace first")
                    .isEqualTo("22".repeat(32));

            c.answer().complete("accepted");
            c2.answer().completeExceptionally(new IllegalStateException("unreachable"));
            assertThat(count(http, d, "accepted")).isEqualTo(1);
            assertThat(count(http, d, "failed")).isEqualTo(1);
        }
    }

    @Test
    void outstandingCallsAreBoundedAndARequestWithoutANamespaceSendsNothing() throws Exception {
        Recording transport = new Recording();
        HttpClient http = HttpClient.newHttpClient();
        try (RouterDaemon d = start(transport, "name=w,topic=t,events=tcp://127.0.0.1:9,manager=10.0.0.7:7400")) {
            post(http, d, "{\"prompt_tokens\": 40, \"block_hashes\": [\"a1\"]}");
            assertThat(transport.calls).isEmpty();
            assertThat(count(http, d, "no_namespace")).isEqualTo(1);
            String body = "{\"prompt_tokens\": 40, \"block_hashes\": [\"a1\"], \"namespace\": \"" + NS + "\"}";
            for (int i = 0; i < PrepareDispatch.MAX_IN_FLIGHT + 3; i++) post(http, d, body);
            assertThat(transport.calls).hasSize(PrepareDispatch.MAX_IN_FLIGHT);
            assertThat(count(http, d, "dropped")).isEqualTo(3);
            transport.calls.getFirst().answer().complete("not_registered");
            post(http, d, body);
            assertThat(transport.calls).as("an answer frees a place").hasSize(PrepareDispatch.MAX_IN_FLIGHT + 1);
            assertThat(count(http, d, "not_registered")).isEqualTo(1);
        }
    }

    @Test
    void aWorkerSpecIsCheckedAndAManagerNeedsCredentials() {
        assertThat(WorkerEndpoint.parse("name=w,topic=t,events=tcp://h:1,manager=h:7400,namespace=" + NS).manager())
                .isEqualTo("h:7400");
        assertThatThrownBy(() -> WorkerEndpoint.parse("name=w,topic=t,events=tcp://h:1,manager=tcp://h:7400"))
                .hasMessageContaining("manager= must be HOST:PORT");
        assertThatThrownBy(() -> WorkerEndpoint.parse("name=w,topic=t,events=tcp://h:1,namespace=abc"))
                .hasMessageContaining("64 hex");
        assertThatThrownBy(() -> new RouterDaemon.Options("127.0.0.1", 0,
                List.of(WorkerEndpoint.parse("name=w,topic=t,events=tcp://h:1,manager=h:7400")), Policy.named("load"),
                RouterSettings.defaults(MeasuredCosts.forBlocks(16)), null))
                .hasMessageContaining("--cluster-token-file");
    }
}
