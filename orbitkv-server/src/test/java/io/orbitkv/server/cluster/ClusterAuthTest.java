package io.orbitkv.server.cluster;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.orbitkv.server.cluster.proto.ClusterInfoGrpc;
import io.orbitkv.server.cluster.proto.HelloReply;
import io.orbitkv.server.cluster.proto.HelloRequest;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;

/** A real loopback gRPC server with cluster authentication: who gets in and who is refused. */
class ClusterAuthTest {

    static final ClusterSecurity RIGHT = security("orbit-a", "0123456789abcdef-secret");

    ClusterRpcServer server;
    String endpoint;

    static ClusterSecurity security(String cluster, String token) {
        return new ClusterSecurity(cluster, token.getBytes(StandardCharsets.UTF_8), Optional.empty());
    }

    @BeforeEach
    void start() throws Exception {
        server = ClusterRpcServer.start(new InetSocketAddress("127.0.0.1", 0), RIGHT,
                List.of(new ClusterInfoService("node-a", 7, keys -> java.util.concurrent.CompletableFuture.completedFuture(java.util.Map.of()))));
        endpoint = "127.0.0.1:" + server.address().getPort();
    }

    @AfterEach
    void stop() {
        server.close();
    }

    private HelloReply helloWith(ClusterSecurity as) throws Exception {
        try (ClusterChannels channels = new ClusterChannels(as)) {
            return ClusterInfoGrpc.newBlockingStub(channels.channel(endpoint)).withDeadlineAfter(5, TimeUnit.SECONDS)
                    .hello(HelloRequest.newBuilder().setFromNode("test").build());
        }
    }

    @Test
    void sameClusterAndTokenIsServed() throws Exception {
        HelloReply reply = helloWith(RIGHT);
        assertThat(reply.getNodeId()).isEqualTo("node-a");
        assertThat(reply.getIncarnation()).isEqualTo(7);
    }

    @Test
    void callWithoutCredentialsIsUnauthenticated() {
        ManagedChannel bare = Grpc.newChannelBuilder(endpoint, InsecureChannelCredentials.create()).build();
        try {
            assertThatThrownBy(() -> ClusterInfoGrpc.newBlockingStub(bare).withDeadlineAfter(5, TimeUnit.SECONDS)
                    .hello(HelloRequest.getDefaultInstance()))
                    .isInstanceOfSatisfying(StatusRuntimeException.class, e -> {
                        assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.UNAUTHENTICATED);
                        assertThat(e.getStatus().getDescription()).isEqualTo("no cluster id");
                    });
        } finally {
            bare.shutdownNow();
        }
    }

    @Test
    void wrongTokenIsUnauthenticated() {
        assertThatThrownBy(() -> helloWith(security("orbit-a", "0123456789abcdef-secreT")))
                .isInstanceOfSatisfying(StatusRuntimeException.class, e -> {
                    assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.UNAUTHENTICATED);
                    assertThat(e.getStatus().getDescription()).isEqualTo("bad cluster token");
                });
    }

    @Test
    void peerOfAnotherClusterIsRejectedEvenWithTheToken() {
        assertThatThrownBy(() -> helloWith(security("orbit-b", "0123456789abcdef-secret")))
                .isInstanceOfSatisfying(StatusRuntimeException.class, e -> {
                    assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.UNAUTHENTICATED);
                    assertThat(e.getStatus().getDescription()).startsWith("wrong cluster");
                });
    }

    @Test
    void shortTokensAndBadClusterIdsAreConfigurationErrors() {
        assertThatThrownBy(() -> security("orbit-a", "short")).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> security("bad id!", "0123456789abcdef-secret")).isInstanceOf(IllegalArgumentException.class);
        assertThat(RIGHT.toString()).doesNotContain("secret");
    }
}
