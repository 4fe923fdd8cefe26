package io.orbitkv.server.events;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.protocol.KeyForm;
import java.net.ServerSocket;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import org.msgpack.core.MessagePack;
import org.msgpack.value.ArrayValue;
import org.msgpack.value.Value;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;
import org.zeromq.ZMsg;

/**
 * The publisher driven round by round on the test thread (its owning thread), read back through
 * its replay endpoint with a JeroMQ DEALER: topics, per-topic sequences, names, lost residency
 * changes answered with {@code AllBlocksCleared}, malformed replay requests.
 */
class KvEventPublisherTest {

    /** Two distinct free ports: both probes stay open until both are known, so they cannot coincide. */
    static int[] twoFreePorts() throws Exception {
        try (ServerSocket a = new ServerSocket(0); ServerSocket b = new ServerSocket(0)) {
            return new int[] {a.getLocalPort(), b.getLocalPort()};
        }
    }

    /**
     * A replay DEALER connected as OrbitKV's router connects one: a 2 s handshake bound
     * (docs/kv-events.md), without which a JeroMQ connection that stalls in its greeting under load
     * holds its first request for ZeroMQ's default 30 s.
     */
    static ZMQ.Socket subscriberDealer(ZContext ctx, String endpoint) {
        ZMQ.Socket dealer = ctx.createSocket(SocketType.DEALER);
        dealer.setHandshakeIvl(2000);
        dealer.connect(endpoint);
        return dealer;
    }

    private static StateKey key(int i) {
        byte[] b = new byte[32];
        b[0] = (byte) i;
        b[31] = 42;
        return StateKey.ofBytes(b);
    }

    /**
     * One replay exchange: the batches of {@code topic} from {@code start}, served by {@code p} on
     * this thread. Asked once: the DEALER is a {@link #subscriberDealer}, so a connection whose
     * handshake stalls is dropped after 2 s and the request still queued on its pipe goes out on
     * the reconnection, well inside the 10 s ({@link KvEventReplayStressTest}).
     */
    static List<ArrayValue> replay(KvEventPublisher p, ZMQ.Socket dealer, byte[]... request) throws Exception {
        ZMsg msg = new ZMsg();
        msg.add(new byte[0]);
        for (byte[] f : request) msg.add(f);
        msg.send(dealer);
        List<ArrayValue> out = new ArrayList<>();
        long deadline = System.nanoTime() + 10_000_000_000L;
        while (System.nanoTime() < deadline) {
            p.serveReplays();
            ZMsg answer = ZMsg.recvMsg(dealer, ZMQ.DONTWAIT);
            if (answer == null) {
                Thread.onSpinWait();
                continue;
            }
            assertThat(answer.pop().getData()).isEmpty();
            byte[] seq = answer.pop().getData();
            byte[] payload = answer.pop().getData();
            if (ByteBuffer.wrap(seq).getLong() == -1) {
                assertThat(payload).isEmpty();
                return out;
            }
            try (var u = MessagePack.newDefaultUnpacker(payload)) {
                Value v = u.unpackValue();
                out.add(v.asArrayValue());
            }
            if (request.length == 2 && request[1].length == 8) {
                long start = ByteBuffer.wrap(request[1]).getLong();
                assertThat(ByteBuffer.wrap(seq).getLong()).as("sequence of replayed batch").isEqualTo(start + out.size() - 1);
            }
        }
        throw new AssertionError("no end marker within 10 s");
    }

    static byte[] seq(long s) {
        return ByteBuffer.allocate(8).putLong(s).array();
    }

    private static List<String> tags(ArrayValue batch) {
        List<String> out = new ArrayList<>();
        for (Value e : batch.get(1).asArrayValue()) out.add(e.asArrayValue().get(0).asStringValue().asString());
        return out;
    }

    @Test
    void topicsSequencesNamesAndALostStretchOfTheResidencyStream() throws Exception {
        ResidencyStream stream = new ResidencyStream(4);
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        int[] ports = twoFreePorts();
        String replayEndpoint = "tcp://127.0.0.1:" + ports[1];
        var settings = new KvEventPublisher.Settings("tcp://127.0.0.1:" + ports[0], replayEndpoint, 100, 1000, 1024);
        try (KvEventPublisher p = KvEventPublisher.bind(settings, stream, registry);
             ZContext ctx = new ZContext(1)) {
            ZMQ.Socket dealer = subscriberDealer(ctx, replayEndpoint);

            p.onRegistered("engine-a", null);
            p.onReserved("engine-a", key(1), KeyForm.BLOCK_HASH, new byte[] {9, 9, 1}, 16);
            p.onReserved("engine-b", key(2), KeyForm.BLOCK_HASH, new byte[] {9, 9, 2}, 16);
            stream.append(key(1), ResidencyEvent.Medium.DRAM, ResidencyEvent.Kind.ADDED, 1);
            stream.append(key(2), ResidencyEvent.Medium.DRAM, ResidencyEvent.Kind.ADDED, 2);
            stream.append(key(3), ResidencyEvent.Medium.DRAM, ResidencyEvent.Kind.ADDED, 3); // never named
            p.round();
            stream.append(key(1), ResidencyEvent.Medium.SSD, ResidencyEvent.Kind.ADDED, 4);
            stream.append(key(1), ResidencyEvent.Medium.DRAM, ResidencyEvent.Kind.REMOVED, 1);
            p.round();

            List<ArrayValue> a = replay(p, dealer, "engine-a".getBytes(StandardCharsets.UTF_8), seq(0));
            assertThat(a).hasSize(2);
            assertThat(tags(a.get(0))).containsExactly("AllBlocksCleared", "BlockStored");
            ArrayValue stored = a.get(0).get(1).asArrayValue().get(1).asArrayValue();
            assertThat(stored.get(1).asArrayValue().get(0).asBinaryValue().asByteArray()).containsExactly(9, 9, 1);
            assertThat(stored.get(6).asStringValue().asString()).isEqualTo(KvEventPublisher.MEDIUM_DRAM);
            assertThat(tags(a.get(1))).containsExactly("BlockStored", "BlockRemoved");
            assertThat(a.get(1).get(1).asArrayValue().get(0).asArrayValue().get(6).asStringValue().asString())
                    .isEqualTo(KvEventPublisher.MEDIUM_SSD);
            List<ArrayValue> b = replay(p, dealer, "engine-b".getBytes(StandardCharsets.UTF_8), seq(0));
            assertThat(b).hasSize(1);
            assertThat(tags(b.get(0))).containsExactly("AllBlocksCleared", "BlockStored");
            assertThat(registry.counter("orbitkv_kv_events_unnamed").count()).isEqualTo(1);

            // 6 changes into a ring of 4 before the next round: 2 are lost, every topic is told to forget
            for (int i = 0; i < 6; i++) stream.append(key(2), ResidencyEvent.Medium.SSD, ResidencyEvent.Kind.ADDED, 10 + i);
            p.round();
            assertThat(registry.counter("orbitkv_kv_events_dropped").count()).isEqualTo(2);
            List<ArrayValue> a2 = replay(p, dealer, "engine-a".getBytes(StandardCharsets.UTF_8), seq(2));
            assertThat(a2).hasSize(1);
            assertThat(tags(a2.get(0))).containsExactly("AllBlocksCleared");
            List<ArrayValue> b2 = replay(p, dealer, "engine-b".getBytes(StandardCharsets.UTF_8), seq(0));
            assertThat(b2).hasSize(2);
            assertThat(tags(b2.get(1))).containsExactly("AllBlocksCleared", "BlockStored", "BlockStored", "BlockStored",
                    "BlockStored");

            // a vLLM-shaped request (no topic) and garbage get the end marker only
            assertThat(replay(p, dealer, seq(0))).isEmpty();
            assertThat(replay(p, dealer, new byte[] {1}, new byte[] {2})).isEmpty();
            assertThat(registry.counter("orbitkv_kv_events_replay_refused").count()).isEqualTo(2);
        }
    }

    @Test
    void endpointsMustBeTcp() {
        assertThatThrownBy(() -> new KvEventPublisher.Settings("ipc:///tmp/x", "", 1, 1, 1))
                .hasMessageContaining("kvEventsEndpoint must be tcp://host:port");
        assertThatThrownBy(() -> new KvEventPublisher.Settings("tcp://127.0.0.1:5557", "tcp://nope", 1, 1, 1))
                .hasMessageContaining("kvEventsReplayEndpoint");
    }
}
