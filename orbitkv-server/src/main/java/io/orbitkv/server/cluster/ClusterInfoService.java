package io.orbitkv.server.cluster;

import io.grpc.Status;
import io.grpc.stub.StreamObserver;
import io.orbitkv.core.catalog.KeyLocation;
import io.orbitkv.server.cluster.proto.ClusterInfoGrpc;
import io.orbitkv.server.cluster.proto.HelloReply;
import io.orbitkv.server.cluster.proto.HelloRequest;
import io.orbitkv.server.cluster.proto.LookupReply;
import io.orbitkv.server.cluster.proto.LookupRequest;
import io.orbitkv.server.cluster.proto.ProveReply;
import io.orbitkv.server.cluster.proto.ProveRequest;
import io.orbitkv.state.StateKey;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;
import java.util.function.Function;

/**
 * {@code ClusterInfo}: {@code Hello} answers this node's id and incarnation, so a peer can check
 * that the endpoint its membership view names is the incarnation it expects; {@code Locate} runs
 * a catalog lookup through this node's own view and catalog (operators and process-level tests
 * ask one node where keys are, as a query planner on it would); {@code Prove} answers a member's
 * credential proof ({@link CredentialProof}). Stateless, thread-safe.
 */
public final class ClusterInfoService extends ClusterInfoGrpc.ClusterInfoImplBase {

    private final String nodeId;
    private final long incarnation;
    private final Function<List<StateKey>, CompletableFuture<Map<StateKey, KeyLocation>>> locate;
    private final CredentialProof proof;

    /** Without credential proofs: {@code Prove} answers UNIMPLEMENTED (tests of the other calls). */
    public ClusterInfoService(String nodeId, long incarnation,
                              Function<List<StateKey>, CompletableFuture<Map<StateKey, KeyLocation>>> locate) {
        this(nodeId, incarnation, locate, null);
    }

    public ClusterInfoService(String nodeId, long incarnation,
                              Function<List<StateKey>, CompletableFuture<Map<StateKey, KeyLocation>>> locate,
                              CredentialProof proof) {
        this.nodeId = Objects.requireNonNull(nodeId, "nodeId");
        this.incarnation = incarnation;
        this.locate = Objects.requireNonNull(locate, "locate");
        this.proof = proof;
    }

    @Override
    public void prove(ProveRequest request, StreamObserver<ProveReply> response) {
        if (proof == null) {
            response.onError(Status.UNIMPLEMENTED.withDescription("this node proves no credential").asRuntimeException());
            return;
        }
        int n = request.getNonce().size();
        if (n < CredentialProof.NONCE_BYTES || n > CredentialProof.MAX_NONCE_BYTES) {
            response.onError(Status.INVALID_ARGUMENT.withDescription("nonce must be " + CredentialProof.NONCE_BYTES + ".."
                    + CredentialProof.MAX_NONCE_BYTES + " bytes").asRuntimeException());
            return;
        }
        response.onNext(ProveReply.newBuilder().setNodeId(nodeId).setIncarnation(incarnation)
                .setMac(com.google.protobuf.ByteString.copyFrom(proof.mac(request.getNonce().toByteArray(), nodeId, incarnation)))
                .build());
        response.onCompleted();
    }

    @Override
    public void hello(HelloRequest request, StreamObserver<HelloReply> response) {
        response.onNext(HelloReply.newBuilder().setNodeId(nodeId).setIncarnation(incarnation).build());
        response.onCompleted();
    }

    @Override
    public void locate(LookupRequest request, StreamObserver<LookupReply> response) {
        List<StateKey> keys = new ArrayList<>(request.getKeysCount());
        try {
            if (request.getKeysCount() > CatalogService.MAX_LOOKUP_KEYS) throw new IllegalArgumentException("too many keys");
            request.getKeysList().forEach(k -> keys.add(CatalogCodec.key(k)));
        } catch (IllegalArgumentException e) {
            response.onError(Status.INVALID_ARGUMENT.withDescription(e.getMessage()).asRuntimeException());
            return;
        }
        locate.apply(keys).whenComplete((found, failure) -> {
            if (failure != null) {
                response.onError(Status.INTERNAL.withDescription(String.valueOf(failure)).asRuntimeException());
                return;
            }
            LookupReply.Builder reply = LookupReply.newBuilder().setOwnerIncarnation(incarnation);
            for (StateKey k : keys) reply.addResults(CatalogCodec.result(found.get(k)));
            response.onNext(reply.build());
            response.onCompleted();
        });
    }
}
