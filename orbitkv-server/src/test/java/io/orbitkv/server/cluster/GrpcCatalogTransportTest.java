package io.orbitkv.server.cluster;

import static org.assertj.core.api.Assertions.assertThat;

import io.grpc.stub.StreamObserver;
import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.catalog.CatalogLookups;
import io.orbitkv.core.catalog.KeyLocation;
import io.orbitkv.core.catalog.Member;
import io.orbitkv.core.catalog.MembershipView;
import io.orbitkv.server.cluster.proto.CatalogGrpc;
import io.orbitkv.server.cluster.proto.LookupReply;
import io.orbitkv.server.cluster.proto.LookupRequest;
import io.orbitkv.state.StateKey;
import java.net.InetSocketAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;

/**
 * A lookup over gRPC of an owner that reads the call and never answers: every key ends Unknown
 * (TIMED_OUT) at the lookup's deadline, never Absent, and no call stays counted in flight.
 */
class GrpcCatalogTransportTest {

    /** An owner that reads every lookup and never answers it. */
    static final class SilentCatalog extends CatalogGrpc.CatalogImplBase {
        final List<StreamObserver<LookupReply>> unanswered = new ArrayList<>();

        @Override
        public synchronized void lookup(LookupRequest request, StreamObserver<LookupReply> response) {
            unanswered.add(response);
        }
    }

    @Test
    void aLookupOfAnOwnerThatNeverAnswersEndsUnknownAtItsDeadline() throws Exception {
        SilentCatalog silent = new SilentCatalog();
        SimpleMeterRegistry registry = new SimpleMeterRegistry();
        try (ClusterRpcServer server = ClusterRpcServer.start(new InetSocketAddress("127.0.0.1", 0), ClusterAuthTest.RIGHT,
                List.of(silent));
             ClusterChannels channels = new ClusterChannels(ClusterAuthTest.RIGHT)) {
            GrpcCatalogTransport transport = new GrpcCatalogTransport(channels);
            MembershipView view = MembershipView.valid(List.of(new Member("silent", "127.0.0.1:" + server.address().getPort(), 1)), 1);
            CatalogLookups lookups = new CatalogLookups(() -> view, transport, Duration.ofMinutes(1), 100, registry);
            List<StateKey> keys = List.of(StateKey.ofBytes(new byte[StateKey.BYTES]), StateKey.ofBytes(filled((byte) 7)));

            long t0 = System.nanoTime();
            Map<StateKey, KeyLocation> got = lookups.lookup(keys, Duration.ofMillis(300)).get(10, TimeUnit.SECONDS);
            assertThat(Duration.ofNanos(System.nanoTime() - t0)).isGreaterThanOrEqualTo(Duration.ofMillis(250));
            assertThat(got.values()).containsOnly(new KeyLocation.Unknown(KeyLocation.UnknownReason.TIMED_OUT));
            assertThat(registry.get("orbitkv_catalog_lookup_calls_in_flight").gauge().value()).isZero();
            synchronized (silent) {
                assertThat(silent.unanswered).as("the owner was asked").hasSize(1);
            }
        }
    }

    private static byte[] filled(byte b) {
        byte[] bytes = new byte[StateKey.BYTES];
        java.util.Arrays.fill(bytes, b);
        return bytes;
    }
}
