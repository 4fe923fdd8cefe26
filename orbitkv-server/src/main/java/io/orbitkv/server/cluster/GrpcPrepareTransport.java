package io.orbitkv.server.cluster;

import com.google.common.util.concurrent.FutureCallback;
import com.google.common.util.concurrent.Futures;
import com.google.common.util.concurrent.MoreExecutors;
import com.google.protobuf.ByteString;
import io.orbitkv.router.daemon.PrepareTransport;
import io.orbitkv.server.cluster.proto.PrepareGroup;
import io.orbitkv.server.cluster.proto.PrepareKeyForm;
import io.orbitkv.server.cluster.proto.PrepareReply;
import io.orbitkv.server.cluster.proto.PrepareRequest;
import io.orbitkv.server.cluster.proto.PreparationGrpc;
import java.util.Locale;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

/**
 * The router's {@link PrepareTransport}: {@code Preparation.Prepare} on the shared authenticated
 * channel to the Manager's cluster endpoint ({@link ClusterChannels}: cluster token, mutual TLS
 * when configured), with a {@value #DEADLINE_MILLIS} ms deadline. Owns its channels.
 *
 * <p>Thread model: thread-safe and non-blocking; the future completes on the channel's event loop
 * with the outcome's name in lower case, or exceptionally (a refused, unreachable or timed-out call).
 */
public final class GrpcPrepareTransport implements PrepareTransport {

    /** How long one remote prepare may take (planning is a few index lookups). */
    static final long DEADLINE_MILLIS = 2_000;

    private final ClusterChannels channels;

    public GrpcPrepareTransport(ClusterChannels channels) {
        this.channels = channels;
    }

    @Override
    public CompletableFuture<String> prepare(String endpoint, Demand demand) {
        PrepareGroup.Builder g = PrepareGroup.newBuilder().setGroupId(demand.groupId())
                .setForm(demand.stateKeys() ? PrepareKeyForm.STATE_KEY : PrepareKeyForm.BLOCK_HASH);
        for (byte[] p : demand.pages()) g.addPages(ByteString.copyFrom(p));
        PrepareRequest request = PrepareRequest.newBuilder().setNamespaceDigest(ByteString.copyFrom(demand.namespaceDigest()))
                .addGroups(g).setPromptTokens(demand.promptTokens()).setFirstUseMillis(demand.firstUseMillis())
                .setPriority(demand.priority()).build();
        CompletableFuture<String> out = new CompletableFuture<>();
        var channel = channels.tryChannel(endpoint);
        if (channel.isEmpty()) return CompletableFuture.failedFuture(new IllegalStateException("the router is closing"));
        Futures.addCallback(PreparationGrpc.newFutureStub(channel.get()).withDeadlineAfter(DEADLINE_MILLIS, TimeUnit.MILLISECONDS)
                .prepare(request), new FutureCallback<PrepareReply>() {
                    @Override
                    public void onSuccess(PrepareReply reply) {
                        out.complete(reply.getOutcome().name().toLowerCase(Locale.ROOT));
                    }

                    @Override
                    public void onFailure(Throwable t) {
                        out.completeExceptionally(t);
                    }
                }, MoreExecutors.directExecutor());
        return out;
    }

    @Override
    public void close() {
        channels.close();
    }
}
