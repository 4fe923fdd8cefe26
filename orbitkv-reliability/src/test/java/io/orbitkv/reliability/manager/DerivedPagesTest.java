package io.orbitkv.reliability.manager;

import static org.assertj.core.api.Assertions.assertThat;

import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;

/** Pages derived from their names: the check the crash loops and the soak rely on finds every wrong byte. */
class DerivedPagesTest {

    @Property(tries = 300)
    void everyWrongByteIsFoundAtItsOffset(@ForAll long stream, @ForAll @IntRange(min = 0, max = 1 << 20) int index,
                                          @ForAll @IntRange(min = 0, max = 1 << 30) int at, @ForAll byte delta) {
        byte[] name = DerivedPages.name(stream, index);
        int length = CampaignEngine.lengthBytes(name);
        MemorySegment page = DerivedPages.image(name, length);
        assertThat(CampaignEngine.firstWrongByte(name, page)).isEqualTo(-1);
        long offset = at % length;
        byte b = page.get(ValueLayout.JAVA_BYTE, offset);
        page.set(ValueLayout.JAVA_BYTE, offset, (byte) (b + (delta == 0 ? 1 : delta)));
        assertThat(CampaignEngine.firstWrongByte(name, page)).isEqualTo(offset);
    }

    @Property(tries = 200)
    void anotherPagesBytesOrATruncatedPageAreWrong(@ForAll long stream, @ForAll @IntRange(min = 0, max = 1 << 20) int index) {
        byte[] name = DerivedPages.name(stream, index);
        byte[] other = DerivedPages.name(stream, index + 1L);
        int length = CampaignEngine.lengthBytes(name);
        assertThat(length).isBetween(CampaignEngine.MIN_PAGE_BYTES, CampaignEngine.MAX_PAGE_BYTES);
        assertThat(DerivedPages.firstWrongByte(name, length, DerivedPages.image(other, length))).as("within the first word").isBetween(0L, 7L);
        assertThat(DerivedPages.firstWrongByte(name, length, DerivedPages.image(name, length).asSlice(0, length - 1)))
                .isEqualTo(length - 1);
    }
}
