package io.orbitkv.server.cluster;

import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import io.micrometer.core.instrument.Counter;
import io.micrometer.core.instrument.MeterRegistry;
import io.orbitkv.core.engine.ManagerCore;
import io.orbitkv.core.engine.RemotePrepares;
import io.orbitkv.server.cluster.proto.PrepareGroup;
import io.orbitkv.server.cluster.proto.PrepareReply;
import io.orbitkv.server.cluster.proto.PrepareRequest;
import io.orbitkv.server.cluster.proto.PreparationGrpc;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.protocol.Hashes;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.Request;

import java.util.ArrayList;
import java.util.EnumMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Semaphore;

/**
 * {@code Preparation}: a remote PREPARE (docs/cluster.md "Remote prepare") turned into a
 * {@link RemotePrepares#prepare} call of this Manager's core. The cluster server has already
 * checked the caller's cluster credentials; this checks the request's shape (a 32-byte digest,
 * known key forms, at most {@code maxPagesPerQuery} pages) and answers INVALID_ARGUMENT for a
 * request that fails it, UNAVAILABLE until the Manager's core is up.
 *
 * <p>Thread model: thread-safe; handlers run on the cluster server's executor (planning takes the
 * owner's lock and may read the SSD index, so this is not a {@link NonBlockingService}); with
 * peers the answer comes after a catalog lookup, from a callback thread. At most
 * {@value #MAX_CALLS} calls are planned or looking up at once; the rest are answered
 * RESOURCE_EXHAUSTED.
 * Every refusal before the core is counted in {@code orbitkv.cluster.prepare.rejected}.
 */
public final class PrepareService extends PreparationGrpc.PreparationImplBase {

    /** Remote prepares being planned at once, at most. */
    public static final int MAX_CALLS = 64;

    /** Why a call was answered before reaching the core. */
    enum Rejection { INVALID, CALLS, STARTING }

    private final Semaphore calls = new Semaphore(MAX_CALLS);
    private final Map<Rejection, Counter> rejected = new EnumMap<>(Rejection.class);
    private volatile ManagerCore core;

    public PrepareService(MeterRegistry registry) {
        for (Rejection r : Rejection.values()) {
            rejected.put(r, Counter.builder("orbitkv.cluster.prepare.rejected").tag("reason", r.name().toLowerCase(Locale.ROOT))
                    .description("remote prepares answered before planning: invalid, too many calls, Manager starting")
                    .register(registry));
        }
    }

    /** The Manager's core is up: calls from now on are planned by it. */
    public void serve(ManagerCore managerCore) {
        this.core = managerCore;
    }

    @Override
    public void prepare(PrepareRequest request, StreamObserver<PrepareReply> response) {
        ManagerCore c = core;
        if (c == null) {
            reject(response, Rejection.STARTING, Status.UNAVAILABLE, "the Manager is starting");
            return;
        }
        if (!calls.tryAcquire()) {
            reject(response, Rejection.CALLS, Status.RESOURCE_EXHAUSTED, MAX_CALLS + " remote prepares in progress");
            return;
        }
        CompletableFuture<RemotePrepares.Answer> answer;
        try {
            answer = plan(c, request);
        } catch (IllegalArgumentException e) {
            calls.release();
            reject(response, Rejection.INVALID, Status.INVALID_ARGUMENT, e.getMessage());
            return;
        } catch (RuntimeException e) {
            calls.release();
            throw e;
        }
        answer.whenComplete((a, failure) -> {
            calls.release();
            if (failure != null) {
                response.onError(Status.INTERNAL.withDescription(String.valueOf(failure)).asRuntimeException());
            } else if (a.outcome() == RemotePrepares.Outcome.INVALID) {
                response.onError(Status.INVALID_ARGUMENT.withDescription(a.detail()).asRuntimeException());
            } else {
                response.onNext(PrepareReply.newBuilder().setOutcome(outcome(a.outcome()))
                        .setPagesToStage(a.pagesToStage()).setPagesResident(a.pagesResident()).build());
                response.onCompleted();
            }
        });
    }

    private static CompletableFuture<RemotePrepares.Answer> plan(ManagerCore c, PrepareRequest r) {
        if (r.getNamespaceDigest().size() != NamespaceDigest.BYTES) {
            throw new IllegalArgumentException("namespace_digest must be " + NamespaceDigest.BYTES + " bytes");
        }
        int maxPages = c.limits().maxPagesPerQuery();
        int pages = 0;
        List<Request.QueryGroup> groups = new ArrayList<>(r.getGroupsCount());
        for (PrepareGroup g : r.getGroupsList()) {
            pages += g.getPagesCount();
            if (pages > maxPages) throw new IllegalArgumentException("more than maxPagesPerQuery " + maxPages + " pages");
            KeyForm form = switch (g.getForm()) {
                case BLOCK_HASH -> KeyForm.BLOCK_HASH;
                case STATE_KEY -> KeyForm.STATE_KEY;
                default -> throw new IllegalArgumentException("group " + g.getGroupId() + ": key form must be BLOCK_HASH or STATE_KEY");
            };
            List<byte[]> hashes = new ArrayList<>(g.getPagesCount());
            g.getPagesList().forEach(b -> hashes.add(b.toByteArray()));
            groups.add(new Request.QueryGroup(g.getGroupId(), form, Hashes.of(hashes)));
        }
        return c.remotePrepares().prepare(NamespaceDigest.ofBytes(r.getNamespaceDigest().toByteArray()),
                r.getFirstUseMillis(), r.getPriority(), r.getPromptTokens(), groups);
    }

    private static PrepareReply.Outcome outcome(RemotePrepares.Outcome o) {
        return switch (o) {
            case ACCEPTED -> PrepareReply.Outcome.ACCEPTED;
            case TRIMMED -> PrepareReply.Outcome.TRIMMED;
            case REFUSED -> PrepareReply.Outcome.REFUSED;
            case NOT_REGISTERED -> PrepareReply.Outcome.NOT_REGISTERED;
            case BUSY -> PrepareReply.Outcome.BUSY;
            case INVALID -> throw new IllegalStateException("answered as INVALID_ARGUMENT");
        };
    }

    private void reject(StreamObserver<PrepareReply> response, Rejection why, Status status, String message) {
        rejected.get(why).increment();
        response.onError(status.withDescription(message).asRuntimeException());
    }
}
