package io.orbitkv.state.protocol;

import org.junit.jupiter.api.Test;

import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

/** The packed span pages: the same list as records, read without an object per page, and decoded packed. */
class PageEntriesTest {

    private static final List<Reply.PageResult> MIXED = List.of(
            Reply.Unleased.MISS,
            new Reply.Resident(new Reply.Lease(2, 4096, 17)),
            Reply.Unleased.CANDIDATE,
            Reply.Unleased.RESERVED,
            new Reply.Resident(new Reply.Lease(0, 0, 1)),
            Reply.Unleased.READY);

    @Test
    void packsRecordsAndReadsThemBackByIndexAndAsValues() {
        PageEntries e = PageEntries.copyOf(MIXED);

        assertThat(e).hasSize(6).isEqualTo(MIXED);
        assertThat(e.hashCode()).isEqualTo(MIXED.hashCode());
        assertThat(e.state(0)).isEqualTo(PageState.MISS);
        assertThat(e.isResident(1)).isTrue();
        assertThat(e.arenaIndex(1)).isEqualTo(2);
        assertThat(e.offsetBytes(1)).isEqualTo(4096);
        assertThat(e.lengthBytes(1)).isEqualTo(17);
        assertThat(e.state(5)).isEqualTo(PageState.READY);
        assertThat(e.get(4)).isEqualTo(new Reply.Resident(new Reply.Lease(0, 0, 1)));
        assertThat(PageEntries.copyOf(e)).as("already packed: not copied again").isSameAs(e);
        assertThatThrownBy(() -> e.arenaIndex(0)).isInstanceOf(IllegalStateException.class).hasMessageContaining("MISS");
    }

    @Test
    void aSpanAlwaysHoldsPackedPages() {
        Reply.Span s = new Reply.Span(3, MIXED);
        assertThat(s.pages()).isInstanceOf(PageEntries.class).isEqualTo(MIXED);
        assertThat(s.entries().size()).isEqualTo(6);
        assertThat(s.endPage()).isEqualTo(9);
        assertThatThrownBy(() -> new Reply.Span(0, List.of())).isInstanceOf(IllegalArgumentException.class);
    }

    @Test
    void theBuilderRefusesWhatALeaseOrASpanCannotBe() {
        assertThatThrownBy(() -> PageEntries.builder(0)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> PageEntries.builder(1).resident(0, 0, 0)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> PageEntries.builder(1).resident(-1, 0, 1)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> PageEntries.builder(1).resident(0, -4096, 1)).isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> PageEntries.builder(1).unleased(PageState.RESIDENT))
                .isInstanceOf(IllegalArgumentException.class);
        assertThatThrownBy(() -> PageEntries.builder(2).unleased(PageState.MISS).build())
                .isInstanceOf(IllegalStateException.class);
        assertThatThrownBy(() -> PageEntries.builder(1).unleased(PageState.MISS).unleased(PageState.MISS))
                .isInstanceOf(IllegalStateException.class);
    }

    @Test
    void aDecodedHitIsPackedAndEqualToWhatWasEncoded() {
        PageEntries.Builder b = PageEntries.builder(1024);
        for (int i = 0; i < 1024; i++) b.resident(i % 3, 4096L * (i + 1), 16 * 1024);
        Reply.QueryResult sent = new Reply.QueryResult(9, 2, QueryStatus.FINAL, true, 1024 * 16,
                List.of(new Reply.GroupResult(0, List.of(new Reply.Span(0, b.build())))));
        byte[] frame = FrameEncoder.toBytes(5, sent);
        assertThat(frame).hasSize(16 + 24 + 8 + 12 + 1024 * 17);

        DecodeResult d = new FrameDecoder(ProtocolLimits.DEFAULTS, Direction.TO_CLIENT).decode(java.nio.ByteBuffer.wrap(frame));

        assertThat(d).isInstanceOf(DecodeResult.Decoded.class);
        Reply.QueryResult got = (Reply.QueryResult) ((DecodeResult.Decoded) d).frame();
        assertThat(got).isEqualTo(sent);
        PageEntries pages = got.groups().getFirst().spans().getFirst().entries();
        assertThat(pages.offsetBytes(1023)).isEqualTo(4096L * 1024);
        assertThat(pages.arenaIndex(1023)).isEqualTo(1023 % 3);
        assertThat(FrameEncoder.toBytes(5, got)).as("re-encodes to the same bytes").isEqualTo(frame);
    }

    @Test
    void aFinalHitWithAnUnleasedPageIsStillRefused() {
        PageEntries pages = PageEntries.builder(2).resident(0, 0, 1).unleased(PageState.RESERVED).build();
        assertThatThrownBy(() -> new Reply.QueryResult(1, 0, QueryStatus.FINAL, true, 32,
                List.of(new Reply.GroupResult(0, List.of(new Reply.Span(0, pages))))))
                .isInstanceOf(IllegalArgumentException.class).hasMessageContaining("RESERVED");
    }
}
