package io.orbitkv.server.events;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.core.engine.PublishObserver;
import io.orbitkv.core.log.RateLimitedLog;
import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.core.storage.residency.ResidencyStream;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.protocol.KeyForm;
import java.nio.ByteBuffer;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.TimeUnit;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;
import org.zeromq.ZMsg;

/**
 * Publishes where this Manager holds engine blocks as vLLM's KV-event publisher does: msgpack
 * {@code KVEventBatch}es on a ZeroMQ PUB socket, three frames per batch (topic = the engine
 * instance id, an 8-byte big-endian sequence number, the payload), and a bounded replay of recent
 * batches on a ROUTER socket (format and differences: {@code docs/kv-events.md}).
 *
 * <p>Owns the ZeroMQ context and both sockets, the per-topic sequence numbers and the replay
 * buffer, all confined to one platform thread ({@code orbitkv-kv-events}): ZeroMQ sockets are
 * not thread-safe. Session threads only touch {@link BlockNames} and the registration queue. Flow:
 * each round the thread takes new registrations (a first sight of an instance opens its topic
 * with {@code AllBlocksCleared}), reads at most {@link Settings#maxEventsPerRound} residency
 * events, turns each named one into {@code BlockStored}/{@code BlockRemoved}, and sends one batch
 * per topic that has events.
 *
 * <p>Invariants: the Manager is never slowed by a subscriber or by this thread: storage appends to
 * the bounded {@link ResidencyStream} ring whatever happens here, a registration is
 * {@code offer}ed to a bounded queue, and PUB sends never block (ZeroMQ drops at the high-water
 * mark, per subscriber). Whatever is lost on the Manager's side is counted
 * ({@code orbitkv_kv_events_dropped_total}): lost residency changes are answered with
 * {@code AllBlocksCleared} on every open topic, so a subscriber forgets rather than keeps blocks it
 * can no longer be told about (a router then misses hits; it never routes to a block that is
 * gone); a lost registration costs nothing, since a topic is also opened at its first event. Per topic, sequence
 * numbers start at 0 and have no gaps; a subscriber that sees one lost batches between the
 * publisher and itself and can ask for a replay.
 *
 * <p>Design note: one batch per topic per round of at most 1,024 events (~40 KiB of msgpack) at a
 * 2 ms poll cadence: a router learns of a block within a few milliseconds of its commit, and a
 * publish burst of 4,096 pages (one PUBLISH_RESERVE) becomes four batches, not 4,096 messages.
 * The replay buffer keeps 10,000 batches by default, the depth vLLM's publisher keeps.
 */
public final class KvEventPublisher implements PublishObserver, AutoCloseable {

    /** The medium name of the DRAM tier: the name vLLM's CPU offloading tier uses. */
    public static final String MEDIUM_DRAM = "CPU";
    /** The medium name of the SSD tier. */
    public static final String MEDIUM_SSD = "SSD";
    /** Sequence frame of the replay's end marker: -1 as 8 big-endian bytes, as vLLM sends it. */
    static final byte[] END_SEQ = ByteBuffer.allocate(8).putLong(-1).array();

    private static final long POLL_MILLIS = 2;
    private static final int REGISTRATION_QUEUE = 1024;
    private static final int REPLAY_REQUESTS_PER_ROUND = 16;
    private static final int TOPICS = 4096;

    /**
     * @param endpoint           PUB bind address, {@code tcp://host:port}
     * @param replayEndpoint     ROUTER bind address for replay requests; empty = no replay
     * @param replayBatches      batches kept for replay (all topics together)
     * @param namedBlocks        engine block names kept ({@link BlockNames})
     * @param maxEventsPerRound  residency events read per round (also the largest batch)
     */
    public record Settings(String endpoint, String replayEndpoint, int replayBatches, int namedBlocks,
                           int maxEventsPerRound) {
        public Settings {
            requireTcp(endpoint, "kvEventsEndpoint");
            Objects.requireNonNull(replayEndpoint, "replayEndpoint");
            if (!replayEndpoint.isEmpty()) requireTcp(replayEndpoint, "kvEventsReplayEndpoint");
            if (replayBatches < 1) throw new IllegalArgumentException("kvEventsReplayBatches must be >= 1: " + replayBatches);
            if (namedBlocks < 1) throw new IllegalArgumentException("kvEventsNamedBlocks must be >= 1: " + namedBlocks);
            if (maxEventsPerRound < 1) throw new IllegalArgumentException("maxEventsPerRound must be >= 1");
        }

        /** JeroMQ emulates {@code ipc://} over TCP, which no libzmq subscriber could reach: TCP only. */
        static void requireTcp(String endpoint, String key) {
            if (endpoint == null || !endpoint.matches("tcp://[^:/\\s]+:[0-9]{1,5}")) {
                throw new IllegalArgumentException(key + " must be tcp://host:port, got " + endpoint);
            }
        }
    }

    /** One sent batch, kept for replay. */
    private record Sent(String topic, long sequence, byte[] payload) {
    }

    private final Settings settings;
    private final ResidencyStream stream;
    private final BlockNames names;
    private final ArrayBlockingQueue<String> registrations = new ArrayBlockingQueue<>(REGISTRATION_QUEUE);
    private final ZContext context;
    private final ZMQ.Socket pub;
    private final ZMQ.Socket router;
    private final ZMQ.Poller poller;
    private final Thread thread;
    private volatile boolean running = true;
    private final RateLimitedLog errorLog = RateLimitedLog.tenSeconds(KvEventPublisher.class.getName());

    // confined to the publisher thread
    private long nextResidency;
    /** Topic → next sequence number; insertion order = first sight. Bounded by {@link #TOPICS}. */
    private final LinkedHashMap<String, Long> topics = new LinkedHashMap<>(16, 0.75f, false) {
        @Override
        protected boolean removeEldestEntry(Map.Entry<String, Long> eldest) {
            return size() > TOPICS;
        }
    };
    private final ArrayDeque<Sent> replay = new ArrayDeque<>();

    private final Counter batches;
    private final Counter events;
    private final Counter dropped;
    private final Counter unnamed;
    private final Counter replays;
    private final Counter replayRefused;
    private final Counter loopErrors;

    private KvEventPublisher(Settings settings, ResidencyStream stream, MeterRegistry registry) {
        this.settings = settings;
        this.stream = stream;
        this.names = new BlockNames(settings.namedBlocks());
        // new subscribers get events from now on: the stream's past is described by no name
        this.nextResidency = stream.lastSequence() + 1;
        this.context = new ZContext(1);
        try {
            this.pub = context.createSocket(SocketType.PUB);
            pub.setLinger(0);
            pub.setSndHWM(100_000);
            pub.bind(settings.endpoint());
            if (settings.replayEndpoint().isEmpty()) {
                this.router = null;
                this.poller = null;
            } else {
                this.router = context.createSocket(SocketType.ROUTER);
                router.setLinger(0);
                router.bind(settings.replayEndpoint());
                this.poller = context.createPoller(1);
                poller.register(router, ZMQ.Poller.POLLIN);
            }
        } catch (RuntimeException e) {
            context.close();
            throw new IllegalStateException("cannot bind the KV event endpoints " + settings.endpoint() + " / "
                    + settings.replayEndpoint() + ": " + e.getMessage(), e);
        }
        this.batches = Counter.builder("orbitkv_kv_events_batches").description("KV event batches published").register(registry);
        this.events = Counter.builder("orbitkv_kv_events_events").description("KV events published (BlockStored, BlockRemoved, AllBlocksCleared)").register(registry);
        this.dropped = Counter.builder("orbitkv_kv_events_dropped").description("residency changes or registrations lost before publishing (answered with AllBlocksCleared)").register(registry);
        this.unnamed = Counter.builder("orbitkv_kv_events_unnamed").description("residency changes of keys with no known engine block name (not published)").register(registry);
        this.replays = Counter.builder("orbitkv_kv_events_replays").description("replay requests served").register(registry);
        this.replayRefused = Counter.builder("orbitkv_kv_events_replay_refused").description("malformed replay requests (answered with the end marker only)").register(registry);
        this.loopErrors = Counter.builder("orbitkv_kv_events_loop_errors").description("unexpected errors of the KV event thread (logged, loop continues)").register(registry);
        Gauge.builder("orbitkv_kv_events_named_blocks", names, BlockNames::size).description("engine block names held").register(registry);
        Gauge.builder("orbitkv_kv_events_named_blocks_bound", names, BlockNames::capacity).description("bound of the block name table").register(registry);
        this.thread = Thread.ofPlatform().name("orbitkv-kv-events").daemon().unstarted(this::run);
    }

    /** Binds the endpoints (failing with the endpoint named) and starts publishing. */
    public static KvEventPublisher start(Settings settings, ResidencyStream stream, MeterRegistry registry) {
        KvEventPublisher p = bind(settings, stream, registry);
        p.thread.start();
        return p;
    }

    /**
     * Binds the endpoints without starting the thread: the caller becomes the owning thread and
     * drives {@link #round} and {@link #serveReplays} itself (tests).
     */
    static KvEventPublisher bind(Settings settings, ResidencyStream stream, MeterRegistry registry) {
        return new KvEventPublisher(Objects.requireNonNull(settings, "settings"),
                Objects.requireNonNull(stream, "stream"), Objects.requireNonNull(registry, "registry"));
    }

    // ---- PublishObserver (session threads) --------------------------------------------------

    @Override
    public void onRegistered(String instanceId, Namespace namespace) {
        if (!registrations.offer(instanceId)) dropped.increment();
    }

    @Override
    public void onReserved(String instanceId, StateKey key, KeyForm form, byte[] name, int pageTokens) {
        names.learn(key, new BlockNames.Name(instanceId, name.clone(), pageTokens));
    }

    // ---- the publisher thread ---------------------------------------------------------------

    private void run() {
        while (running) {
            try {
                round();
                if (poller != null) {
                    poller.poll(POLL_MILLIS);
                    serveReplays();
                } else {
                    Thread.sleep(POLL_MILLIS);
                }
            } catch (InterruptedException e) {
                return;
            } catch (RuntimeException e) {
                loopErrors.increment();
                errorLog.log(System.Logger.Level.WARNING, e.getClass().getName(), "KV event round failed (continuing): " + e);
            }
        }
    }

    /** One round: registrations, then at most one read of the residency stream, then one batch per topic. */
    void round() {
        Map<String, List<KvEvent>> pending = new LinkedHashMap<>();
        for (String instance; (instance = registrations.poll()) != null; ) open(instance, pending);
        ResidencyStream.Batch read = stream.readFrom(nextResidency, settings.maxEventsPerRound());
        if (read.gap()) {
            long lost = read.events().isEmpty() ? 0 : read.events().getFirst().sequence() - nextResidency;
            dropped.increment(Math.max(1, lost));
            for (String topic : topics.keySet()) append(pending, topic, new KvEvent.AllBlocksCleared());
        }
        nextResidency = read.nextSequence();
        for (ResidencyEvent e : read.events()) {
            var name = names.lookup(e);
            if (name.isEmpty()) {
                unnamed.increment();
                continue;
            }
            BlockNames.Name n = name.get();
            open(n.topic(), pending);
            String medium = switch (e.medium()) {
                case DRAM -> MEDIUM_DRAM;
                case SSD -> MEDIUM_SSD;
            };
            switch (e.kind()) {
                case ADDED -> append(pending, n.topic(),
                        new KvEvent.BlockStored(List.of(n.blockHash()), null, new int[0], n.blockSize(), null, medium));
                case REMOVED -> {
                    List<KvEvent> list = pending.computeIfAbsent(n.topic(), t -> new ArrayList<>());
                    // consecutive removals on one medium share one BlockRemoved, as vLLM batches them
                    if (!list.isEmpty() && list.getLast() instanceof KvEvent.BlockRemoved last
                            && last.medium().equals(medium)) {
                        List<byte[]> merged = new ArrayList<>(last.blockHashes());
                        merged.add(n.blockHash());
                        list.set(list.size() - 1, new KvEvent.BlockRemoved(merged, medium));
                    } else {
                        list.add(new KvEvent.BlockRemoved(List.of(n.blockHash()), medium));
                    }
                }
            }
        }
        double ts = System.currentTimeMillis() / 1000.0;
        for (Map.Entry<String, List<KvEvent>> e : pending.entrySet()) send(e.getKey(), ts, e.getValue());
    }

    /** First sight of {@code topic} in this Manager run: its subscribers forget an earlier run's blocks. */
    private void open(String topic, Map<String, List<KvEvent>> pending) {
        if (topics.containsKey(topic)) return;
        topics.put(topic, 0L);
        append(pending, topic, new KvEvent.AllBlocksCleared());
    }

    private static void append(Map<String, List<KvEvent>> pending, String topic, KvEvent event) {
        pending.computeIfAbsent(topic, t -> new ArrayList<>()).add(event);
    }

    private void send(String topic, double ts, List<KvEvent> batch) {
        long seq = topics.getOrDefault(topic, 0L);
        topics.put(topic, seq + 1);
        byte[] payload = KvEventCodec.encodeBatch(ts, batch);
        pub.sendMore(topic);
        pub.sendMore(seqBytes(seq));
        pub.send(payload, ZMQ.DONTWAIT);
        replay.addLast(new Sent(topic, seq, payload));
        while (replay.size() > settings.replayBatches()) replay.removeFirst();
        batches.increment();
        events.increment(batch.size());
    }

    /**
     * Answers up to {@value #REPLAY_REQUESTS_PER_ROUND} waiting requests. A request is
     * {@code [identity, "", topic, start_seq]} (a DEALER sends {@code ["", topic, start_seq]});
     * the answer is every kept batch of that topic with sequence ≥ start_seq as
     * {@code [identity, "", seq, payload]}, then {@code [identity, "", -1, ""]}.
     */
    void serveReplays() {
        for (int i = 0; i < REPLAY_REQUESTS_PER_ROUND; i++) {
            ZMsg msg = ZMsg.recvMsg(router, ZMQ.DONTWAIT);
            if (msg == null) return;
            try {
                byte[] identity = msg.pop().getData();
                List<byte[]> rest = new ArrayList<>();
                while (!msg.isEmpty()) rest.add(msg.pop().getData());
                boolean wellFormed = rest.size() == 3 && rest.get(0).length == 0 && rest.get(2).length == 8;
                if (wellFormed) {
                    String topic = new String(rest.get(1), java.nio.charset.StandardCharsets.UTF_8);
                    long start = ByteBuffer.wrap(rest.get(2)).getLong();
                    for (Sent s : replay) {
                        if (s.topic().equals(topic) && s.sequence() >= start) {
                            router.sendMore(identity);
                            router.sendMore(new byte[0]);
                            router.sendMore(seqBytes(s.sequence()));
                            router.send(s.payload(), ZMQ.DONTWAIT);
                        }
                    }
                    replays.increment();
                } else {
                    replayRefused.increment();
                }
                router.sendMore(identity);
                router.sendMore(new byte[0]);
                router.sendMore(END_SEQ);
                router.send(new byte[0], ZMQ.DONTWAIT);
            } finally {
                msg.destroy();
            }
        }
    }

    private static byte[] seqBytes(long seq) {
        return ByteBuffer.allocate(8).putLong(seq).array();
    }

    /** Stops the thread (within one poll interval) and closes both sockets. Idempotent. */
    @Override
    public void close() {
        running = false;
        try {
            if (thread.isAlive()) thread.join(TimeUnit.SECONDS.toMillis(5));
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        context.close();
    }
}
