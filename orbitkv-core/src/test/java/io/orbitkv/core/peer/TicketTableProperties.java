package io.orbitkv.core.peer;

import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.state.Action;
import net.jqwik.api.state.ActionChain;
import net.jqwik.api.state.Transformer;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Action chains over a {@link TicketTable} with an injected clock against a plain model: each
 * ticket's requester, window end, running transfers, and whether it was asked to go away. After
 * every step: a pin is released at most once; a pin with a running transfer is never released;
 * a ticket is alive iff its pin is unreleased; the table never exceeds its capacity.
 */
class TicketTableProperties {

    static final int CAPACITY = 4;
    static final long WINDOW = 100;
    static final List<NodeIncarnation> REQUESTERS = List.of(
            new NodeIncarnation("a", 1), new NodeIncarnation("a", 2), new NodeIncarnation("b", 1));

    static final class ModelTicket {
        final NodeIncarnation requester;
        final long windowEnd;
        final TicketTableTest.FakePin pin = new TicketTableTest.FakePin();
        int transfers;
        boolean goAway;

        ModelTicket(NodeIncarnation requester, long windowEnd) {
            this.requester = requester;
            this.windowEnd = windowEnd;
        }
    }

    static final class Model {
        final TicketTable table = new TicketTable(CAPACITY, WINDOW);
        final Map<Long, ModelTicket> tickets = new HashMap<>();
        long now;

        List<Long> ids() {
            return new ArrayList<>(tickets.keySet());
        }

        void freeIfDone(long id) {
            ModelTicket t = tickets.get(id);
            if (t.goAway && t.transfers == 0) tickets.remove(id);
        }
    }

    @Property(tries = 200)
    void tableMatchesModel(@ForAll("chains") ActionChain<Model> chain) {
        List<ModelTicket> everIssued = new ArrayList<>();
        chain.withInvariant("pins", m -> {
                    assertThat(m.table.size()).isEqualTo(m.tickets.size()).isLessThanOrEqualTo(CAPACITY);
                    assertThat(m.table.ticketIds()).containsExactlyInAnyOrderElementsOf(m.tickets.keySet());
                    for (ModelTicket t : m.tickets.values()) {
                        assertThat(t.pin.releases).as("alive ticket's pin released").isZero();
                        if (!everIssued.contains(t)) everIssued.add(t);
                    }
                    for (ModelTicket t : everIssued) {
                        assertThat(t.pin.releases).isLessThanOrEqualTo(1);
                        if (t.transfers > 0) assertThat(t.pin.releases).as("pin freed under a transfer").isZero();
                        if (!m.tickets.containsValue(t)) assertThat(t.pin.releases).isEqualTo(1);
                    }
                    assertThat(m.table.activeTransfers())
                            .isEqualTo(m.tickets.values().stream().mapToInt(t -> t.transfers).sum());
                })
                .run();
    }

    @Provide
    Arbitrary<ActionChain<Model>> chains() {
        return ActionChain.startWith(Model::new)
                .withAction(3, new Issue())
                .withAction(3, new Begin())
                .withAction(3, new End())
                .withAction(2, new Release())
                .withAction(2, new Tick())
                .withAction(1, new RequesterChanged())
                .withMaxTransformations(60);
    }

    static final class Issue implements Action.Independent<Model> {
        @Override
        public Arbitrary<Transformer<Model>> transformer() {
            return Arbitraries.of(REQUESTERS).map(r -> Transformer.mutate("issue " + r, m -> {
                ModelTicket t = new ModelTicket(r, m.now + WINDOW);
                switch (m.table.issue(r, t.pin, m.now)) {
                    case TicketTable.IssueResult.Granted g -> {
                        assertThat(m.tickets.size()).isLessThan(CAPACITY);
                        assertThat(g.ticket().windowEndNanos()).isEqualTo(t.windowEnd);
                        m.tickets.put(g.ticket().ticketId(), t);
                    }
                    case TicketTable.IssueResult.Full f -> assertThat(m.tickets.size()).isEqualTo(CAPACITY);
                }
            }));
        }
    }

    static final class Begin implements Action.Dependent<Model> {
        @Override
        public boolean precondition(Model m) {
            return !m.tickets.isEmpty();
        }

        @Override
        public Arbitrary<Transformer<Model>> transformer(Model m) {
            return Arbitraries.of(m.ids()).flatMap(id -> Arbitraries.of(REQUESTERS).map(r -> Transformer.mutate(
                    "begin " + id + " by " + r, s -> {
                        ModelTicket t = s.tickets.get(id);
                        boolean allowed = t.requester.equals(r) && !t.goAway && s.now < t.windowEnd;
                        TicketTable.BeginResult got = s.table.beginTransfer(id, r, s.now);
                        assertThat(got instanceof TicketTable.BeginResult.Reading).isEqualTo(allowed);
                        if (allowed) t.transfers++;
                    })));
        }
    }

    static final class End implements Action.Dependent<Model> {
        @Override
        public boolean precondition(Model m) {
            return m.tickets.values().stream().anyMatch(t -> t.transfers > 0);
        }

        @Override
        public Arbitrary<Transformer<Model>> transformer(Model m) {
            List<Long> reading = m.tickets.entrySet().stream().filter(e -> e.getValue().transfers > 0).map(Map.Entry::getKey).toList();
            return Arbitraries.of(reading).map(id -> Transformer.mutate("end " + id, s -> {
                s.table.endTransfer(id);
                s.tickets.get(id).transfers--;
                s.freeIfDone(id);
            }));
        }
    }

    static final class Release implements Action.Dependent<Model> {
        @Override
        public boolean precondition(Model m) {
            return !m.tickets.isEmpty();
        }

        @Override
        public Arbitrary<Transformer<Model>> transformer(Model m) {
            return Arbitraries.of(m.ids()).map(id -> Transformer.mutate("release " + id, s -> {
                ModelTicket t = s.tickets.get(id);
                TicketTable.ReleaseOutcome expected = t.goAway ? TicketTable.ReleaseOutcome.ALREADY_GONE
                        : t.transfers > 0 ? TicketTable.ReleaseOutcome.DEFERRED : TicketTable.ReleaseOutcome.FREED;
                assertThat(s.table.release(id, t.requester)).isEqualTo(expected);
                t.goAway = true;
                s.freeIfDone(id);
                // A second release of the same ticket changes nothing.
                assertThat(s.table.release(id, t.requester)).isEqualTo(TicketTable.ReleaseOutcome.ALREADY_GONE);
            }));
        }
    }

    static final class Tick implements Action.Independent<Model> {
        @Override
        public Arbitrary<Transformer<Model>> transformer() {
            return Arbitraries.longs().between(1, WINDOW).map(dt -> Transformer.mutate("tick +" + dt, s -> {
                s.now += dt;
                s.table.onTick(s.now);
                for (long id : s.ids()) {
                    ModelTicket t = s.tickets.get(id);
                    if (s.now >= t.windowEnd) t.goAway = true;
                    s.freeIfDone(id);
                }
            }));
        }
    }

    static final class RequesterChanged implements Action.Independent<Model> {
        @Override
        public Arbitrary<Transformer<Model>> transformer() {
            return Arbitraries.of(REQUESTERS).map(current -> Transformer.mutate("live " + current, s -> {
                s.table.onRequesterChanged(current.nodeId(), Optional.of(current));
                for (long id : s.ids()) {
                    ModelTicket t = s.tickets.get(id);
                    if (t.requester.nodeId().equals(current.nodeId()) && !t.requester.equals(current)) t.goAway = true;
                    s.freeIfDone(id);
                }
            }));
        }
    }
}
