package io.orbitkv.bench.trace;

import org.junit.jupiter.api.Test;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;

import static org.assertj.core.api.Assertions.assertThat;

class PagePatternTest {

    @Test
    void aPageChecksAgainstItsOwnBlockOnlyAndEveryWrongByteIsCounted() {
        try (Arena arena = Arena.ofConfined()) {
            MemorySegment page = arena.allocate(8192);
            PagePattern.fill(page, 42);
            assertThat(PagePattern.wrongBytes(page, 42)).isZero();
            assertThat(PagePattern.wrongBytes(page, 43)).as("another block's page").isGreaterThan(8000);
            page.set(ValueLayout.JAVA_BYTE, 8191, (byte) (page.get(ValueLayout.JAVA_BYTE, 8191) ^ 1));
            page.set(ValueLayout.JAVA_BYTE, 0, (byte) (page.get(ValueLayout.JAVA_BYTE, 0) ^ 0x80));
            assertThat(PagePattern.wrongBytes(page, 42)).isEqualTo(2);
            MemorySegment zero = arena.allocate(8192);
            assertThat(PagePattern.wrongBytes(zero, 42)).as("an unwritten page").isGreaterThan(8000);
        }
    }

    @Test
    void blockHashesAreDistinct32ByteNames() {
        assertThat(PagePattern.blockHash(1)).hasSize(32).isNotEqualTo(PagePattern.blockHash(2));
        assertThat(PagePattern.blockHash(7)).isEqualTo(PagePattern.blockHash(7));
    }
}
