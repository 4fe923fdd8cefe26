package io.orbitkv.bench.ttft;

import io.orbitkv.engine.HitSource;
import io.orbitkv.engine.KvPageStore;
import io.orbitkv.engine.PrefixLookup;
import io.orbitkv.state.StateKey;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

class QueryOnlyStoreTest {

    /** A delegate that answers every lookup with {@code answer} and counts what reaches it. */
    private static final class Scripted implements KvPageStore {
        final AtomicInteger lookups = new AtomicInteger();
        final AtomicInteger publishes = new AtomicInteger();
        final AtomicInteger releases = new AtomicInteger();
        boolean hit;

        @Override
        public PrefixLookup lookupPrefix(List<StateKey> pageKeys, long promptTokens) {
            lookups.incrementAndGet();
            return hit ? new PrefixLookup.Hit(List.of(MemorySegment.ofArray(new byte[8])), HitSource.DRAM,
                    releases::incrementAndGet) : new PrefixLookup.Miss("nothing");
        }

        @Override
        public PublishReport publish(List<StateKey> pageKeys, long imageBytes, PageImageWriter writer) {
            publishes.incrementAndGet();
            return new PublishReport(pageKeys.size(), 0, 0);
        }

        @Override
        public void close() {
        }
    }

    @Test
    void everyLookupReachesTheManagerAndNothingIsEverPublished() {
        Scripted delegate = new Scripted();
        QueryOnlyStore store = new QueryOnlyStore(delegate);
        assertThat(store.lookupPrefix(List.of(), 17)).isInstanceOf(PrefixLookup.Miss.class);
        assertThat(store.lookupPrefix(List.of(), 17)).isInstanceOf(PrefixLookup.Miss.class);
        assertThat(store.publish(List.of(StateKey.ofBytes(new byte[32])), 8, (i, slot) -> { }))
                .isEqualTo(KvPageStore.PublishReport.NONE);
        assertThat(delegate.lookups).hasValue(2);
        assertThat(delegate.publishes).hasValue(0);
        assertThat(store.queries()).isEqualTo(2);
    }

    @Test
    void aHitIsReleasedAndFailsTheArmInsteadOfBeingTimedAsAMiss() {
        Scripted delegate = new Scripted();
        delegate.hit = true;
        QueryOnlyStore store = new QueryOnlyStore(delegate);
        assertThatThrownBy(() -> store.lookupPrefix(List.of(), 17)).isInstanceOf(IllegalStateException.class)
                .hasMessageContaining("miss-path namespace had a hit");
        assertThat(delegate.releases).hasValue(1);
    }
}
