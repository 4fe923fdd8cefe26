package io.orbitkv.server.cluster;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.StreamObserver;
import io.orbitkv.server.cluster.proto.ClusterInfoGrpc;
import io.orbitkv.server.cluster.proto.HelloReply;
import io.orbitkv.server.cluster.proto.HelloRequest;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/** Which thread a hosted service's handler runs on, and that direct services stay authenticated. */
class NonBlockingServiceTest {

    static final ClusterSecurity RIGHT = new ClusterSecurity("orbit-a",
            "0123456789abcdef-secret".getBytes(StandardCharsets.UTF_8), Optional.empty());

    /** Answers with the name of the handler's thread and whether it is virtual. */
    static class ThreadReporter extends ClusterInfoGrpc.ClusterInfoImplBase {
        @Override
        public void hello(HelloRequest request, StreamObserver<HelloReply> out) {
            Thread t = Thread.currentThread();
            out.onNext(HelloReply.newBuilder().setNodeId((t.isVirtual() ? "virtual:" : "platform:") + t.getName()).build());
            out.onCompleted();
        }
    }

    static final class DirectThreadReporter extends ThreadReporter implements NonBlockingService {
    }

    static String handlerThread(ThreadReporter service, ClusterSecurity as) throws Exception {
        try (ClusterRpcServer server = ClusterRpcServer.start(new InetSocketAddress("127.0.0.1", 0), RIGHT, List.of(service));
             ClusterChannels channels = new ClusterChannels(as)) {
            return ClusterInfoGrpc.newBlockingStub(channels.channel("127.0.0.1:" + server.address().getPort()))
                    .withDeadlineAfter(5, TimeUnit.SECONDS).hello(HelloRequest.getDefaultInstance()).getNodeId();
        }
    }

    @Test
    void ordinaryServicesRunOnVirtualThreads() throws Exception {
        assertThat(handlerThread(new ThreadReporter(), RIGHT)).startsWith("virtual:");
    }

    @Test
    void nonBlockingServicesRunOnTheNettyEventLoop() throws Exception {
        assertThat(handlerThread(new DirectThreadReporter(), RIGHT)).startsWith("platform:").contains("worker"); // a Netty event loop thread
    }

    @Test
    void nonBlockingServicesAreStillAuthenticated() {
        ClusterSecurity wrong = new ClusterSecurity("orbit-a", "0123456789abcdef-secreT".getBytes(StandardCharsets.UTF_8),
                Optional.empty());
        assertThatThrownBy(() -> handlerThread(new DirectThreadReporter(), wrong))
                .isInstanceOfSatisfying(StatusRuntimeException.class,
                        e -> assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.UNAUTHENTICATED));
    }
}
