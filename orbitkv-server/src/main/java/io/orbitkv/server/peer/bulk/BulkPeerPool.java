package io.orbitkv.server.peer.bulk;

import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Tags;
import io.orbitkv.core.log.UnexpectedErrors;
import io.orbitkv.core.log.UnexpectedErrors.Layer;
import io.orbitkv.core.peer.AuthorizeRequest;
import io.orbitkv.core.peer.AuthorizeResult;
import io.orbitkv.core.peer.AuthorizeResult.Rejection;
import io.orbitkv.core.peer.NodeIncarnation;
import io.orbitkv.core.peer.PayloadSink;
import io.orbitkv.core.peer.PayloadTransport.FetchOutcome;
import io.orbitkv.core.peer.PayloadTransport.TransferEnd;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.net.InetSocketAddress;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.ArrayBlockingQueue;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;

/**
 * The requester's connections to one source incarnation's data endpoint: a bounded queue of
 * batches and up to {@code connectionsPerPeer} connections, each a platform thread that takes a
 * batch, writes its request and reads its pages — payload straight into the reserved slot — then
 * takes the next.
 *
 * <p>Owns the connections, their threads and the queue; borrows the transport's budgets, auth and
 * timer. Thread model: {@link #submit} from any thread (never blocks: a full queue refuses the
 * batch); {@link #close()} from any thread (the tick thread when the member left).
 *
 * <p>Invariants: a page's outcome is completed by the connection thread reading it, after that
 * thread stopped writing into its slot (so {@code PeerReader} aborts or commits a slot no one
 * writes); a page whose sink was taken and whose frame did not end with the trailer is
 * {@code Streamed(BROKEN)}, a page never started is {@code Rejected(UNREACHABLE)}; in-flight
 * bytes (peer and Manager budgets) are taken before the sink is asked for a slot and given back
 * when the page's frame ends, whatever the outcome.
 *
 * <p>Error boundary (layer {@code transport}): a connection thread never dies of an exception; an
 * IOException fails its batch (the expected way), anything else fails it the same way and is
 * counted as a bug, as is a sink that throws from {@code onGrant} (that page is declined).
 *
 * <p>Design note: one batch at a time per connection (no pipelining on one socket): a batch is
 * 32–256 pages, so the request round trip (~50 µs on loopback) is paid once per 64–512 MiB, and a
 * connection that fails takes exactly one batch with it. Idle connections close after
 * {@link #IDLE_CLOSE_SECONDS}, so a peer read once does not hold sockets forever.
 */
final class BulkPeerPool implements AutoCloseable {

    /** An idle connection closes after this long without a batch. */
    static final long IDLE_CLOSE_SECONDS = 60;
    /** Bytes read per socket call into a slot (and checksummed right after, while in cache). */
    static final int PIECE_BYTES = 256 << 10;

    final NodeIncarnation node;
    final InetSocketAddress address;
    private final BulkPayloadTransport owner;
    private final ByteBudget inflight;
    private final Gauge inflightGauge;
    private final ArrayBlockingQueue<BulkBatch> queue;
    // @GuardedBy("this")
    private final Set<Connection> connections = new HashSet<>();
    // @GuardedBy("this")
    private int idle;
    // @GuardedBy("this")
    private boolean closed;

    BulkPeerPool(BulkPayloadTransport owner, NodeIncarnation node, InetSocketAddress address) {
        this.owner = owner;
        this.node = node;
        this.address = address;
        this.inflight = new ByteBudget(owner.limits.inflightBytesPerPeer());
        this.inflightGauge = inflight.register(owner.registry, "orbitkv.peer.bulk.inflight",
                Tags.of("scope", "peer", "peer", node.nodeId() + "#" + node.incarnation()),
                "payload bytes being received (scope: manager = from all sources, peer = from one)");
        this.queue = new ArrayBlockingQueue<>(owner.limits.queuedBatchesPerPeer());
    }

    /** Queues {@code batch} for a connection; a closed pool or a full queue refuses it at once. */
    void submit(BulkBatch batch) {
        synchronized (this) {
            if (closed) {
                batch.refuseRest(Rejection.UNREACHABLE);
                return;
            }
            if (!queue.offer(batch)) {
                owner.batchesRefused.increment();
                batch.refuseRest(Rejection.SOURCE_BUSY);
                return;
            }
            if (queue.size() > idle && connections.size() < owner.limits.connectionsPerPeer()) spawn();
        }
    }

    /** Closes every connection whose batch ran past its deadline (its pages end as misses); the owner's timer calls it. */
    void sweep(long nowNanos) {
        List<Connection> open;
        synchronized (this) {
            open = new ArrayList<>(connections);
        }
        for (Connection c : open) {
            if (c.serving && nowNanos - c.deadlineNanos > 0) c.close();
        }
    }

    // @GuardedBy("this")
    private void spawn() {
        Connection c = new Connection();
        connections.add(c);
        c.thread = Thread.ofPlatform().name("orbitkv-bulk-fetch-" + node.nodeId() + "-" + owner.threadIds.incrementAndGet())
                .daemon().unstarted(c::run);
        c.thread.start();
    }

    int connections() {
        synchronized (this) {
            return connections.size();
        }
    }

    long inflightPeak() {
        return inflight.peak();
    }

    /** Closes every connection (their batches end as misses now) and refuses every queued batch. */
    @Override
    public void close() {
        List<Connection> open;
        synchronized (this) {
            if (closed) return;
            closed = true;
            open = new ArrayList<>(connections);
        }
        for (Connection c : open) c.close();
        for (BulkBatch b; (b = queue.poll()) != null; ) b.refuseRest(Rejection.UNREACHABLE);
        owner.registry.remove(inflightGauge);
    }

    /** One connection and its thread. */
    private final class Connection {
        private volatile BulkSocket socket;
        private volatile boolean closed;
        private volatile Thread thread;
        /** A batch is being served and must end by {@link #deadlineNanos} ({@link #sweep}). */
        private volatile boolean serving;
        private volatile long deadlineNanos;
        // connection thread only: the batch's pages still unanswered; counted idle already
        private int left;
        private boolean idleEarly;
        private final ByteBuffer header = ByteBuffer.allocate(BulkLayout.HEADER_BYTES);
        private final ByteBuffer pageHeader = ByteBuffer.allocate(BulkLayout.PAGE_HEADER_BYTES);
        private final ByteBuffer control = ByteBuffer.allocate(BulkLayout.AUTH_BODY_BYTES);
        private final ByteBuffer trailer = ByteBuffer.allocate(BulkLayout.TRAILER_BYTES);
        private ByteBuffer scratch;

        /** Closes the socket (a blocked read fails at once) and wakes the thread if it waits for a batch. */
        void close() {
            closed = true;
            BulkSocket s = socket;
            if (s != null) s.close();
            if (thread != Thread.currentThread()) thread.interrupt();
        }

        void run() {
            try {
                if (!open()) {
                    // the source is unreachable now: unless another connection to it is up, every
                    // batch waiting for it is a miss (the next submit tries to connect again)
                    boolean alone;
                    synchronized (BulkPeerPool.this) {
                        alone = connections.size() == 1;
                    }
                    if (alone) {
                        for (BulkBatch b; (b = queue.poll()) != null; ) b.refuseRest(Rejection.UNREACHABLE);
                    }
                    return;
                }
                while (!closed) {
                    BulkBatch batch;
                    markIdle();
                    try {
                        batch = queue.poll(IDLE_CLOSE_SECONDS, TimeUnit.SECONDS);
                    } catch (InterruptedException e) {
                        return;
                    } finally {
                        synchronized (BulkPeerPool.this) {
                            idle--;
                            idleEarly = false;
                        }
                    }
                    if (batch == null) return;
                    if (!serve(batch)) return;
                }
            } finally {
                close();
                synchronized (BulkPeerPool.this) {
                    if (idleEarly) idle--;
                    idleEarly = false;
                    connections.remove(this);
                    owner.connectionsOpen.decrementAndGet();
                    // a batch queued while this thread was leaving must not wait for the next submit
                    if (!BulkPeerPool.this.closed && !queue.isEmpty() && connections.size() < owner.limits.connectionsPerPeer()) {
                        spawn();
                    }
                }
            }
        }

        /**
         * Counts this connection idle, once: before the last page of a batch is answered (its
         * requester may submit the next batch at once, and must find this connection rather than
         * open another), or before waiting for a batch.
         */
        private void markIdle() {
            synchronized (BulkPeerPool.this) {
                if (!idleEarly) idle++;
                idleEarly = true;
            }
        }

        /** Answers page {@code index} of the batch being served. */
        private void answer(BulkBatch batch, int index, FetchOutcome outcome) {
            if (left == 1) markIdle();
            batch.complete(index, outcome);
        }

        /** Connects and authenticates within the handshake timeout; false (counted where it applies) otherwise. */
        private boolean open() {
            owner.connectionsOpen.incrementAndGet();
            ScheduledFuture<?> cut = owner.timer.schedule(this::close, owner.limits.handshakeTimeout().toNanos(), TimeUnit.NANOSECONDS);
            try {
                BulkSocket s = BulkSocket.connect(address, owner.tls, (int) owner.limits.handshakeTimeout().toMillis());
                socket = s;
                if (closed) return false;
                readHeader(s);
                if (!(BulkLayout.decodeHeader(header, owner.limits) instanceof BulkLayout.Header h) || h.type() != BulkLayout.HELLO
                        || !(readControl(s, h) instanceof BulkLayout.Hello hello)) {
                    owner.malformed.increment();
                    return false;
                }
                byte[] clientNonce = BulkAuth.nonce();
                s.write(new BulkLayout.Auth(clientNonce, owner.auth.requesterMac(hello.serverNonce(), clientNonce)).encode());
                readHeader(s);
                if (!(BulkLayout.decodeHeader(header, owner.limits) instanceof BulkLayout.Header h2)) {
                    owner.malformed.increment();
                    return false;
                }
                BulkLayout.BodyDecode reply = readControl(s, h2);
                if (!(reply instanceof BulkLayout.AuthOk ok)
                        || !BulkAuth.matches(owner.auth.sourceMac(hello.serverNonce(), clientNonce), ok.mac())) {
                    owner.authFailures.increment();
                    return false;
                }
                return true;
            } catch (IOException e) {
                return false; // refused, reset, timed out or unresolvable: the source is unreachable now
            } catch (RuntimeException e) {
                UnexpectedErrors.record(Layer.TRANSPORT, "BulkPeerPool.open", "an unreachable source (its batches are misses)", e);
                return false;
            } finally {
                cut.cancel(false);
            }
        }

        private void readHeader(BulkSocket s) throws IOException {
            header.clear();
            s.readFully(header);
            header.flip();
        }

        private BulkLayout.BodyDecode readControl(BulkSocket s, BulkLayout.Header h) throws IOException {
            if (h.type() == BulkLayout.PAGE || h.type() == BulkLayout.BATCH_REQUEST) return new BulkLayout.Malformed("not control");
            control.clear().limit(h.bodyBytes());
            s.readFully(control);
            control.flip();
            return BulkLayout.decodeControl(h, control);
        }

        /** Runs one batch; false when the connection failed (every unanswered page was ended). */
        private boolean serve(BulkBatch batch) {
            BulkSocket s = socket;
            deadlineNanos = System.nanoTime() + owner.limits.batchDeadline().toNanos();
            serving = true;
            Current current = new Current();
            try {
                s.write(batch.wire().encode());
                left = batch.size();
                while (left > 0) {
                    readHeader(s);
                    switch (BulkLayout.decodeHeader(header, owner.limits)) {
                        case BulkLayout.Malformed m -> throw malformed(m.reason());
                        case BulkLayout.Header h -> {
                            switch (h.type()) {
                                case BulkLayout.PAGE -> receivePage(s, batch, h, current);
                                case BulkLayout.PAGE_REFUSED -> {
                                    if (!(readControl(s, h) instanceof BulkLayout.PageRefused r) || r.batchId() != batch.batchId
                                            || r.index() >= batch.size() || batch.done(r.index())) {
                                        throw malformed("page refusal out of place");
                                    }
                                    owner.pagesRefused.increment();
                                    answer(batch, r.index(), new FetchOutcome.Rejected(r.reason()));
                                }
                                case BulkLayout.ERROR -> throw new IOException("source closed the connection: " + readControl(s, h));
                                default -> throw malformed("frame type " + h.type() + " in a batch");
                            }
                        }
                    }
                    left--;
                }
                return !closed;
            } catch (IOException | RuntimeException e) {
                // an IOException is how a connection fails (closed, reset, malformed, past its
                // deadline); anything else is a bug, counted, and ends the batch the same way
                if (e instanceof RuntimeException) {
                    UnexpectedErrors.record(Layer.TRANSPORT, "BulkPeerPool.serve", "a failed batch (its pages are misses)", e);
                }
                current.fail();
                batch.refuseRest(Rejection.UNREACHABLE);
                close();
                return false;
            } finally {
                serving = false;
            }
        }

        private IOException malformed(String reason) {
            owner.malformed.increment();
            return new IOException("malformed frame from " + node + ": " + reason);
        }

        /**
         * Reads one PAGE frame: takes in-flight bytes, asks the receiver for a slot, reads the payload
         * into it piece by piece (checksummed by the sink as it lands), then the trailer.
         */
        private void receivePage(BulkSocket s, BulkBatch batch, BulkLayout.Header h, Current current) throws IOException {
            pageHeader.clear();
            s.readFully(pageHeader);
            pageHeader.flip();
            if (!(BulkLayout.decodePageHeader(h.bodyBytes(), pageHeader) instanceof BulkLayout.PageHeader ph)
                    || ph.batchId() != batch.batchId || ph.index() >= batch.size() || batch.done(ph.index())) {
                throw malformed("page header out of place");
            }
            int index = ph.index();
            long length = ph.lengthBytes();
            AuthorizeRequest request = batch.requests.get(index);
            long waitNanos = owner.limits.budgetWait().toNanos();
            if (!inflight.acquire(length, waitNanos)) {
                busy(s, batch, index, length);
                return;
            }
            if (!owner.inflight.acquire(length, waitNanos)) {
                inflight.release(length);
                busy(s, batch, index, length);
                return;
            }
            try {
                AuthorizeResult.Granted grant = new AuthorizeResult.Granted(ph.ticketId(), request.sourceIncarnation(),
                        request.key(), ph.lengthBytes(), 0);
                Optional<PayloadSink> taken;
                try {
                    taken = batch.receivers.get(index).onGrant(grant);
                } catch (RuntimeException e) {
                    // a sink must not throw (PeerReader's never does): the page is declined, the connection kept
                    UnexpectedErrors.record(Layer.TRANSPORT, "BulkPeerPool.receivePage", "a declined page (a miss)", e);
                    taken = Optional.empty();
                }
                if (taken.isEmpty()) {
                    skip(s, length + BulkLayout.TRAILER_BYTES);
                    answer(batch, index, new FetchOutcome.Declined(grant, false));
                    return;
                }
                PayloadSink sink = taken.get();
                current.set(batch, index, grant);
                boolean accepted = receivePayload(s, sink, length);
                trailer.clear();
                s.readFully(trailer);
                int crc = trailer.flip().getInt();
                current.clear();
                if (accepted) {
                    sink.onTrailer(crc);
                    owner.pagesReceived.increment();
                    owner.bytesReceived.increment(length);
                }
                answer(batch, index, new FetchOutcome.Streamed(grant, accepted ? TransferEnd.COMPLETED : TransferEnd.BROKEN, false));
            } finally {
                owner.inflight.release(length);
                inflight.release(length);
            }
        }

        /** Payload into the sink's slot (or through {@code onChunk}); after a rejected piece the rest is skipped. */
        private boolean receivePayload(BulkSocket s, PayloadSink sink, long length) throws IOException {
            Optional<MemorySegment> target = sink.target().filter(t -> t.byteSize() == length);
            boolean accepted = true;
            for (long offset = 0; offset < length; ) {
                int n = (int) Math.min(PIECE_BYTES, length - offset);
                if (!accepted) {
                    skip(s, n);
                } else if (target.isPresent()) {
                    s.readFully(target.get().asSlice(offset, n).asByteBuffer());
                    accepted = sink.onWritten(offset, n);
                } else {
                    ByteBuffer b = scratch().clear().limit(n);
                    s.readFully(b);
                    accepted = sink.onChunk(offset, b.flip());
                }
                offset += n;
            }
            return accepted;
        }

        private void busy(BulkSocket s, BulkBatch batch, int index, long length) throws IOException {
            owner.pagesBusy.increment();
            skip(s, length + BulkLayout.TRAILER_BYTES);
            answer(batch, index, new FetchOutcome.Rejected(Rejection.SOURCE_BUSY));
        }

        private void skip(BulkSocket s, long bytes) throws IOException {
            for (long left = bytes; left > 0; ) {
                ByteBuffer b = scratch().clear().limit((int) Math.min(PIECE_BYTES, left));
                s.readFully(b);
                left -= b.position();
            }
        }

        private ByteBuffer scratch() {
            if (scratch == null) scratch = ByteBuffer.allocateDirect(PIECE_BYTES);
            return scratch;
        }
    }

    /** The page whose payload is being read, so a failure can end it as a broken stream. */
    private static final class Current {
        private BulkBatch batch;
        private int index;
        private AuthorizeResult.Granted grant;

        void set(BulkBatch batch, int index, AuthorizeResult.Granted grant) {
            this.batch = batch;
            this.index = index;
            this.grant = grant;
        }

        void clear() {
            batch = null;
        }

        void fail() {
            if (batch != null) batch.complete(index, new FetchOutcome.Streamed(grant, TransferEnd.BROKEN, false));
            batch = null;
        }
    }
}
