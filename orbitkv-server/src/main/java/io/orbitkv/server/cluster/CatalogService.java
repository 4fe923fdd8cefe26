package io.orbitkv.server.cluster;

import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import io.orbitkv.core.catalog.CatalogTransport;
import io.orbitkv.core.catalog.KeyLocation;
import io.orbitkv.core.catalog.Member;
import io.orbitkv.core.catalog.ShardState;
import io.orbitkv.server.cluster.proto.CatalogGrpc;
import io.orbitkv.server.cluster.proto.LiveMember;
import io.orbitkv.server.cluster.proto.LookupReply;
import io.orbitkv.server.cluster.proto.LookupRequest;
import io.orbitkv.server.cluster.proto.PushReply;
import io.orbitkv.server.cluster.proto.PushRequest;
import io.orbitkv.state.StateKey;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * The catalog's gRPC face on a shard owner: {@code Push} applies a source's batch to the
 * {@link ShardState}, {@code Lookup} answers keys against the requester's live view. Stateless
 * apart from the borrowed shard state (which it does not own); thread-safe through it.
 * Malformed requests are answered {@code INVALID_ARGUMENT}, never applied in part.
 *
 * <p>A {@link NonBlockingService}: both handlers decode, take the shard's monitor for O(batch)
 * work that never waits on I/O (a push carries at most the publisher's 1,024 deltas, a lookup
 * at most {@link #MAX_LOOKUP_KEYS} keys) and answer, so they run on the event loop that read the
 * request. A first-query peer hit waits for this answer; the hop to a virtual thread was one
 * more wake-up on the owner per lookup.
 */
public final class CatalogService extends CatalogGrpc.CatalogImplBase implements NonBlockingService {

    /** Keys one lookup may carry (a 1,024-page query fits with room to spare). */
    public static final int MAX_LOOKUP_KEYS = CatalogTransport.MAX_LOOKUP_KEYS;

    private final ShardState shard;

    public CatalogService(ShardState shard) {
        this.shard = Objects.requireNonNull(shard, "shard");
    }

    @Override
    public void push(PushRequest request, StreamObserver<PushReply> response) {
        PushReply reply;
        try {
            reply = CatalogCodec.reply(shard.apply(CatalogCodec.batch(request)));
        } catch (IllegalArgumentException e) {
            response.onError(Status.INVALID_ARGUMENT.withDescription(e.getMessage()).asRuntimeException());
            return;
        }
        response.onNext(reply);
        response.onCompleted();
    }

    @Override
    public void lookup(LookupRequest request, StreamObserver<LookupReply> response) {
        List<KeyLocation> answers;
        try {
            if (request.getKeysCount() > MAX_LOOKUP_KEYS) throw new IllegalArgumentException("more than " + MAX_LOOKUP_KEYS + " keys");
            List<StateKey> keys = new ArrayList<>(request.getKeysCount());
            for (var k : request.getKeysList()) keys.add(CatalogCodec.key(k));
            List<Member> live = new ArrayList<>(request.getLiveCount());
            for (LiveMember m : request.getLiveList()) live.add(CatalogCodec.live(m));
            answers = shard.lookup(keys, live, request.getViewDigest());
        } catch (IllegalArgumentException e) {
            response.onError(Status.INVALID_ARGUMENT.withDescription(e.getMessage()).asRuntimeException());
            return;
        }
        LookupReply.Builder reply = LookupReply.newBuilder().setOwnerIncarnation(shard.ownerIncarnation());
        for (KeyLocation loc : answers) reply.addResults(CatalogCodec.result(loc));
        response.onNext(reply.build());
        response.onCompleted();
    }
}
