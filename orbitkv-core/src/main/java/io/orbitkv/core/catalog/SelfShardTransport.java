package io.orbitkv.core.catalog;

import io.orbitkv.state.StateKey;

import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;

/**
 * A {@link CatalogTransport} that answers calls addressed to this node's own shard from its
 * {@link ShardState} in process, and hands every other call to {@code remote}.
 *
 * <p>A node owns about 1/N of the keys (R/N with R replicas), so a query's lookup and the
 * publisher's pushes address this node as often as any peer. Over the wire such a call cost a
 * loopback gRPC round trip: serialization both ways, the server's executor, the channel's event
 * loop, and two thread wake-ups on each side of the same process; a first-query peer hit waits for
 * the slowest owner's answer. In process it costs the shard's lock for O(keys).
 *
 * <p>Equivalence with the wire: the shard is the one {@code CatalogService} serves, and the same
 * call reaches it (same keys, live view and placement version; same batch); answers are the
 * shard's own values, which the codec only copies. A lookup over
 * {@link CatalogTransport#MAX_LOOKUP_KEYS} keys fails as the service refuses it. An owner of the
 * same node id but another incarnation (this node's earlier life in a stale view) goes to
 * {@code remote}, which answers it as the wire does.
 *
 * <p>Thread model: runs on the caller's thread, holding the shard's monitor for the call (a
 * lookup or a push is O(batch), the same work the gRPC handler does); completes every future
 * before it returns: a throw of the shard (a bug) fails the call, which callers count as an
 * unreachable owner.
 */
public final class SelfShardTransport implements CatalogTransport {

    private final String selfNodeId;
    private final long selfIncarnation;
    private final ShardState shard;
    private final CatalogTransport remote;

    public SelfShardTransport(String selfNodeId, long selfIncarnation, ShardState shard, CatalogTransport remote) {
        this.selfNodeId = Objects.requireNonNull(selfNodeId, "selfNodeId");
        this.selfIncarnation = selfIncarnation;
        this.shard = Objects.requireNonNull(shard, "shard");
        this.remote = Objects.requireNonNull(remote, "remote");
        if (shard.ownerIncarnation() != selfIncarnation) {
            throw new IllegalArgumentException("shard of incarnation " + shard.ownerIncarnation() + ", node " + selfIncarnation);
        }
    }

    private boolean isSelf(Member owner) {
        return owner.incarnation() == selfIncarnation && owner.nodeId().equals(selfNodeId);
    }

    @Override
    public CompletableFuture<PushBatch.Reply> push(Member owner, PushBatch batch, long timeoutMillis) {
        if (!isSelf(owner)) return remote.push(owner, batch, timeoutMillis);
        try {
            return CompletableFuture.completedFuture(shard.apply(batch));
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }

    @Override
    public CompletableFuture<List<KeyLocation>> lookup(Member owner, List<StateKey> keys, List<Member> live, long viewDigest,
                                                       long timeoutMillis) {
        if (!isSelf(owner)) return remote.lookup(owner, keys, live, viewDigest, timeoutMillis);
        if (keys.size() > MAX_LOOKUP_KEYS) {
            return CompletableFuture.failedFuture(new IllegalArgumentException("more than " + MAX_LOOKUP_KEYS + " keys"));
        }
        try {
            return CompletableFuture.completedFuture(shard.lookup(keys, live, viewDigest));
        } catch (RuntimeException e) {
            return CompletableFuture.failedFuture(e);
        }
    }
}
