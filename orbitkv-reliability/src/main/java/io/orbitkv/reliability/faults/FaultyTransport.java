package io.orbitkv.reliability.faults;

import io.orbitkv.core.peer.AuthorizeRequest;
import io.orbitkv.core.peer.AuthorizeResult;
import io.orbitkv.core.peer.NodeIncarnation;
import io.orbitkv.core.peer.PayloadSink;
import io.orbitkv.core.peer.PayloadTransport;
import io.orbitkv.core.peer.PeerEndpoint;

import java.nio.ByteBuffer;
import java.util.HashMap;
import java.util.Map;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

/**
 * A lossy, late, damaging network between Managers: decorates the {@link PayloadTransport} the
 * requester's {@link io.orbitkv.core.peer.PeerReader} uses and, per call, injects at most one
 * fault the {@link FaultPlan} draws for it:
 *
 * <ul>
 *   <li><b>drop</b>: the request (or, for authorize and release, its reply) is lost; the call
 *       answers only at the transport's deadline ({@link #DEADLINE_NANOS}), as a gRPC call whose
 *       deadline passed does: UNREACHABLE, BROKEN, FAILED. A lost authorize reply leaves a ticket
 *       at the source that nobody will release: its window must free it.</li>
 *   <li><b>delay</b>: the answer (for a transfer, its start) comes 0.2-3 ms late, from the
 *       transport's timer thread.</li>
 *   <li><b>reset</b>: the stream breaks after one or two of the page's chunks.</li>
 *   <li><b>corruption</b>: one bit of one chunk flips on the way; the source's trailer is
 *       intact, so only the requester's CRC32C check keeps the page from being served.</li>
 * </ul>
 *
 * <p>Also the peer's death mid-read ({@link #dieDuringNextTransfer}): the next transfer stops after
 * its first chunk and runs the death action (the peer stops serving) before it returns BROKEN.
 *
 * <p>Owns its timer thread and the calls it holds (dropped or delayed) until they answer; a
 * member that leaves the view has its held calls answered at once ({@link #onMemberLeft}), as
 * the bulk transport closes its connections. Thread-safe. Decisions are keyed by what a call is
 * about (see {@link FaultPlan#peerCall}); a release is faulted on its first attempt only, so
 * a retry's timing never changes what was injected.
 */
final class FaultyTransport implements PayloadTransport, AutoCloseable {

    /** The transport's deadline for every call (the daemon's are 2 s and 10 s; here a step must stay short). */
    static final long DEADLINE_NANOS = TimeUnit.MILLISECONDS.toNanos(40);

    private final PayloadTransport inner;
    private final FaultPlan plan;
    private final ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor(
            r -> Thread.ofPlatform().daemon().name("faulty-transport").unstarted(r));
    /** Calls answered late or never: what to answer when their member leaves, by call. */
    private final Map<CompletableFuture<?>, Held> held = new ConcurrentHashMap<>();
    /** How many authorizes each (key, medium) had: part of the next one's identity. */
    private final Map<String, Integer> asked = new HashMap<>();
    /** Releases already seen, by (source incarnation, ticket): only the first attempt may fault. */
    private final Map<String, Boolean> released = new ConcurrentHashMap<>();
    private final AtomicReference<Runnable> death = new AtomicReference<>();
    private final AtomicInteger heldCount = new AtomicInteger();

    private record Held(NodeIncarnation member, Runnable answerNow) {}

    FaultyTransport(PayloadTransport inner, FaultPlan plan) {
        this.inner = inner;
        this.plan = plan;
    }

    /** The next transfer stops after its first chunk, runs {@code action} (the peer dies), and breaks. */
    void dieDuringNextTransfer(Runnable action) {
        death.set(action);
    }

    /** Whether a death armed by {@link #dieDuringNextTransfer} has not happened yet. */
    boolean deathArmed() {
        return death.get() != null;
    }

    /** Calls held (dropped or delayed) that have not answered yet; 0 when the network is quiet. */
    int heldCalls() {
        return heldCount.get();
    }

    @Override
    public CompletableFuture<AuthorizeResult> authorize(PeerEndpoint source, AuthorizeRequest request) {
        int n;
        synchronized (asked) {
            n = asked.merge(request.key() + "/" + request.medium(), 1, Integer::sum);
        }
        SplittableRandom r = plan.peerCall(request.key().prefix64() * 31 + request.medium().ordinal() * 1_000_003L + n);
        AuthorizeResult unreachable = new AuthorizeResult.Rejected(AuthorizeResult.Rejection.UNREACHABLE);
        // half the drawn authorizes run clean, so that more calls reach a transfer, where damage is
        if (r == null || r.nextBoolean()) return inner.authorize(source, request);
        return switch (r.nextInt(3)) {
            case 0 -> {
                plan.count(FaultKind.PEER_DROP);
                yield atDeadline(source.node(), unreachable);
            }
            case 1 -> {
                // the source granted (a ticket and its pin), the reply was lost
                plan.count(FaultKind.PEER_DROP);
                CompletableFuture<AuthorizeResult> lost = atDeadline(source.node(), unreachable);
                inner.authorize(source, request);
                yield lost;
            }
            default -> {
                plan.count(FaultKind.PEER_DELAY);
                yield late(source.node(), inner.authorize(source, request), delayNanos(r), unreachable);
            }
        };
    }

    @Override
    public CompletableFuture<TransferEnd> transfer(PeerEndpoint source, AuthorizeResult.Granted ticket,
                                                   NodeIncarnation requester, PayloadSink sink) {
        Runnable dies = death.getAndSet(null);
        if (dies != null) return inner.transfer(source, ticket, requester, new Dying(sink, dies));
        SplittableRandom r = plan.peerCall(source.node().incarnation() * 0x100000001B3L + ticket.ticketId() * 2);
        if (r == null) return inner.transfer(source, ticket, requester, sink);
        // drop and delay one in six each, reset and corruption one in three each
        return switch (r.nextInt(6)) {
            case 0 -> {
                plan.count(FaultKind.PEER_DROP);
                yield atDeadline(source.node(), TransferEnd.BROKEN);
            }
            case 1 -> {
                plan.count(FaultKind.PEER_DELAY);
                CompletableFuture<TransferEnd> out = new CompletableFuture<>();
                hold(out, source.node(), () -> out.complete(TransferEnd.BROKEN));
                timer.schedule(() -> inner.transfer(source, ticket, requester, sink)
                        .whenComplete((end, t) -> answer(out, end != null ? end : TransferEnd.BROKEN)),
                        delayNanos(r), TimeUnit.NANOSECONDS);
                yield out;
            }
            case 2, 3 -> {
                plan.count(FaultKind.PEER_RESET);
                yield inner.transfer(source, ticket, requester, new Resetting(sink, 1 + r.nextInt(2)));
            }
            default -> {
                plan.count(FaultKind.PEER_CORRUPTION);
                yield inner.transfer(source, ticket, requester, new Corrupting(sink, r.nextInt(2), r.nextInt(4096), r.nextInt(8)));
            }
        };
    }

    @Override
    public CompletableFuture<ReleaseAck> release(PeerEndpoint source, long ticketId, NodeIncarnation requester) {
        boolean first = released.putIfAbsent(source.node() + "#" + ticketId, Boolean.TRUE) == null;
        SplittableRandom r = first ? plan.peerCall(source.node().incarnation() * 0x100000001B3L + ticketId * 2 + 1) : null;
        if (r == null) return inner.release(source, ticketId, requester);
        plan.count(FaultKind.PEER_DROP);
        CompletableFuture<ReleaseAck> lost = atDeadline(source.node(), ReleaseAck.FAILED);
        if (r.nextBoolean()) inner.release(source, ticketId, requester); // the source freed it; the ack was lost
        return lost;
    }

    @Override
    public void onMemberLeft(NodeIncarnation member) {
        for (Map.Entry<CompletableFuture<?>, Held> e : held.entrySet()) {
            if (e.getValue().member().equals(member)) e.getValue().answerNow().run();
        }
        inner.onMemberLeft(member);
    }

    private static long delayNanos(SplittableRandom r) {
        return 200_000 + r.nextInt(2_800_000);
    }

    /** A call nobody answers: it ends with {@code failure} at the deadline (or when its member leaves). */
    private <T> CompletableFuture<T> atDeadline(NodeIncarnation member, T failure) {
        CompletableFuture<T> out = new CompletableFuture<>();
        hold(out, member, () -> answer(out, failure));
        timer.schedule(() -> answer(out, failure), DEADLINE_NANOS, TimeUnit.NANOSECONDS);
        return out;
    }

    /** {@code answer} passed on {@code delayNanos} late; {@code failure} if the member leaves first. */
    private <T> CompletableFuture<T> late(NodeIncarnation member, CompletableFuture<T> answer, long delayNanos, T failure) {
        CompletableFuture<T> out = new CompletableFuture<>();
        hold(out, member, () -> answer(out, failure));
        answer.whenComplete((v, t) -> timer.schedule(() -> answer(out, v != null ? v : failure), delayNanos, TimeUnit.NANOSECONDS));
        return out;
    }

    private void hold(CompletableFuture<?> call, NodeIncarnation member, Runnable answerNow) {
        heldCount.incrementAndGet();
        held.put(call, new Held(member, answerNow));
    }

    /** Answers a held call once; later answers (the deadline after a member left) do nothing. */
    private <T> void answer(CompletableFuture<T> call, T value) {
        if (held.remove(call) == null) return;
        heldCount.decrementAndGet();
        call.complete(value);
    }

    @Override
    public void close() {
        timer.shutdownNow();
    }

    /** Passes the first {@code chunks} chunks on, then takes no more: the stream breaks. */
    private static final class Resetting extends Forwarding {
        private int left;

        Resetting(PayloadSink sink, int chunks) {
            super(sink);
            this.left = chunks;
        }

        @Override
        public boolean onChunk(long offsetBytes, ByteBuffer chunk) {
            return left-- > 0 && super.onChunk(offsetBytes, chunk);
        }
    }

    /** Flips bit {@code bit} of byte {@code at} (within the chunk) of chunk {@code index}. */
    private static final class Corrupting extends Forwarding {
        private final int index;
        private final int at;
        private final int bit;
        private int seen;

        Corrupting(PayloadSink sink, int index, int at, int bit) {
            super(sink);
            this.index = index;
            this.at = at;
            this.bit = bit;
        }

        @Override
        public boolean onChunk(long offsetBytes, ByteBuffer chunk) {
            if (seen++ == index && chunk.remaining() > 0) {
                int p = chunk.position() + at % chunk.remaining();
                chunk.put(p, (byte) (chunk.get(p) ^ (1 << bit)));
            }
            return super.onChunk(offsetBytes, chunk);
        }
    }

    /** Passes the first chunk on, then the peer dies: {@code action} runs and the stream breaks. */
    private static final class Dying extends Forwarding {
        private final Runnable action;
        private boolean first = true;

        Dying(PayloadSink sink, Runnable action) {
            super(sink);
            this.action = action;
        }

        @Override
        public boolean onChunk(long offsetBytes, ByteBuffer chunk) {
            if (first) {
                first = false;
                return super.onChunk(offsetBytes, chunk);
            }
            action.run();
            return false;
        }
    }

    /**
     * A sink that passes chunks and the trailer on. It offers no target slot for direct writes
     * (the interface's default), so every byte goes through {@link #onChunk}, where the faults act.
     */
    private static class Forwarding implements PayloadSink {
        private final PayloadSink sink;

        Forwarding(PayloadSink sink) {
            this.sink = sink;
        }

        @Override
        public boolean onChunk(long offsetBytes, ByteBuffer chunk) {
            return sink.onChunk(offsetBytes, chunk);
        }

        @Override
        public void onTrailer(int crc32c) {
            sink.onTrailer(crc32c);
        }
    }
}
