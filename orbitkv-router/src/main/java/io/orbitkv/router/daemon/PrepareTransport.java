package io.orbitkv.router.daemon;

import java.util.List;
import java.util.Objects;
import java.util.concurrent.CompletableFuture;

/**
 * How the router sends a worker's Manager a remote prepare (docs/cluster.md "Remote prepare"):
 * the cluster plane's {@code Preparation.Prepare}, implemented where the cluster client lives
 * ({@code orbitkv-server}); this module only decides what to send and when.
 *
 * <p>Thread model: {@link #prepare} is called from HTTP handler threads and must not block; the
 * future completes on any thread with the Manager's outcome (lower case: accepted, trimmed,
 * refused, not_registered, busy) or exceptionally when the call failed.
 */
public interface PrepareTransport extends AutoCloseable {

    /**
     * One remote prepare.
     *
     * @param namespaceDigest the 32-byte namespace digest
     * @param stateKeys       true: {@code pages} are 32-byte StateKeys; false: engine block hashes
     * @param groupId         the state group the pages belong to
     * @param pages           the request's pages, prefix order
     * @param promptTokens    the request's prompt length
     * @param firstUseMillis  the chosen worker's estimated queue wait
     * @param priority        0..255
     */
    record Demand(byte[] namespaceDigest, boolean stateKeys, int groupId, List<byte[]> pages, long promptTokens,
                  int firstUseMillis, int priority) {
        public Demand {
            Objects.requireNonNull(namespaceDigest, "namespaceDigest");
            if (namespaceDigest.length != 32) throw new IllegalArgumentException("a namespace digest is 32 bytes");
            pages = List.copyOf(pages);
        }
    }

    /** Sends {@code demand} to the Manager at {@code endpoint} ({@code host:port}); never blocks. */
    CompletableFuture<String> prepare(String endpoint, Demand demand);

    @Override
    void close();
}
