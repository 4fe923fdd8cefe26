package io.orbitkv.bench.trace;

import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.LongRange;

import static org.assertj.core.api.Assertions.assertThat;

class ManagerCapacityTest {

    /** The DRAM size chosen for a capacity bounds the Manager's index at exactly that many pages, with the fewest slots. */
    @Property(tries = 300)
    void dramBytesGiveExactlyTheAskedIndexPages(@ForAll @LongRange(min = 1, max = 2_000_000) long blocks,
                                                @ForAll @IntRange(min = 1, max = 16) int slotPages,
                                                @ForAll @LongRange(min = 1, max = 4096) long stagingPages) {
        int slot = slotPages * 4096;
        long staging = stagingPages * slot;
        long dram = ManagerCapacity.dramBytesFor(blocks, slot, staging);
        assertThat(dram % slot).isZero();
        assertThat(ManagerCapacity.indexPages(dram, slot, staging)).isEqualTo(blocks);
        assertThat(ManagerCapacity.indexPages(dram - slot, slot, staging)).isLessThan(blocks);
    }

    @Property(tries = 50)
    void ssdHoldsTheBlocksExtents(@ForAll @LongRange(min = 1000, max = 1_000_000) long blocks) {
        assertThat(ManagerCapacity.extentBytes(8192)).isEqualTo(4096 + 8192);
        assertThat(ManagerCapacity.extentBytes(5000)).isEqualTo(4096 + 8192);
        assertThat(ManagerCapacity.ssdBytesFor(blocks, 8192)).isEqualTo(Math.max(ManagerCapacity.MIN_SSD_BYTES, blocks * 12288));
    }
}
