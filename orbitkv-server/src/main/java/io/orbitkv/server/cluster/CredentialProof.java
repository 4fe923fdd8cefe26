package io.orbitkv.server.cluster;

import com.google.common.util.concurrent.FutureCallback;
import com.google.common.util.concurrent.Futures;
import com.google.common.util.concurrent.MoreExecutors;
import com.google.protobuf.ByteString;
import io.grpc.ManagedChannel;
import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.orbitkv.core.catalog.Member;
import io.orbitkv.core.log.UnexpectedErrors;
import io.orbitkv.server.cluster.proto.ClusterInfoGrpc;
import io.orbitkv.server.cluster.proto.ProveReply;
import io.orbitkv.server.cluster.proto.ProveRequest;
import io.orbitkv.server.membership.MemberVerifier;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.MessageDigest;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.Objects;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import javax.crypto.Mac;
import javax.crypto.spec.SecretKeySpec;

/**
 * Mutual proof of the cluster credential between two members, before either counts the other as
 * live for rendezvous: the verifier calls {@code ClusterInfo.Prove} on the member's endpoint with a
 * fresh random nonce; the call carries the verifier's token, which the member's {@link ClusterAuth}
 * checks before the handler runs (the verifier proves itself); the member answers with
 * HMAC-SHA256 keyed by its token over the nonce and its identity, which the verifier recomputes
 * with its own token (the member proves itself). Either failure is logged and counted
 * ({@link AuthFailures}) and the member is not live in the verifier's view. {@link #verify}'s future
 * always completes, with false for every failure; one that is a bug (not a refused or unreachable
 * call) is also counted ({@link UnexpectedErrors}, layer {@code cluster}).
 *
 * <p>Owns the HMAC key and a {@link SecureRandom}; borrows the channels. Thread-safe: a
 * {@link Mac} is made per use (a few µs), and the RPC completes on the channel's event loop.
 *
 * <p>Design note: a member with a wrong token used to register in etcd and receive a rendezvous
 * share of the keys: every push and lookup to it failed UNAUTHENTICATED (4 of 24 keys Unknown in
 * a 3-node test), silently. etcd registration proves nothing about the token (etcd has its own
 * access control), so the proof has to run between Managers. Every node applies the same rule to
 * the same etcd records, so views converge: a wrong-token member is excluded by every
 * correct-token node (its calls are refused and it cannot compute the HMAC), and it excludes them
 * in turn; while a new member is being verified (one RPC, ~1 ms on loopback) nodes may disagree
 * on it, which shard owners already answer with Unknown (view digest mismatch), never a wrong
 * Absent. The nonce keeps a recorded reply from being replayed by an endpoint without the token;
 * binding the node id and incarnation keeps one member's reply from vouching for another.
 */
public final class CredentialProof implements MemberVerifier {

    /** Bytes of each nonce sent; answers accept 16 to {@value #MAX_NONCE_BYTES}. */
    public static final int NONCE_BYTES = 16;
    public static final int MAX_NONCE_BYTES = 64;
    /** Deadline of one Prove call. */
    public static final Duration DEADLINE = Duration.ofSeconds(2);
    private static final byte[] DOMAIN = "orbitkv-prove-v1".getBytes(StandardCharsets.UTF_8);
    private static final String FAILED_PROOF = "a failed proof (the member is not live; retried with backoff)";

    private final String selfNode;
    private final String clusterId;
    private final SecretKeySpec key;
    private final ClusterChannels channels;
    private final AuthFailures failures;
    private final SecureRandom random = new SecureRandom();

    public CredentialProof(String selfNode, ClusterSecurity security, ClusterChannels channels, AuthFailures failures) {
        this.selfNode = Objects.requireNonNull(selfNode, "selfNode");
        this.clusterId = security.clusterId();
        this.key = new SecretKeySpec(security.token(), "HmacSHA256");
        this.channels = Objects.requireNonNull(channels, "channels");
        this.failures = Objects.requireNonNull(failures, "failures");
    }

    /** The proof this node answers a Prove call with: HMAC over the nonce and {@code nodeId#incarnation}. */
    public byte[] mac(byte[] nonce, String nodeId, long incarnation) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            mac.init(key);
            mac.update(DOMAIN);
            for (byte[] part : new byte[][] {clusterId.getBytes(StandardCharsets.UTF_8), nonce, nodeId.getBytes(StandardCharsets.UTF_8)}) {
                mac.update(ByteBuffer.allocate(4).putInt(part.length).array());
                mac.update(part);
            }
            mac.update(ByteBuffer.allocate(8).putLong(incarnation).array());
            return mac.doFinal();
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException("HmacSHA256 is required of every JDK", e);
        }
    }

    @Override
    public CompletableFuture<Boolean> verify(Member member) {
        byte[] nonce = new byte[NONCE_BYTES];
        random.nextBytes(nonce);
        CompletableFuture<Boolean> out = new CompletableFuture<>();
        String who = member.nodeId() + "#" + member.incarnation() + " at " + member.endpoint();
        try {
            Optional<ManagedChannel> channel = channels.tryChannel(member.endpoint());
            if (channel.isEmpty()) return CompletableFuture.completedFuture(false); // channels closed: the Manager is stopping
            Futures.addCallback(ClusterInfoGrpc.newFutureStub(channel.get())
                    .withDeadlineAfter(DEADLINE.toMillis(), TimeUnit.MILLISECONDS)
                    .prove(ProveRequest.newBuilder().setFromNode(selfNode).setNonce(ByteString.copyFrom(nonce)).build()),
                    new FutureCallback<>() {
                        @Override
                        public void onSuccess(ProveReply reply) {
                            try {
                                out.complete(check(member, who, nonce, reply));
                            } catch (RuntimeException e) {
                                // else the proof would never complete and the member never be tried again
                                UnexpectedErrors.record(UnexpectedErrors.Layer.CLUSTER, "CredentialProof.check", FAILED_PROOF, e);
                                out.complete(false);
                            }
                        }

                        @Override
                        public void onFailure(Throwable t) {
                            if (t instanceof StatusRuntimeException s && s.getStatus().getCode() == Status.Code.UNAUTHENTICATED) {
                                failures.record(AuthFailures.Reason.REFUSED_BY_PEER, who + " refused this node's cluster credentials ("
                                        + s.getStatus().getDescription() + "): the token files differ; it is not counted as a member");
                            }
                            out.complete(false); // unreachable or refused: not live until a later proof succeeds
                        }
                    }, MoreExecutors.directExecutor());
        } catch (RuntimeException e) {
            // more endpoints than ClusterChannels.MAX_CHANNELS (a refused configuration), or a bug
            UnexpectedErrors.record(UnexpectedErrors.Layer.CLUSTER, "CredentialProof.verify", FAILED_PROOF, e);
            out.complete(false);
        }
        return out;
    }

    private boolean check(Member member, String who, byte[] nonce, ProveReply reply) {
        boolean same = reply.getNodeId().equals(member.nodeId()) && reply.getIncarnation() == member.incarnation()
                && MessageDigest.isEqual(mac(nonce, member.nodeId(), member.incarnation()), reply.getMac().toByteArray());
        if (!same) {
            failures.record(AuthFailures.Reason.BAD_PROOF, who + " accepted this node's token but answered as "
                    + reply.getNodeId() + "#" + reply.getIncarnation() + " without a valid proof of the cluster token;"
                    + " it is not counted as a member");
        }
        return same;
    }
}
