package io.orbitkv.server.cluster;

import io.grpc.CallCredentials;
import io.grpc.Metadata;
import io.grpc.ServerCall;
import io.grpc.ServerCallHandler;
import io.grpc.ServerInterceptor;
import io.grpc.Status;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.concurrent.Executor;
import java.util.concurrent.atomic.LongAdder;

/**
 * Cluster authentication of every RPC: the client side attaches the cluster id and token as call
 * metadata ({@link #callCredentials()}); the server side ({@link #interceptCall}) refuses a call
 * whose id is missing or names another cluster, or whose token is missing or wrong, with
 * {@code UNAUTHENTICATED} before any service method runs.
 *
 * <p>Thread model: immutable apart from two counters; called concurrently by gRPC's transport
 * threads. Invariant: no service handler ever sees a call that failed either check. Every refusal
 * is counted and logged, rate-limited, with the caller's address and method ({@link AuthFailures}).
 *
 * <p>Design note: the token is compared as SHA-256 digests with {@link MessageDigest#isEqual},
 * which takes the same time for any two 32-byte inputs, so neither the token's bytes nor its
 * length leak through response timing (a {@code String.equals} returns at the first differing
 * byte). The cluster id is checked first and separately so that a peer of another cluster
 * configured on the same hosts gets a clear "wrong cluster" message instead of "bad token".
 */
public final class ClusterAuth implements ServerInterceptor {

    /** Metadata header naming the caller's cluster. */
    public static final Metadata.Key<String> CLUSTER_ID =
            Metadata.Key.of("orbitkv-cluster-id", Metadata.ASCII_STRING_MARSHALLER);
    /** Metadata header carrying the cluster token. */
    public static final Metadata.Key<String> CLUSTER_TOKEN =
            Metadata.Key.of("orbitkv-cluster-token", Metadata.ASCII_STRING_MARSHALLER);

    private final String clusterId;
    private final String token;
    private final byte[] tokenDigest;
    private final LongAdder rejectedWrongCluster = new LongAdder();
    private final LongAdder rejectedBadToken = new LongAdder();

    private final AuthFailures failures;

    /** Authentication whose refusals are counted in a registry of its own (tests, client credentials). */
    public ClusterAuth(ClusterSecurity security) {
        this(security, new AuthFailures(new io.micrometer.core.instrument.simple.SimpleMeterRegistry()));
    }

    public ClusterAuth(ClusterSecurity security, AuthFailures failures) {
        this.failures = java.util.Objects.requireNonNull(failures, "failures");
        this.clusterId = security.clusterId();
        this.token = new String(security.token(), StandardCharsets.UTF_8);
        this.tokenDigest = sha256(token);
    }

    @Override
    public <Q, R> ServerCall.Listener<Q> interceptCall(ServerCall<Q, R> call, Metadata headers,
                                                      ServerCallHandler<Q, R> next) {
        String peerCluster = headers.get(CLUSTER_ID);
        if (!clusterId.equals(peerCluster)) {
            rejectedWrongCluster.increment();
            failures.record(AuthFailures.Reason.WRONG_CLUSTER, "refused " + describe(call) + ": "
                    + (peerCluster == null ? "no cluster id" : "cluster '" + peerCluster + "', this node serves '" + clusterId + "'"));
            call.close(Status.UNAUTHENTICATED.withDescription(peerCluster == null
                    ? "no cluster id" : "wrong cluster: this node serves cluster '" + clusterId + "'"), new Metadata());
            return new ServerCall.Listener<>() { };
        }
        String presented = headers.get(CLUSTER_TOKEN);
        if (presented == null || !MessageDigest.isEqual(tokenDigest, sha256(presented))) {
            rejectedBadToken.increment();
            failures.record(AuthFailures.Reason.BAD_TOKEN, "refused " + describe(call) + ": "
                    + (presented == null ? "no cluster token" : "bad cluster token (the caller's token file differs from this node's)"));
            call.close(Status.UNAUTHENTICATED.withDescription(presented == null ? "no cluster token" : "bad cluster token"),
                    new Metadata());
            return new ServerCall.Listener<>() { };
        }
        return next.startCall(call, headers);
    }

    private static String describe(ServerCall<?, ?> call) {
        return call.getMethodDescriptor().getFullMethodName() + " from "
                + call.getAttributes().get(io.grpc.Grpc.TRANSPORT_ATTR_REMOTE_ADDR);
    }

    /** Credentials a client channel's calls carry to be accepted by peers of this cluster. */
    public CallCredentials callCredentials() {
        return new CallCredentials() {
            @Override
            public void applyRequestMetadata(RequestInfo info, Executor executor, MetadataApplier applier) {
                Metadata headers = new Metadata();
                headers.put(CLUSTER_ID, clusterId);
                headers.put(CLUSTER_TOKEN, token);
                applier.apply(headers);
            }
        };
    }

    /** Calls refused because they named no cluster or another cluster. */
    public long rejectedWrongCluster() {
        return rejectedWrongCluster.sum();
    }

    /** Calls refused for a missing or wrong token. */
    public long rejectedBadToken() {
        return rejectedBadToken.sum();
    }

    private static byte[] sha256(String s) {
        try {
            return MessageDigest.getInstance("SHA-256").digest(s.getBytes(StandardCharsets.UTF_8));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("SHA-256 is required of every JDK", e);
        }
    }
}
