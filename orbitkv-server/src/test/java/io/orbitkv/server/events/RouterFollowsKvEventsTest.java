package io.orbitkv.server.events;

import static org.assertj.core.api.Assertions.assertThat;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import io.orbitkv.router.BlockKeys;
import io.orbitkv.router.IndexEvent;
import io.orbitkv.router.MeasuredCosts;
import io.orbitkv.router.Policy;
import io.orbitkv.router.RouterSettings;
import io.orbitkv.router.Tier;
import io.orbitkv.router.daemon.RouterDaemon;
import io.orbitkv.router.daemon.WorkerEndpoint;
import io.orbitkv.router.events.KvEventDecoder;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HexFormat;
import java.util.List;
import java.util.function.Predicate;
import org.junit.jupiter.api.Test;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;
import org.zeromq.ZMsg;

/**
 * The router reads what the Manager writes: batches from {@link KvEventCodec} decode to the events
 * the Manager meant, and a real router daemon following a PUB socket framed as the Manager frames
 * it ({@code [topic, seq, payload]}) routes by them, repairs a gap by replay and forgets a restarted
 * publisher's blocks.
 */
class RouterFollowsKvEventsTest {

    static final ObjectMapper JSON = new ObjectMapper();
    static final byte[] H1 = hash(1), H2 = hash(2), H3 = hash(3), H4 = hash(4);

    static byte[] hash(int i) {
        byte[] h = new byte[32];
        h[0] = (byte) i;
        h[31] = (byte) (100 + i);
        return h;
    }

    @Test
    void theManagersBatchesDecodeToTheEventsItMeant() {
        byte[] batch = KvEventCodec.encodeBatch(1_764_547_200.5, List.of(
                new KvEvent.AllBlocksCleared(),
                new KvEvent.BlockStored(List.of(H1, H2), null, new int[0], 16, null, KvEventPublisher.MEDIUM_DRAM),
                new KvEvent.BlockStored(List.of(H3), H2, new int[] {1, 2}, 16, 7, KvEventPublisher.MEDIUM_SSD),
                new KvEvent.BlockRemoved(List.of(H1), KvEventPublisher.MEDIUM_DRAM)));
        KvEventDecoder.Decoded d = (KvEventDecoder.Decoded) KvEventDecoder.decode(batch);
        assertThat(d.timestampSeconds()).isEqualTo(1_764_547_200.5);
        assertThat(d.skippedEvents()).isZero();
        assertThat(d.events()).hasSize(4);
        assertThat(d.events().get(0)).isInstanceOf(IndexEvent.Cleared.class);
        IndexEvent.Stored dram = (IndexEvent.Stored) d.events().get(1);
        assertThat(dram.tier()).isEqualTo(Tier.DRAM);
        assertThat(dram.keys()).containsExactly(BlockKeys.of(H1), BlockKeys.of(H2));
        IndexEvent.Stored ssd = (IndexEvent.Stored) d.events().get(2);
        assertThat(ssd.tier()).isEqualTo(Tier.SSD);
        assertThat(ssd.keys()).containsExactly(BlockKeys.of(H3));
        IndexEvent.Removed removed = (IndexEvent.Removed) d.events().get(3);
        assertThat(removed.tier()).isEqualTo(Tier.DRAM);
        assertThat(removed.keys()).containsExactly(BlockKeys.of(H1));
    }

    @Test
    void aRouterDaemonRoutesByTheEventsRepairsAGapAndForgetsARestart() throws Exception {
        try (ZContext ctx = new ZContext(1)) {
            ZMQ.Socket pub = ctx.createSocket(SocketType.PUB);
            pub.setLinger(0);
            int pubPort = pub.bindToRandomPort("tcp://127.0.0.1");
            ZMQ.Socket replay = ctx.createSocket(SocketType.ROUTER);
            replay.setLinger(0);
            replay.setReceiveTimeOut(10_000);
            int replayPort = replay.bindToRandomPort("tcp://127.0.0.1");
            String events = "tcp://127.0.0.1:" + pubPort;
            List<WorkerEndpoint> workers = List.of(
                    WorkerEndpoint.parse("name=a,topic=inst-a,events=" + events),
                    WorkerEndpoint.parse("name=b,topic=inst-b,events=" + events + ",replay=tcp://127.0.0.1:" + replayPort));
            RouterSettings settings = RouterSettings.defaults(MeasuredCosts.forBlocks(16));
            try (RouterDaemon router = RouterDaemon.start(new RouterDaemon.Options("127.0.0.1", 0, workers,
                    Policy.named("overlap"), settings, null))) {
                HttpClient http = HttpClient.newHttpClient();
                String base = "http://127.0.0.1:" + router.port();
                String route = "{\"prompt_tokens\": 64, \"block_hashes\": [\"" + hex(H1) + "\", \"" + hex(H2) + "\", \""
                        + hex(H3) + "\", \"" + hex(H4) + "\"]}";

                // a SUB joins asynchronously: publish batch 0 until the router has taken it
                byte[] first = KvEventCodec.encodeBatch(1, List.of(new KvEvent.AllBlocksCleared(),
                        new KvEvent.BlockStored(List.of(H1, H2, H3), null, new int[0], 16, null, "CPU")));
                awaitStatus(http, base, s -> nextSequence(s, 1) == 1, () -> send(pub, "inst-b", 0, first));
                JsonNode d = post(http, base + "/route", route);
                assertThat(d.get("worker").asText()).isEqualTo("b");
                assertThat(d.get("local_prefix_blocks").asInt()).isEqualTo(3);
                assertThat(d.get("recompute_tokens").asInt()).isEqualTo(16);
                assertThat(d.get("candidates").get(0).get("peer_dram_blocks").asInt()).isEqualTo(3);

                // seq 1 is lost; seq 2 reveals the gap: the router asks for a replay from 1
                send(pub, "inst-b", 2, KvEventCodec.encodeBatch(3, List.of(new KvEvent.BlockRemoved(List.of(H3), "CPU"))));
                ZMsg ask = ZMsg.recvMsg(replay);
                assertThat(ask).as("replay request").isNotNull();
                byte[] identity = ask.pop().getData();
                assertThat(ask.pop().getData()).isEmpty();
                assertThat(new String(ask.pop().getData(), StandardCharsets.UTF_8)).isEqualTo("inst-b");
                assertThat(ByteBuffer.wrap(ask.pop().getData()).getLong()).isEqualTo(1);
                JsonNode during = post(http, base + "/route", route);
                assertThat(during.get("fallback").asBoolean()).isTrue();
                assertThat(during.get("local_prefix_blocks").asInt()).isZero();   // b is scored by load meanwhile
                reply(replay, identity, 1, KvEventCodec.encodeBatch(2, List.of(
                        new KvEvent.BlockStored(List.of(H4), null, new int[0], 16, null, "CPU"))));
                reply(replay, identity, 2, KvEventCodec.encodeBatch(3, List.of(new KvEvent.BlockRemoved(List.of(H3), "CPU"))));
                reply(replay, identity, -1, new byte[0]);
                awaitStatus(http, base, s -> nextSequence(s, 1) == 3 && s.get("workers").get(1).get("trusted").asBoolean(), () -> { });
                JsonNode repaired = post(http, base + "/route", route);
                assertThat(repaired.get("worker").asText()).isEqualTo("b");
                assertThat(repaired.get("local_prefix_blocks").asInt()).isEqualTo(2);    // H3 removed, H4 after the hole
                assertThat(repaired.get("fallback").asBoolean()).isFalse();

                // the publisher restarted: sequence 0 again, starting with AllBlocksCleared. Counted from
                // here: the first batch was sent until the router took it, and a copy that arrived after
                // it was taken reads as a restart too.
                double restartsBefore = counter(http, base, "orbitkv_router_worker_restarts_total");
                send(pub, "inst-b", 0, KvEventCodec.encodeBatch(4, List.of(new KvEvent.AllBlocksCleared())));
                awaitStatus(http, base, s -> nextSequence(s, 1) == 1, () -> { });
                JsonNode cleared = post(http, base + "/route", route);
                assertThat(cleared.get("local_prefix_blocks").asInt()).isZero();

                String metrics = http.send(HttpRequest.newBuilder(URI.create(base + "/metrics")).build(),
                        HttpResponse.BodyHandlers.ofString()).body();
                assertThat(metrics).contains("orbitkv_router_repairs_completed_total 1.0")
                        .contains("orbitkv_router_event_gaps_total 1.0")
                        .contains("orbitkv_router_routes_total{policy=\"overlap\"} 4.0");
                assertThat(counter(http, base, "orbitkv_router_worker_restarts_total")).isEqualTo(restartsBefore + 1);
                HttpResponse<String> bad = http.send(HttpRequest.newBuilder(URI.create(base + "/route"))
                        .POST(HttpRequest.BodyPublishers.ofString("{\"prompt_tokens\": 0}")).build(),
                        HttpResponse.BodyHandlers.ofString());
                assertThat(bad.statusCode()).isEqualTo(400);
                assertThat(bad.body()).contains("prompt_tokens must be >= 1");
            }
        }
    }

    static String hex(byte[] b) {
        return HexFormat.of().formatHex(b);
    }

    static void send(ZMQ.Socket pub, String topic, long seq, byte[] payload) {
        pub.sendMore(topic);
        pub.sendMore(ByteBuffer.allocate(8).putLong(seq).array());
        pub.send(payload);
    }

    static void reply(ZMQ.Socket router, byte[] identity, long seq, byte[] payload) {
        router.sendMore(identity);
        router.sendMore(new byte[0]);
        router.sendMore(ByteBuffer.allocate(8).putLong(seq).array());
        router.send(payload);
    }

    static long nextSequence(JsonNode status, int worker) {
        return status.get("workers").get(worker).get("next_sequence").asLong();
    }

    static JsonNode post(HttpClient http, String url, String body) throws Exception {
        HttpResponse<String> r = http.send(HttpRequest.newBuilder(URI.create(url)).POST(HttpRequest.BodyPublishers.ofString(body))
                .build(), HttpResponse.BodyHandlers.ofString());
        assertThat(r.statusCode()).as(r.body()).isEqualTo(200);
        return JSON.readTree(r.body());
    }

    /** Runs {@code action} and reads /status until {@code done} holds, for at most 10 s. */
    static void awaitStatus(HttpClient http, String base, Predicate<JsonNode> done, Runnable action) throws Exception {
        long deadline = System.nanoTime() + Duration.ofSeconds(10).toNanos();
        while (true) {
            action.run();
            JsonNode s = JSON.readTree(http.send(HttpRequest.newBuilder(URI.create(base + "/status")).build(),
                    HttpResponse.BodyHandlers.ofString()).body());
            if (done.test(s)) return;
            assertThat(System.nanoTime() - deadline).as("status never matched: " + s).isNegative();
            Thread.onSpinWait();
        }
    }

    /** The value of the unlabelled series {@code name} on the router's /metrics. */
    private static double counter(HttpClient http, String base, String name) throws Exception {
        String metrics = http.send(HttpRequest.newBuilder(URI.create(base + "/metrics")).build(),
                HttpResponse.BodyHandlers.ofString()).body();
        for (String line : metrics.split("\n")) {
            if (line.startsWith(name + " ")) return Double.parseDouble(line.substring(name.length() + 1).trim());
        }
        throw new AssertionError(name + " not in /metrics");
    }
}
