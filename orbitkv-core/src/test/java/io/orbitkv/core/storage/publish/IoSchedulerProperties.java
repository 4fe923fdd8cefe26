package io.orbitkv.core.storage.publish;

import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;

import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

class IoSchedulerProperties {

    /** A script of operations: 'r' offers a read, 'w' offers a write, 'p' polls one unit. */
    @Provide
    Arbitrary<String> scripts() {
        return Arbitraries.of('r', 'w', 'p').list().ofMaxSize(300)
                .map(l -> l.stream().map(String::valueOf).reduce("", String::concat));
    }

    @Property(tries = 300)
    void aWaitingWriteIsServedWithinKReads(@ForAll("scripts") String script,
                                           @ForAll @IntRange(min = 1, max = 8) int k) {
        IoScheduler<Integer, Integer> s = new IoScheduler<>(1000, 1000, k);
        int readsServedWhileWriteWaited = 0;
        int seq = 0;
        for (char c : script.toCharArray()) {
            switch (c) {
                case 'r' -> assertThat(s.offerRead(seq++)).isTrue();
                case 'w' -> assertThat(s.offerWrite(seq++)).isTrue();
                default -> {
                    boolean writeWaiting = s.queuedWrites() > 0;
                    var work = s.poll();
                    if (work.isEmpty()) {
                        assertThat(s.queuedReads() + s.queuedWrites()).isZero();
                        continue;
                    }
                    switch (work.get()) {
                        case IoScheduler.Work.Read<Integer, Integer> r -> {
                            if (writeWaiting) readsServedWhileWriteWaited++;
                        }
                        case IoScheduler.Work.Write<Integer, Integer> w -> readsServedWhileWriteWaited = 0;
                    }
                    assertThat(readsServedWhileWriteWaited).isLessThanOrEqualTo(k);
                }
            }
        }
    }

    @Property(tries = 200)
    void readsGoFirstUntilTheStarvationBound(@ForAll @IntRange(min = 1, max = 6) int k,
                                             @ForAll @IntRange(min = 0, max = 20) int reads) {
        IoScheduler<Integer, Integer> s = new IoScheduler<>(100, 100, k);
        s.offerWrite(-1);
        for (int i = 0; i < reads; i++) s.offerRead(i);
        List<Object> order = new ArrayList<>();
        for (var w = s.poll(); w.isPresent(); w = s.poll()) {
            order.add(switch (w.get()) {
                case IoScheduler.Work.Read<Integer, Integer> r -> r.task();
                case IoScheduler.Work.Write<Integer, Integer> wr -> "W";
            });
        }
        assertThat(order).hasSize(reads + 1);
        assertThat(order.indexOf("W")).isEqualTo(Math.min(k, reads));
        // FIFO within the read lane.
        List<Object> readOrder = order.stream().filter(o -> o instanceof Integer).toList();
        assertThat(readOrder).isSorted();
    }

    @Property(tries = 50)
    void lanesAreBounded(@ForAll @IntRange(min = 1, max = 10) int bound) {
        IoScheduler<Integer, Integer> s = new IoScheduler<>(bound, bound, 1);
        for (int i = 0; i < bound; i++) {
            assertThat(s.offerRead(i)).isTrue();
            assertThat(s.offerWrite(i)).isTrue();
        }
        assertThat(s.offerRead(99)).isFalse();
        assertThat(s.offerWrite(99)).isFalse();
        assertThat(s.queuedReads()).isEqualTo(bound);
        assertThat(s.queuedWrites()).isEqualTo(bound);
    }
}
