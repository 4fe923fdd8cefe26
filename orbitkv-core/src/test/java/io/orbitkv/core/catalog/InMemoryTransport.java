package io.orbitkv.core.catalog;

import io.orbitkv.state.StateKey;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeoutException;

/**
 * Shard owners wired in memory; a node in {@link #down} fails calls, one in {@link #silent} never
 * answers, a call to one in {@link #buggy} throws (a transport bug: its contract is a failed future).
 */
final class InMemoryTransport implements CatalogTransport {

    final Map<String, ShardState> owners = new ConcurrentHashMap<>();
    final Set<String> down = ConcurrentHashMap.newKeySet();
    final Set<String> silent = ConcurrentHashMap.newKeySet();
    final Set<String> buggy = ConcurrentHashMap.newKeySet();
    /** Pushes attempted per owner, answered or not. */
    final Map<String, java.util.concurrent.atomic.AtomicInteger> pushes = new ConcurrentHashMap<>();

    @Override
    public CompletableFuture<PushBatch.Reply> push(Member owner, PushBatch batch, long timeoutMillis) {
        pushes.computeIfAbsent(owner.nodeId(), id -> new java.util.concurrent.atomic.AtomicInteger()).incrementAndGet();
        if (buggy.contains(owner.nodeId())) throw new IllegalStateException("injected: push threw");
        if (down.contains(owner.nodeId())) return CompletableFuture.failedFuture(new IllegalStateException("down"));
        if (silent.contains(owner.nodeId())) return CompletableFuture.failedFuture(new TimeoutException("silent"));
        return CompletableFuture.completedFuture(owners.get(owner.nodeId()).apply(batch));
    }

    @Override
    public CompletableFuture<List<KeyLocation>> lookup(Member owner, List<StateKey> keys, List<Member> live,
                                                       long viewDigest, long timeoutMillis) {
        if (buggy.contains(owner.nodeId())) throw new IllegalStateException("injected: lookup threw");
        if (down.contains(owner.nodeId())) return CompletableFuture.failedFuture(new IllegalStateException("down"));
        if (silent.contains(owner.nodeId())) return new CompletableFuture<>();
        return CompletableFuture.completedFuture(owners.get(owner.nodeId()).lookup(keys, live, viewDigest));
    }
}
