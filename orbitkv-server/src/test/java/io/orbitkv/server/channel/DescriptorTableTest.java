package io.orbitkv.server.channel;

import static org.assertj.core.api.Assertions.assertThat;

import io.orbitkv.state.protocol.DescriptorTicket;
import java.nio.file.attribute.UserPrincipal;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;

/**
 * The descriptor socket's tables against a driven clock: a ticket is redeemed once, only by its
 * user and only before it expires; every descriptor the table held is closed exactly once
 * whichever way its entry ends; the bounds hold.
 */
class DescriptorTableTest {

    private static final long TTL = 5_000_000_000L;

    private record User(String name, int uid) implements UserPrincipal {
        @Override
        public String getName() {
            return name;
        }
    }

    private final List<Integer> closed = new ArrayList<>();
    private final DescriptorTable table = new DescriptorTable(2, 2, TTL, closed::add);
    private final DescriptorTable.Credentials alice = new DescriptorTable.Credentials(new User("alice", 1000));
    private final DescriptorTable.Credentials bob = new DescriptorTable.Credentials(new User("bob", 1001));
    private final Object session = new Object();

    @Test
    void aTicketRedeemsOnceForItsUserAndThenNeverAgain() {
        DescriptorTicket t = table.offer(session, new int[] {10, 11}, Optional.of(alice), 0).orElseThrow();
        assertThat(table.redeem(t, alice, 1)).isInstanceOfSatisfying(DescriptorTable.Redeemed.Granted.class,
                g -> assertThat(g.fds()).containsExactly(10, 11));
        assertThat(closed).as("granted descriptors pass to the caller, not closed").isEmpty();
        assertThat(table.redeem(t, alice, 2)).isEqualTo(new DescriptorTable.Redeemed.Refused(DescriptorTable.Refusal.UNKNOWN));
        assertThat(table.offers(2)).isZero();
    }

    @Test
    void anotherUsersPresentationBurnsTheTicket() {
        DescriptorTicket t = table.offer(session, new int[] {10}, Optional.of(alice), 0).orElseThrow();
        assertThat(table.redeem(t, bob, 1)).isEqualTo(new DescriptorTable.Redeemed.Refused(DescriptorTable.Refusal.WRONG_PEER));
        assertThat(closed).containsExactly(10);
        assertThat(table.redeem(t, alice, 2)).isEqualTo(new DescriptorTable.Redeemed.Refused(DescriptorTable.Refusal.UNKNOWN));
    }

    @Test
    void anExpiredTicketIsRefusedAndItsDescriptorsClosed() {
        DescriptorTicket t = table.offer(session, new int[] {10}, Optional.of(alice), 0).orElseThrow();
        assertThat(table.redeem(t, alice, TTL)).isEqualTo(new DescriptorTable.Redeemed.Refused(DescriptorTable.Refusal.EXPIRED));
        assertThat(closed).containsExactly(10);
        DescriptorTicket other = table.offer(session, new int[] {12}, Optional.of(alice), 0).orElseThrow();
        assertThat(table.offers(TTL - 1)).isEqualTo(1);
        assertThat(table.offers(TTL)).as("an expired entry leaves the table on the next look").isZero();
        assertThat(closed).containsExactly(10, 12);
        assertThat(table.redeem(other, alice, TTL)).isEqualTo(new DescriptorTable.Redeemed.Refused(DescriptorTable.Refusal.UNKNOWN));
    }

    @Test
    void aTicketOfAChannelWithoutCredentialsIsNeverRedeemed() {
        DescriptorTicket t = table.offer(session, new int[] {10}, Optional.empty(), 0).orElseThrow();
        assertThat(table.redeem(t, alice, 1)).isEqualTo(new DescriptorTable.Redeemed.Refused(DescriptorTable.Refusal.WRONG_PEER));
    }

    @Test
    void theBoundsHoldAndAReleasedSessionsOffersAreClosed() {
        Object other = new Object();
        table.offer(session, new int[] {10}, Optional.of(alice), 0).orElseThrow();
        table.offer(other, new int[] {11}, Optional.of(alice), 0).orElseThrow();
        assertThat(table.offer(session, new int[] {12}, Optional.of(alice), 0)).as("full: refused, its descriptor closed")
                .isEmpty();
        assertThat(closed).containsExactly(12);
        table.release(session);
        assertThat(closed).containsExactly(12, 10);
        assertThat(table.offers(0)).isEqualTo(1);
        table.clear();
        assertThat(closed).containsExactly(12, 10, 11);
        assertThat(table.offers(0)).isZero();
    }

    @Test
    void aParkedRegionIsClaimedOnceBySameUserOnly() {
        DescriptorTicket h = table.park(20, alice, 0).orElseThrow();
        assertThat(table.claim(h, Optional.of(bob), 1)).isEqualTo(new DescriptorTable.Redeemed.Refused(DescriptorTable.Refusal.WRONG_PEER));
        assertThat(closed).containsExactly(20);
        DescriptorTicket h2 = table.park(21, alice, 0).orElseThrow();
        assertThat(table.claim(h2, Optional.of(alice), 1)).isInstanceOfSatisfying(DescriptorTable.Redeemed.Granted.class,
                g -> assertThat(g.fds()).containsExactly(21));
        assertThat(table.regions(1)).isZero();
    }
}
