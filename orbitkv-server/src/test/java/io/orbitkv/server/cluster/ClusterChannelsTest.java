package io.orbitkv.server.cluster;

import static org.assertj.core.api.Assertions.assertThat;

import com.google.common.util.concurrent.ListenableFuture;
import io.grpc.Context;
import io.orbitkv.server.cluster.proto.ClusterInfoGrpc;
import io.orbitkv.server.cluster.proto.HelloReply;
import io.orbitkv.server.cluster.proto.HelloRequest;
import java.net.InetSocketAddress;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * A call on a cluster channel outlives the server call it was started under: a remote prepare
 * answers its caller and goes on reading peers, whose calls must not be cancelled with it.
 */
class ClusterChannelsTest {

    @Test
    void aCallStartedUnderACancelledCallersContextStillCompletes() throws Exception {
        try (ClusterRpcServer server = ClusterRpcServer.start(new InetSocketAddress("127.0.0.1", 0), ClusterAuthTest.RIGHT,
                List.of(new ClusterInfoService("node-a", 7, keys -> CompletableFuture.completedFuture(Map.of()))));
             ClusterChannels channels = new ClusterChannels(ClusterAuthTest.RIGHT)) {
            String endpoint = "127.0.0.1:" + server.address().getPort();
            // what a server handler's context is once its call completed
            Context.CancellableContext answered = Context.current().withCancellation();
            answered.cancel(null);
            // the call is created inside the cancelled context, as a handler's continuation would
            ListenableFuture<HelloReply> reply = answered.call(() -> ClusterInfoGrpc.newFutureStub(channels.channel(endpoint))
                    .withDeadlineAfter(5, TimeUnit.SECONDS).hello(HelloRequest.newBuilder().setFromNode("test").build()));
            assertThat(reply.get(10, TimeUnit.SECONDS).getNodeId()).isEqualTo("node-a");
        }
    }
}
