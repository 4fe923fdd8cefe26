package io.orbitkv.router.daemon;

import io.orbitkv.router.BatchOutcome;
import io.orbitkv.router.events.KvEventDecoder;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.logging.Level;
import java.util.logging.Logger;
import org.zeromq.SocketType;
import org.zeromq.ZContext;
import org.zeromq.ZMQ;
import org.zeromq.ZMsg;

/**
 * Follows every worker's KV event stream (docs/kv-events.md): one SUB socket per worker,
 * subscribed to its topic, and one DEALER per worker with a replay endpoint. Decoded batches go
 * to the {@link RouterDaemon}, which applies them to its router under its lock; a
 * {@link BatchOutcome#GAP} sends a replay request {@code ["", topic, start_seq]} and the answer's
 * end marker {@code ["", -1, ""]} closes the repair. A worker without a replay endpoint gives up
 * at once (its entries are cleared and rebuilt from the live stream).
 *
 * <p>Owns its {@link ZContext} and sockets; one platform thread ({@code orbitkv-router-events})
 * uses them, from {@link #start} to {@link #close}. Each round it polls for at most 100 ms, then reads
 * at most {@value #MESSAGES_PER_ROUND} messages per socket, then ticks the router (repair bounds).
 * Errors are counted and logged at most once per 10 s; the loop keeps running.
 *
 * <p>Design note (handshake bound): every socket gives its connection {@value #HANDSHAKE_MILLIS} ms
 * to finish the ZMTP handshake instead of ZeroMQ's 30 s. Under load a JeroMQ connecting socket was
 * seen connected whose engine then never read: the publisher's 11 greeting bytes, and later its
 * FIN, sat unread in the kernel (about 1 in 200 fresh connections with six CPU-bound threads on
 * two cores; orbitkv-server's KvEventReplayStressTest, which also makes the stall certain). A DEALER queues a request on its pipe at
 * {@code connect()}, but nothing leaves the pipe before a handshake completes: a replay request
 * sent then waited out the 30 s, past the repair bound. With the bound the DEALER drops the
 * stalled connection itself, reconnects (100 ms) and sends the queued request on the new one: a
 * repair is late by about {@value #HANDSHAKE_MILLIS} ms, not lost, and needs no resend.
 */
final class EventSubscriber implements AutoCloseable {

    static final int MESSAGES_PER_ROUND = 256;
    /** The longest a connection may take to finish its ZMTP handshake before it is dropped (design note). */
    static final int HANDSHAKE_MILLIS = 2000;
    private static final Logger LOG = Logger.getLogger(EventSubscriber.class.getName());
    private static final byte[] EMPTY = new byte[0];

    private final RouterDaemon daemon;
    private final List<WorkerEndpoint> workers;
    private final ZContext context = new ZContext(1);
    private final ZMQ.Socket[] subs;
    private final ZMQ.Socket[] dealers;
    private final ZMQ.Poller poller;
    private final Thread thread;
    private volatile boolean running = true;
    final AtomicLong loopErrors = new AtomicLong();
    final AtomicLong replayRequests = new AtomicLong();
    private long lastErrorLogNanos = Long.MIN_VALUE;

    EventSubscriber(RouterDaemon daemon, List<WorkerEndpoint> workers) {
        this.daemon = daemon;
        this.workers = List.copyOf(workers);
        int n = workers.size();
        this.subs = new ZMQ.Socket[n];
        this.dealers = new ZMQ.Socket[n];
        this.poller = context.createPoller(2 * n);
        try {
            for (int i = 0; i < n; i++) {
                WorkerEndpoint w = workers.get(i);
                subs[i] = context.createSocket(SocketType.SUB);
                subs[i].setLinger(0);
                subs[i].setRcvHWM(100_000);
                subs[i].setHandshakeIvl(HANDSHAKE_MILLIS);
                subs[i].subscribe(w.topic().getBytes(StandardCharsets.UTF_8));
                subs[i].connect(w.eventsEndpoint());
                poller.register(subs[i], ZMQ.Poller.POLLIN);
                if (!w.replayEndpoint().isEmpty()) {
                    dealers[i] = context.createSocket(SocketType.DEALER);
                    dealers[i].setLinger(0);
                    dealers[i].setHandshakeIvl(HANDSHAKE_MILLIS);
                    dealers[i].connect(w.replayEndpoint());
                    poller.register(dealers[i], ZMQ.Poller.POLLIN);
                }
            }
        } catch (RuntimeException e) {
            context.close();
            throw new IllegalArgumentException("cannot connect the KV event sockets: " + e.getMessage(), e);
        }
        this.thread = Thread.ofPlatform().name("orbitkv-router-events").daemon().unstarted(this::run);
    }

    void start() {
        thread.start();
    }

    private void run() {
        while (running) {
            try {
                poller.poll(100);
                for (int i = 0; i < subs.length; i++) {
                    for (int m = 0; m < MESSAGES_PER_ROUND; m++) {
                        ZMsg msg = ZMsg.recvMsg(subs[i], ZMQ.DONTWAIT);
                        if (msg == null) break;
                        live(i, msg);
                    }
                    if (dealers[i] == null) continue;
                    for (int m = 0; m < MESSAGES_PER_ROUND; m++) {
                        ZMsg msg = ZMsg.recvMsg(dealers[i], ZMQ.DONTWAIT);
                        if (msg == null) break;
                        replayed(i, msg);
                    }
                }
                daemon.tick(System.nanoTime());
            } catch (RuntimeException e) {
                if (!running) return;
                error(e);
            }
        }
    }

    /** {@code [topic, seq (8 bytes BE), payload]}; a topic that only starts with ours is another instance's. */
    private void live(int worker, ZMsg msg) {
        try {
            if (msg.size() != 3) {
                daemon.malformed(worker, "a live message has " + msg.size() + " frames, not 3");
                return;
            }
            byte[] topic = msg.pop().getData();
            if (!new String(topic, StandardCharsets.UTF_8).equals(workers.get(worker).topic())) return;
            byte[] seq = msg.pop().getData();
            byte[] payload = msg.pop().getData();
            if (seq.length != 8) {
                daemon.malformed(worker, "sequence frame of " + seq.length + " bytes");
                return;
            }
            deliver(worker, ByteBuffer.wrap(seq).getLong(), payload);
        } finally {
            msg.destroy();
        }
    }

    /** {@code ["", seq, payload]}, ended by {@code ["", -1, ""]}. */
    private void replayed(int worker, ZMsg msg) {
        try {
            if (msg.size() != 3) {
                daemon.malformed(worker, "a replay message has " + msg.size() + " frames, not 3");
                return;
            }
            msg.pop();
            byte[] seq = msg.pop().getData();
            byte[] payload = msg.pop().getData();
            if (seq.length != 8) {
                daemon.malformed(worker, "replay sequence frame of " + seq.length + " bytes");
                return;
            }
            long s = ByteBuffer.wrap(seq).getLong();
            if (s == -1) {
                daemon.replayEnded(worker, System.nanoTime());
                return;
            }
            deliver(worker, s, payload);
        } finally {
            msg.destroy();
        }
    }

    private void deliver(int worker, long seq, byte[] payload) {
        if (seq < 0) {
            daemon.malformed(worker, "negative sequence " + seq);
            return;
        }
        switch (KvEventDecoder.decode(payload)) {
            case KvEventDecoder.Decoded d -> {
                BatchOutcome o = daemon.batch(worker, seq, d, System.nanoTime());
                if (o == BatchOutcome.GAP) requestReplay(worker);
            }
            case KvEventDecoder.Malformed m -> daemon.malformed(worker, m.reason());
        }
    }

    private void requestReplay(int worker) {
        long from = daemon.nextSequence(worker);
        if (dealers[worker] == null || from < 0) {
            daemon.replayEnded(worker, System.nanoTime());
            return;
        }
        replayRequests.incrementAndGet();
        dealers[worker].sendMore(EMPTY);
        dealers[worker].sendMore(workers.get(worker).topic().getBytes(StandardCharsets.UTF_8));
        dealers[worker].send(ByteBuffer.allocate(8).putLong(from).array(), ZMQ.DONTWAIT);
    }

    private void error(RuntimeException e) {
        loopErrors.incrementAndGet();
        long now = System.nanoTime();
        if (lastErrorLogNanos == Long.MIN_VALUE || now - lastErrorLogNanos > 10_000_000_000L) {
            lastErrorLogNanos = now;
            LOG.log(Level.WARNING, "KV event loop error (counted in orbitkv_router_event_loop_errors_total)", e);
        }
    }

    @Override
    public void close() {
        running = false;
        try {
            thread.join(2_000);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        context.close();
    }
}
