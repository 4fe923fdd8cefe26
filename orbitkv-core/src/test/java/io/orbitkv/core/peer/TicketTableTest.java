package io.orbitkv.core.peer;

import io.orbitkv.state.StateKey;
import org.junit.jupiter.api.Test;

import java.lang.foreign.MemorySegment;
import java.util.Optional;

import static org.assertj.core.api.Assertions.assertThat;

class TicketTableTest {

    static final long WINDOW = 1_000;
    static final NodeIncarnation B1 = new NodeIncarnation("b", 1);
    static final NodeIncarnation B2 = new NodeIncarnation("b", 2);
    static final NodeIncarnation C1 = new NodeIncarnation("c", 1);

    /** A pin that counts its releases. */
    static final class FakePin implements PinnedImage {
        int releases;

        @Override
        public StateKey key() {
            return StateKey.ofBytes(new byte[StateKey.BYTES]);
        }

        @Override
        public long generation() {
            return 7;
        }

        @Override
        public long imageId() {
            return 7;
        }

        @Override
        public MemorySegment payload() {
            return MemorySegment.ofArray(new byte[8]);
        }

        @Override
        public void release() {
            releases++;
        }
    }

    final TicketTable table = new TicketTable(2, WINDOW);

    long issue(NodeIncarnation who, FakePin pin, long now) {
        return ((TicketTable.IssueResult.Granted) table.issue(who, pin, now)).ticket().ticketId();
    }

    @Test
    void expiryWaitsForTheRunningTransferThenFrees() {
        FakePin pin = new FakePin();
        long id = issue(B1, pin, 0);
        assertThat(table.beginTransfer(id, B1, 10)).isInstanceOf(TicketTable.BeginResult.Reading.class);

        assertThat(table.onTick(WINDOW + 1)).isZero();
        assertThat(pin.releases).as("pin freed while a transfer reads it").isZero();
        assertThat(table.state(id)).contains(TicketState.DRAINING);
        assertThat(table.beginTransfer(id, B1, WINDOW + 2))
                .isEqualTo(new TicketTable.BeginResult.Refused(TicketTable.TransferRefusal.NOT_ACCEPTING));

        table.endTransfer(id);
        assertThat(pin.releases).isEqualTo(1);
        assertThat(table.state(id)).isEmpty();
        assertThat(table.size()).isZero();
    }

    @Test
    void expiryWithoutTransferFreesAtTheWindowNotBefore() {
        FakePin pin = new FakePin();
        long id = issue(B1, pin, 100);
        assertThat(table.onTick(100 + WINDOW - 1)).isZero();
        assertThat(pin.releases).isZero();
        assertThat(table.onTick(100 + WINDOW)).isEqualTo(1);
        assertThat(pin.releases).isEqualTo(1);
        assertThat(table.beginTransfer(id, B1, 100 + WINDOW))
                .isEqualTo(new TicketTable.BeginResult.Refused(TicketTable.TransferRefusal.UNKNOWN_TICKET));
    }

    @Test
    void transferCannotStartAfterTheWindowEvenBeforeTheTick() {
        long id = issue(B1, new FakePin(), 0);
        assertThat(table.beginTransfer(id, B1, WINDOW))
                .isEqualTo(new TicketTable.BeginResult.Refused(TicketTable.TransferRefusal.WINDOW_PASSED));
    }

    @Test
    void releaseIsIdempotentAndDeferredWhileReading() {
        FakePin pin = new FakePin();
        long id = issue(B1, pin, 0);
        table.beginTransfer(id, B1, 1);
        assertThat(table.release(id, B1)).isEqualTo(TicketTable.ReleaseOutcome.DEFERRED);
        assertThat(table.release(id, B1)).isEqualTo(TicketTable.ReleaseOutcome.ALREADY_GONE);
        assertThat(pin.releases).isZero();
        table.endTransfer(id);
        assertThat(pin.releases).isEqualTo(1);
        assertThat(table.release(id, B1)).isEqualTo(TicketTable.ReleaseOutcome.ALREADY_GONE);
        assertThat(pin.releases).isEqualTo(1);
    }

    @Test
    void anotherRequesterOrIncarnationCannotUseOrReleaseTheTicket() {
        FakePin pin = new FakePin();
        long id = issue(B1, pin, 0);
        assertThat(table.beginTransfer(id, B2, 1))
                .isEqualTo(new TicketTable.BeginResult.Refused(TicketTable.TransferRefusal.WRONG_REQUESTER));
        assertThat(table.release(id, C1)).isEqualTo(TicketTable.ReleaseOutcome.WRONG_REQUESTER);
        assertThat(pin.releases).isZero();
    }

    @Test
    void newRequesterIncarnationRevokesTheOldOnesTickets() {
        FakePin old = new FakePin();
        FakePin other = new FakePin();
        issue(B1, old, 0);
        issue(C1, other, 0);
        assertThat(table.onRequesterChanged("b", Optional.of(B2))).isEqualTo(1);
        assertThat(old.releases).isEqualTo(1);
        assertThat(other.releases).isZero();
        assertThat(table.onRequesterChanged("c", Optional.empty())).isEqualTo(1);
        assertThat(other.releases).isEqualTo(1);
    }

    @Test
    void fullTableRefusesAndLeavesThePinWithTheCaller() {
        issue(B1, new FakePin(), 0);
        issue(B1, new FakePin(), 0);
        FakePin third = new FakePin();
        assertThat(table.issue(B1, third, 0)).isEqualTo(new TicketTable.IssueResult.Full(2));
        assertThat(third.releases).isZero();
    }

    @Test
    void everyTransitionOfTheMachineIsDefined() {
        for (TicketState s : TicketState.values()) {
            for (TicketState.Event e : TicketState.Event.values()) {
                assertThat(s.on(e, 0)).isNotNull();
            }
        }
        assertThat(TicketState.SENDING.on(TicketState.Event.END, 1)).isEqualTo(TicketState.SENDING);
        assertThat(TicketState.SENDING.on(TicketState.Event.EXPIRE, 1)).isEqualTo(TicketState.DRAINING);
        assertThat(TicketState.DRAINING.on(TicketState.Event.END, 0)).isEqualTo(TicketState.FREED);
        assertThat(TicketState.FREED.acceptsTransfer()).isFalse();
    }
}
