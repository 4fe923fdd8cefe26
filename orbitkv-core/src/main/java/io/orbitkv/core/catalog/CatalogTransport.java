package io.orbitkv.core.catalog;

import io.orbitkv.state.StateKey;
import java.util.List;
import java.util.concurrent.CompletableFuture;

/**
 * How the catalog reaches shard owners (in the server: gRPC with cluster credentials). Core holds
 * no sockets; this seam also lets tests wire shard owners in memory.
 *
 * <p>Implementations are thread-safe, never block the caller, and complete every future: a
 * failure completes it exceptionally, a missed deadline with a
 * {@link java.util.concurrent.TimeoutException} (possibly as a cause).
 */
public interface CatalogTransport {

    /** Keys one lookup call may carry; a shard owner refuses more (a 1,024-page query fits with room to spare). */
    int MAX_LOOKUP_KEYS = 8192;

    /** Sends one batch to {@code owner}, failing after {@code timeoutMillis}. */
    CompletableFuture<PushBatch.Reply> push(Member owner, PushBatch batch, long timeoutMillis);

    /** Looks {@code keys} up on {@code owner} (one answer per key, same order). */
    CompletableFuture<List<KeyLocation>> lookup(Member owner, List<StateKey> keys, List<Member> live, long viewDigest,
                                                long timeoutMillis);
}
