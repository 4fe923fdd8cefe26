package io.orbitkv.server.cluster;

import io.grpc.stub.StreamObserver;
import io.orbitkv.server.cluster.proto.ClusterInfoGrpc;
import io.orbitkv.server.cluster.proto.HelloReply;
import io.orbitkv.server.cluster.proto.HelloRequest;
import java.util.Objects;

/**
 * {@code ClusterInfo.Hello}: answers with this node's id and incarnation, so a peer can check that
 * the endpoint its membership view names is the incarnation it expects (and tests can probe a
 * node's cluster endpoint). Stateless and thread-safe.
 */
public final class ClusterInfoService extends ClusterInfoGrpc.ClusterInfoImplBase {

    private final String nodeId;
    private final long incarnation;

    public ClusterInfoService(String nodeId, long incarnation) {
        this.nodeId = Objects.requireNonNull(nodeId, "nodeId");
        this.incarnation = incarnation;
    }

    @Override
    public void hello(HelloRequest request, StreamObserver<HelloReply> response) {
        response.onNext(HelloReply.newBuilder().setNodeId(nodeId).setIncarnation(incarnation).build());
        response.onCompleted();
    }
}
