package io.orbitkv.core.engine;

import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.Hashes;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.ProtocolLimits;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.statistics.Statistics;
import net.jqwik.api.constraints.Size;
import net.jqwik.api.lifecycle.AfterContainer;
import net.jqwik.api.lifecycle.BeforeContainer;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * Any sequence of well-formed requests, valid for the session or not (unknown groups, ids,
 * regions, revisions, restores of misses, frames before REGISTER), is answered with exactly one
 * reply of the right kind and never an exception; after the connection closes nothing is held.
 */
class ManagerSessionProperties {

    static ManagerFixture m;
    static Path regionFile;
    static final AtomicInteger INSTANCES = new AtomicInteger();
    static final RecoveryContract HYBRID = new RecoveryContract(16, List.of(new StateGroup.Full(0),
            new StateGroup.SlidingWindow(1, 32, 16), new StateGroup.Recurrent(2)));
    static final Namespace NS = ManagerFixture.namespace("session-properties");

    @BeforeContainer
    static void open() throws IOException {
        Path dir = Files.createTempDirectory("orbitkv-session-properties");
        m = new ManagerFixture(dir, 128, new ProtocolLimits(4 << 20, 64, 65_536, 4_096, 4_096, 65_536, 256, 256,
                4_096, 256, 3, 4, 2), ManagerBounds.DEFAULTS.withMaxLeases(40));
        regionFile = Files.write(dir.resolve("region"), new byte[4 * ManagerFixture.SLOT]);
    }

    @AfterContainer
    static void close() {
        m.close();
    }

    @Property(tries = 30)
    void everyRequestGetsOneReplyAndACloseReleasesEverything(@ForAll @Size(min = 10, max = 60) List<Integer> actions) {
        Client c = m.connect();
        int instance = INSTANCES.incrementAndGet();
        List<Long> reservationIds = new ArrayList<>();
        if (actions.getFirst() % 5 != 0) c.registerOk("prop-" + instance, 1, NS, HYBRID); // else: frames before REGISTER
        for (int a : actions) {
            int x = Math.floorMod(a, 1 << 20);
            Request r = request(x, instance, reservationIds);
            Reply reply = c.send(r);
            assertThat(reply).isNotNull();
            Statistics.collect(reply instanceof Reply.Error e ? "ERROR " + e.code() : reply.type().name());
            if (reply instanceof Reply.Error e) {
                assertThat(e.code()).as("%s", r).isNotIn(ErrorCode.INTERNAL, ErrorCode.MALFORMED);
            } else {
                assertThat(replyFits(r, reply)).as("%s answered by %s", r, reply).isTrue();
            }
            if (reply instanceof Reply.Reserved res) {
                for (Reply.ReserveOutcome o : res.outcomes()) {
                    if (o instanceof Reply.Granted g) reservationIds.add(g.reservationId());
                }
            }
        }
        c.close();
        m.assertNothingHeld();
        assertThat(m.core.status().regions()).isZero();
    }

    private static Request request(int x, int instance, List<Long> reservationIds) {
        long op = 1 + x % 4;
        int revision = (x >> 2) % 3;
        int pages = (x >> 4) % 6;
        long prompt = (x >> 7) % 3;
        return switch ((x >> 9) % 16) {
            case 0 -> new Request.Register("prop-" + instance, 1, NS, HYBRID);
            case 1 -> new Request.RegisterRegion(x % 5 == 0 ? "/nonexistent/region" : regionFile.toString(),
                    4L * ManagerFixture.SLOT, ManagerFixture.SLOT, 4);
            case 14 -> {
                Request.Query q = Client.query(op, 0, CompletionTarget.HOST_READY, pages * 16L + 1 + x % 16,
                        (x % 3 == 0 && pages > 1) ? 16 : 0, prompt, new int[] {0, 1, 2}, pages);
                yield new Request.Prepare(op, x % 50, x % 256, q.promptTokens(), q.originTokens(), q.groups());
            }
            case 2, 3, 12, 13 -> Client.query(op, revision, x % 2 == 0 ? CompletionTarget.HOST_READY : CompletionTarget.ENGINE_RESTORE,
                    pages * 16L + 1 + x % 16, (x % 3 == 0 && pages > 1) ? 16 : 0, prompt,
                    x % 7 == 0 ? new int[] {0, 1} : new int[] {0, 1, 2}, pages);
            case 4 -> new Request.QueryPoll(op, revision);
            case 5 -> new Request.Cancel(op);
            case 6 -> new Request.Release(op);
            case 7, 15 -> {
                List<Request.PublishPage> entries = new ArrayList<>();
                for (int i = 0; i <= pages % 3; i++) {
                    int group = (x + i) % 4; // group 3 is not in the contract
                    entries.add(new Request.PublishPage(group, KeyForm.BLOCK_HASH,
                            Hashes.of(List.of(Client.hash(prompt, group, (x + i) % 5))), ManagerFixture.PAGE_BYTES));
                }
                yield new Request.PublishReserve(entries);
            }
            case 8 -> new Request.PublishCommit(List.of(reservationIds.isEmpty() || x % 5 == 0 ? 999L
                    : reservationIds.get(x % reservationIds.size())));
            case 9 -> new Request.PublishAbort(List.of(reservationIds.isEmpty() || x % 5 == 0 ? 998L
                    : reservationIds.get(x % reservationIds.size())));
            case 10 -> new Request.Restore(op, x % 3, List.of(new Request.RestorePage(x % 3, pages, x % 5)));
            case 11 -> {
                if (x % 4 == 0) yield new Request.Stats();
                if (x % 4 == 2) {
                    int group = (x >> 3) % 4; // group 3 is not in the contract
                    yield new Request.Contains(List.of(new Request.QueryGroup(group, KeyForm.BLOCK_HASH,
                            Client.hashes(prompt, group, pages))));
                }
                io.orbitkv.state.protocol.HintKind kind = io.orbitkv.state.protocol.HintKind.values()[(x >> 1) % 5];
                int group = (x >> 3) % 4; // group 3 is not in the contract
                yield new Request.Hint(kind, kind == io.orbitkv.state.protocol.HintKind.PIN ? 1 + x % 5_000 : 0,
                        List.of(new Request.QueryGroup(group, KeyForm.BLOCK_HASH, Client.hashes(prompt, group, pages))));
            }
            default -> throw new IllegalStateException("unreachable");
        };
    }

    private static boolean replyFits(Request r, Reply reply) {
        return switch (r) {
            case Request.Register ignored -> reply instanceof Reply.Registered;
            case Request.RegisterRegion ignored -> reply instanceof Reply.RegionRegistered;
            case Request.Query q -> reply instanceof Reply.QueryResult qr && qr.operationId() == q.operationId()
                    && qr.revision() == q.revision();
            case Request.QueryPoll p -> reply instanceof Reply.QueryResult qr && qr.revision() == p.revision();
            case Request.Cancel ignored -> reply instanceof Reply.Cancelled;
            case Request.Release ignored -> reply instanceof Reply.Released;
            case Request.PublishReserve pr -> reply instanceof Reply.Reserved res
                    && res.outcomes().size() == pr.pages().size();
            case Request.PublishCommit pc -> reply instanceof Reply.Committed co
                    && co.outcomes().size() == pc.reservationIds().size();
            case Request.PublishAbort pa -> reply instanceof Reply.Aborted ab
                    && ab.outcomes().size() == pa.reservationIds().size();
            case Request.Restore ignored -> reply instanceof Reply.RestoreAccepted;
            case Request.Prepare p -> reply instanceof Reply.Prepared pr && pr.operationId() == p.operationId();
            case Request.Stats ignored -> reply instanceof Reply.StatsReply st
                    && st.counters().stream().map(Reply.Counter::name).toList().containsAll(Set.of("leases", "operations"));
            case Request.Hint h -> reply instanceof Reply.Hinted hd && hd.kind() == h.kind()
                    && (long) hd.applied() + hd.notResident() + hd.refusedBudget() == h.pageCount();
            case Request.Contains c -> reply instanceof Reply.Contained cd && cd.locations().size() == c.pageCount();
        };
    }
}
