package io.orbitkv.core.storage.residency;

import io.orbitkv.state.StateKey;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CountDownLatch;

import static io.orbitkv.core.storage.residency.ResidencyEvent.Kind.ADDED;
import static io.orbitkv.core.storage.residency.ResidencyEvent.Medium.DRAM;
import static org.assertj.core.api.Assertions.assertThat;

class ResidencyStreamTest {

    static StateKey key(int i) {
        byte[] b = new byte[32];
        b[0] = (byte) i;
        b[31] = (byte) (i >> 8);
        return StateKey.ofBytes(b);
    }

    @Test
    void sequencesStartAtOneAndReadsResume() {
        ResidencyStream s = new ResidencyStream(8);
        assertThat(s.readFrom(1, 10).events()).isEmpty();
        for (int i = 0; i < 5; i++) s.append(key(i), DRAM, ADDED, i);
        var b = s.readFrom(1, 3);
        assertThat(b.events()).extracting(ResidencyEvent::sequence).containsExactly(1L, 2L, 3L);
        assertThat(b.gap()).isFalse();
        var rest = s.readFrom(b.nextSequence(), 10);
        assertThat(rest.events()).extracting(ResidencyEvent::sequence).containsExactly(4L, 5L);
        assertThat(rest.nextSequence()).isEqualTo(6);
        assertThat(s.readFrom(6, 10).events()).isEmpty();
    }

    @Test
    void aConsumerThatFellBehindSeesAGap() {
        ResidencyStream s = new ResidencyStream(4);
        for (int i = 0; i < 10; i++) s.append(key(i), DRAM, ADDED, i);
        var b = s.readFrom(1, 100);
        assertThat(b.gap()).isTrue();
        assertThat(b.events()).extracting(ResidencyEvent::sequence).containsExactly(7L, 8L, 9L, 10L);
        assertThat(s.readFrom(7, 100).gap()).isFalse();
    }

    @Test
    void concurrentAppendsGetDistinctContiguousSequences() throws Exception {
        ResidencyStream s = new ResidencyStream(100_000);
        int threads = 4, per = 5_000;
        CountDownLatch start = new CountDownLatch(1);
        List<Thread> ts = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            int id = t;
            ts.add(Thread.ofPlatform().start(() -> {
                try {
                    start.await();
                } catch (InterruptedException e) {
                    throw new RuntimeException(e);
                }
                for (int i = 0; i < per; i++) s.append(key(id), DRAM, ADDED, i);
            }));
        }
        start.countDown();
        for (Thread t : ts) t.join();
        var all = s.readFrom(1, threads * per);
        assertThat(all.events()).hasSize(threads * per);
        for (int i = 0; i < all.events().size(); i++) {
            assertThat(all.events().get(i).sequence()).isEqualTo(i + 1L);
        }
    }
}
