package io.orbitkv.server.peer.bulk;

import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.Gauge;
import io.micrometer.core.instrument.Meter;
import io.micrometer.core.instrument.MeterRegistry;
import io.micrometer.core.instrument.Tags;
import io.orbitkv.core.log.UnexpectedErrors;
import io.orbitkv.core.log.UnexpectedErrors.Layer;
import io.orbitkv.core.peer.AuthorizeRequest;
import io.orbitkv.core.peer.AuthorizeResult;
import io.orbitkv.core.peer.NodeIncarnation;
import io.orbitkv.core.peer.PayloadSink;
import io.orbitkv.core.peer.PayloadTransport;
import io.orbitkv.core.peer.PeerBoundary;
import io.orbitkv.core.peer.PeerEndpoint;
import io.orbitkv.server.cluster.ClusterSecurity;

import javax.net.ssl.SSLContext;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;

/**
 * {@link PayloadTransport} over the bulk data plane (docs/peer-data-plane.md): {@link #fetch} and
 * {@link #fetchBatch} send the pages of one source as BATCH_REQUESTs on pooled, authenticated
 * connections to the source's data endpoint (one request for a small batch; a batch of 16 pages or
 * more is spread over up to {@code connectionsPerPeer} requests streamed at once, see
 * {@link #parts}), and the pages come back straight into the reserved slots. Authorize, transfer
 * and release (the three-call path) and any source without a data endpoint go to the
 * {@code control} transport (gRPC).
 *
 * <p>Owns one {@link BulkPeerPool} per source incarnation and data address, the Manager-wide
 * in-flight budget and one timer thread, which cuts handshakes that take too long and, every
 * {@link #sweepTickNanos tick}, batches past their deadline (a periodic sweep rather than a timer
 * entry per batch, whose schedule and cancel woke the timer thread for every batch). Borrows the
 * control transport and the endpoint resolver. Thread model: every method is thread-safe and non-blocking (session threads call
 * {@code fetch}; the tick thread calls {@link #onMemberLeft}); outcomes complete on the pools'
 * connection threads, or on the control transport's threads for a fallback.
 *
 * <p>Invariants: no release is ever owed (the source frees each ticket when its page was written
 * or its connection failed); each page's future completes exactly once; in-flight payload bytes
 * stay within {@code inflightBytesPerPeer} per source and {@code inflightBytesPerManager} in all.
 * Error boundary (layer {@code transport}): no call throws for a failure and no future completes
 * exceptionally; routing a batch that throws (a bug) is counted, and the pages it had not handed
 * to a pool are refused UNREACHABLE.
 *
 * <p>Design note: a source that answers no data endpoint (an older build, or the plane disabled)
 * is read over gRPC, page by page, as before; the answer is cached per source incarnation
 * ({@link BulkEndpoints}), so the lookup costs one RPC per peer life, not per batch.
 */
public final class BulkPayloadTransport implements PayloadTransport, AutoCloseable {

    /** Where a source's data plane listens, if it has one. */
    public interface Endpoints {
        /** The data address of {@code source}, or empty (read it over the control transport). Never completes exceptionally. */
        CompletableFuture<Optional<InetSocketAddress>> dataAddress(PeerEndpoint source);

        /** Forgets what was learnt about {@code member}. */
        default void forget(NodeIncarnation member) {
        }
    }

    private record PoolKey(NodeIncarnation node, InetSocketAddress address) {}

    /** Fewest pages a request carries when a batch is spread over several connections ({@link #parts}). */
    static final int MIN_PAGES_PER_REQUEST = 8;

    private static final FetchOutcome UNREACHABLE = new FetchOutcome.Rejected(AuthorizeResult.Rejection.UNREACHABLE);
    private static final String UNREACHABLE_ANSWER = "an unreachable source (a miss)";

    final BulkLimits limits;
    final BulkAuth auth;
    final Optional<SSLContext> tls;
    final MeterRegistry registry;
    final ScheduledExecutorService timer;
    final ByteBudget inflight;
    final AtomicInteger threadIds = new AtomicInteger();
    final AtomicInteger connectionsOpen = new AtomicInteger();
    final Counter authFailures;
    final Counter malformed;
    final Counter batchesRefused;
    final Counter pagesReceived;
    final Counter pagesRefused;
    final Counter pagesBusy;
    final Counter bytesReceived;
    private final Counter batchesSent;
    private final Counter fallbacks;
    private final PayloadTransport control;
    private final Endpoints endpoints;
    private final Map<PoolKey, BulkPeerPool> pools = new ConcurrentHashMap<>();
    private final AtomicLong batchIds = new AtomicLong();
    private final List<Meter> meters = new ArrayList<>();
    private volatile boolean closed;

    /**
     * @throws IOException if the cluster's TLS files cannot be read
     */
    public BulkPayloadTransport(PayloadTransport control, Endpoints endpoints, ClusterSecurity security, BulkLimits limits,
                                MeterRegistry registry) throws IOException {
        this.control = Objects.requireNonNull(control, "control");
        this.endpoints = Objects.requireNonNull(endpoints, "endpoints");
        this.limits = Objects.requireNonNull(limits, "limits");
        this.registry = Objects.requireNonNull(registry, "registry");
        this.auth = new BulkAuth(security);
        this.tls = BulkTls.context(security);
        this.timer = BulkTimer.create("orbitkv-bulk-requester-timer");
        this.inflight = new ByteBudget(limits.inflightBytesPerManager());
        meters.add(inflight.register(registry, "orbitkv.peer.bulk.inflight", Tags.of("scope", "manager"),
                "payload bytes being received (scope: manager = from all sources, peer = from one)"));
        meters.add(Gauge.builder("orbitkv.peer.bulk.connections", connectionsOpen, AtomicInteger::get).tags("side", "requester")
                .description("bulk data plane connections open (side: requester, or source with handshaking ones)").register(registry));
        authFailures = counter("orbitkv.peer.bulk.auth.failures", "side", "requester");
        malformed = counter("orbitkv.peer.bulk.malformed", "side", "requester");
        batchesRefused = counter("orbitkv.peer.bulk.batches", "outcome", "queue_full");
        batchesSent = counter("orbitkv.peer.bulk.batches", "outcome", "queued");
        fallbacks = counter("orbitkv.peer.bulk.batches", "outcome", "control_fallback");
        pagesReceived = counter("orbitkv.peer.bulk.requester.pages", "outcome", "received");
        pagesRefused = counter("orbitkv.peer.bulk.requester.pages", "outcome", "refused");
        pagesBusy = counter("orbitkv.peer.bulk.requester.pages", "outcome", "inflight_full");
        bytesReceived = counter("orbitkv.peer.bulk.bytes", "side", "requester");
        long tick = sweepTickNanos(limits);
        timer.scheduleWithFixedDelay(this::sweep, tick, tick, TimeUnit.NANOSECONDS);
    }

    /** How often batch deadlines are checked: a tenth of the deadline, between 1 ms and 100 ms. */
    static long sweepTickNanos(BulkLimits limits) {
        return Math.clamp(limits.batchDeadline().toNanos() / 10, TimeUnit.MILLISECONDS.toNanos(1),
                TimeUnit.MILLISECONDS.toNanos(100));
    }

    /** Cuts the batches past their deadline; never throws (a throw would end the periodic task). */
    private void sweep() {
        try {
            long now = System.nanoTime();
            for (BulkPeerPool pool : pools.values()) pool.sweep(now);
        } catch (RuntimeException e) {
            UnexpectedErrors.record(Layer.TRANSPORT, "BulkPayloadTransport.sweep", "a deadline checked at the next tick", e);
        }
    }

    private Counter counter(String name, String tag, String value) {
        Counter c = Counter.builder(name).tag(tag, value).description(BulkMeters.description(name)).register(registry);
        meters.add(c);
        return c;
    }

    @Override
    public CompletableFuture<FetchOutcome> fetch(PeerEndpoint source, AuthorizeRequest request, FetchSink receiver) {
        return fetchBatch(source, List.of(request), List.of(receiver)).getFirst();
    }

    @Override
    public List<CompletableFuture<FetchOutcome>> fetchBatch(PeerEndpoint source, List<AuthorizeRequest> requests,
                                                            List<? extends FetchSink> receivers) {
        if (requests.size() != receivers.size()) {
            throw new IllegalArgumentException(requests.size() + " requests, " + receivers.size() + " receivers");
        }
        List<CompletableFuture<FetchOutcome>> out = new ArrayList<>(requests.size());
        for (int i = 0; i < requests.size(); i++) out.add(new CompletableFuture<>());
        if (requests.isEmpty()) return out;
        if (closed) {
            out.forEach(f -> f.complete(UNREACHABLE));
            return out;
        }
        for (AuthorizeRequest r : requests) {
            if (r.sourceIncarnation() != source.node().incarnation() || !r.requester().equals(requests.getFirst().requester())) {
                throw new IllegalArgumentException("one source incarnation and one requester per batch");
            }
        }
        endpoints.dataAddress(source).whenComplete((address, failure) ->
                route(source, requests, receivers, out, failure == null && address != null ? address : Optional.empty()));
        return out;
    }

    /**
     * Hands the pages to {@code address}'s pool, in {@link #parts} batches of consecutive pages, or
     * to the control transport when the source has no data endpoint. Whoever a page was handed to
     * answers it; a throw here (a bug: pools and the control transport answer failures as values)
     * is counted, and the pages not handed yet are refused, so no future is left pending and no page
     * a connection may be writing is answered under it.
     */
    private void route(PeerEndpoint source, List<AuthorizeRequest> requests, List<? extends FetchSink> receivers,
                       List<CompletableFuture<FetchOutcome>> out, Optional<InetSocketAddress> address) {
        int handed = 0;
        try {
            if (address.isEmpty()) {
                fallbacks.increment();
                List<CompletableFuture<FetchOutcome>> viaControl = control.fetchBatch(source, requests, receivers);
                for (; handed < out.size(); handed++) {
                    CompletableFuture<FetchOutcome> page = viaControl.get(handed);
                    PeerBoundary.call(Layer.TRANSPORT, "BulkPayloadTransport.route", UNREACHABLE_ANSWER, UNREACHABLE, () -> page)
                            .thenAccept(out.get(handed)::complete);
                }
                return;
            }
            BulkPeerPool pool = pool(source.node(), address.get());
            int n = requests.size();
            int parts = parts(n, limits);
            for (int part = 0; part < parts; part++) {
                int from = (int) ((long) n * part / parts);
                int to = (int) ((long) n * (part + 1) / parts);
                batchesSent.increment();
                BulkBatch batch = new BulkBatch(batchIds.incrementAndGet(), requests.subList(from, to), receivers.subList(from, to),
                        out.subList(from, to));
                handed = to;
                pool.submit(batch);
            }
        } catch (RuntimeException e) {
            UnexpectedErrors.record(Layer.TRANSPORT, "BulkPayloadTransport.route", UNREACHABLE_ANSWER, e);
            for (int i = handed; i < out.size(); i++) out.get(i).complete(UNREACHABLE);
        }
    }

    /**
     * Requests a batch of {@code pages} goes out as: enough that none names more than
     * {@code maxPagesPerBatch}, and one per connection of the source while each keeps at least
     * {@link #MIN_PAGES_PER_REQUEST} pages, so one query's batch streams over several connections
     * at once (their round trips, checksums and slot commits overlap) while a small batch keeps
     * one request.
     */
    static int parts(int pages, BulkLimits limits) {
        int parallel = Math.min(limits.connectionsPerPeer(), pages / MIN_PAGES_PER_REQUEST);
        return Math.max(1, Math.max(Math.ceilDiv(pages, limits.maxPagesPerBatch()), parallel));
    }

    private BulkPeerPool pool(NodeIncarnation node, InetSocketAddress address) {
        BulkPeerPool pool = pools.computeIfAbsent(new PoolKey(node, address), k -> new BulkPeerPool(this, node, address));
        if (closed) pool.close(); // raced with close(): the batch is refused by the closed pool
        return pool;
    }

    /** Closes the pools of {@code member}: its batches in flight end now as misses. */
    @Override
    public void onMemberLeft(NodeIncarnation member) {
        endpoints.forget(member);
        pools.entrySet().removeIf(e -> {
            if (!e.getKey().node().equals(member)) return false;
            e.getValue().close();
            return true;
        });
    }

    @Override
    public CompletableFuture<AuthorizeResult> authorize(PeerEndpoint source, AuthorizeRequest request) {
        return control.authorize(source, request);
    }

    @Override
    public CompletableFuture<TransferEnd> transfer(PeerEndpoint source, AuthorizeResult.Granted ticket,
                                                   NodeIncarnation requester, PayloadSink sink) {
        return control.transfer(source, ticket, requester, sink);
    }

    @Override
    public CompletableFuture<ReleaseAck> release(PeerEndpoint source, long ticketId, NodeIncarnation requester) {
        return control.release(source, ticketId, requester);
    }

    /** Connections held now, all peers. */
    public int connections() {
        return connectionsOpen.get();
    }

    /** Payload bytes being received now, and the most ever at once. */
    public long inflightBytes() {
        return inflight.used();
    }

    long inflightPeak() {
        return inflight.peak();
    }

    /** Connections that failed the source's authentication (the source's MAC did not match). */
    public long authFailures() {
        return (long) authFailures.count();
    }

    /** Closes every pool (batches in flight end as misses) and the timer. */
    @Override
    public void close() {
        closed = true;
        pools.values().forEach(BulkPeerPool::close);
        pools.clear();
        timer.shutdownNow();
        meters.forEach(registry::remove);
    }
}
