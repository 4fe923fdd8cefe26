package io.orbitkv.bench.ttft;

import io.orbitkv.engine.KvPageStore;
import io.orbitkv.engine.PrefixLookup;
import io.orbitkv.state.StateKey;

import java.util.List;

/**
 * The miss-path arm's store: every lookup is a real QUERY to the Manager (through
 * {@code delegate}), nothing is ever published, so under a namespace no one else publishes to
 * every query misses.
 *
 * <p>Owns {@code delegate}. Thread model: confined to the benchmark thread. Invariant: a lookup
 * that hits is a broken benchmark (someone published under the miss namespace), so it fails
 * loudly instead of being timed as a miss.
 */
final class QueryOnlyStore implements KvPageStore {

    private final KvPageStore delegate;
    private long queries;

    QueryOnlyStore(KvPageStore delegate) {
        this.delegate = delegate;
    }

    @Override
    public PrefixLookup lookupPrefix(List<StateKey> pageKeys, long promptTokens) {
        PrefixLookup lookup = delegate.lookupPrefix(pageKeys, promptTokens);
        queries++;
        return switch (lookup) {
            case PrefixLookup.Miss miss -> miss;
            case PrefixLookup.Hit hit -> {
                hit.close();
                throw new IllegalStateException("the miss-path namespace had a hit: the arm would not measure misses");
            }
        };
    }

    @Override
    public PublishReport publish(List<StateKey> pageKeys, long imageBytes, PageImageWriter writer) {
        return PublishReport.NONE;
    }

    /** QUERY round trips made so far. */
    long queries() {
        return queries;
    }

    @Override
    public void close() {
        delegate.close();
    }
}
