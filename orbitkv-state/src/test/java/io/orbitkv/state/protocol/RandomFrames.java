package io.orbitkv.state.protocol;

import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.Random;

/**
 * Random valid frames of every type, small enough that a property runs hundreds of tries in a
 * second. Deterministic for a given {@link Random}, so a failing seed replays.
 */
final class RandomFrames {

    private RandomFrames() {
    }

    /** A random valid frame of {@code type}. */
    static Frame of(FrameType type, Random r) {
        return switch (type) {
            case REGISTER -> register(r);
            case REGISTER_REGION -> {
                int pageBytes = 1 + r.nextInt(1 << 21);
                int pages = 1 + r.nextInt(4096);
                Request.RegionSource source = r.nextBoolean() ? new Request.FromPath(text(r, 1))
                        : new Request.FromDescriptor(ticket(r));
                yield new Request.RegisterRegion(source, (long) pageBytes * pages + r.nextInt(4096), pageBytes, pages);
            }
            case QUERY -> query(r);
            case QUERY_POLL -> new Request.QueryPoll(id(r), r.nextInt(Integer.MAX_VALUE));
            case CANCEL -> new Request.Cancel(id(r));
            case PUBLISH_RESERVE -> {
                List<Request.PublishPage> pages = new ArrayList<>();
                for (int i = 0, n = 1 + r.nextInt(6); i < n; i++) {
                    KeyForm form = pick(r, KeyForm.values());
                    int width = form == KeyForm.STATE_KEY ? 32 : 1 + r.nextInt(64);
                    pages.add(new Request.PublishPage(r.nextInt(8), form, Hashes.packed(width, bytes(r, width)),
                            1 + r.nextInt(Integer.MAX_VALUE)));
                }
                yield new Request.PublishReserve(pages, r.nextBoolean() ? Optional.empty()
                        : Optional.of("salt-" + r.nextInt(1000)));
            }
            case PUBLISH_COMMIT -> new Request.PublishCommit(ids(r));
            case PUBLISH_ABORT -> new Request.PublishAbort(ids(r));
            case RESTORE -> {
                List<Request.RestorePage> pages = new ArrayList<>();
                for (int i = 0, n = 1 + r.nextInt(8); i < n; i++) {
                    pages.add(new Request.RestorePage(r.nextInt(3), 100L * i + r.nextInt(100), i * 7 + r.nextInt(7)));
                }
                yield new Request.Restore(id(r), r.nextInt(64), pages);
            }
            case RELEASE -> new Request.Release(id(r));
            case STATS -> new Request.Stats();
            case PREPARE -> {
                Request.Query q = query(r);
                yield new Request.Prepare(q.operationId(), r.nextInt(Integer.MAX_VALUE), r.nextInt(256), q.promptTokens(),
                        q.originTokens(), q.groups());
            }
            case HINT -> {
                HintKind kind = pick(r, HintKind.values());
                Request.Query q = query(r);
                yield new Request.Hint(kind, kind == HintKind.PIN ? 1 + r.nextInt(Integer.MAX_VALUE) : 0, q.groups());
            }
            case CONTAINS -> new Request.Contains(query(r).groups());
            case REGISTERED -> {
                List<Reply.ArenaFile> arenas = new ArrayList<>();
                for (int i = 0, n = 1 + r.nextInt(4); i < n; i++) {
                    int slot = 1 + r.nextInt(1 << 22);
                    arenas.add(new Reply.ArenaFile((long) slot * (1 + r.nextInt(1 << 12)), slot));
                }
                ProtocolLimits limits = r.nextBoolean() ? ProtocolLimits.DEFAULTS : new ProtocolLimits(
                        16 + r.nextInt(1 << 20), 1 + r.nextInt(100), 1 + r.nextInt(1 << 20), 1 + r.nextInt(9999),
                        1 + r.nextInt(9999), 1 + r.nextInt(9999), 1 + r.nextInt(999), 1 + r.nextInt(999),
                        1 + r.nextInt(9999), 1 + r.nextInt(9999), 1 + r.nextInt(9999), 1 + r.nextInt(9999), 1 + r.nextInt(99));
                yield new Reply.Registered(id(r), r.nextLong(Long.MAX_VALUE), limits, ticket(r),
                        "/run/orbitkv-" + r.nextInt(1000) + "/manager.sock.fd", arenas);
            }
            case REGION_REGISTERED -> new Reply.RegionRegistered(r.nextInt(Integer.MAX_VALUE));
            case QUERY_RESULT -> queryResult(r);
            case CANCELLED -> new Reply.Cancelled(id(r), r.nextBoolean(), r.nextInt(Integer.MAX_VALUE));
            case RELEASED -> new Reply.Released(id(r), r.nextBoolean(), r.nextInt(Integer.MAX_VALUE));
            case RESERVED -> {
                List<Reply.ReserveOutcome> outcomes = new ArrayList<>();
                for (int i = 0, n = 1 + r.nextInt(8); i < n; i++) {
                    outcomes.add(r.nextBoolean()
                            ? new Reply.Granted(id(r), r.nextInt(256), r.nextLong(Long.MAX_VALUE))
                            : new Reply.Refused(pick(r, Refusal.values())));
                }
                yield new Reply.Reserved(outcomes);
            }
            case COMMITTED -> new Reply.Committed(settle(r, SettleOutcome.SEALED, SettleOutcome.NOT_FOUND, SettleOutcome.DISCARDED));
            case ABORTED -> new Reply.Aborted(settle(r, SettleOutcome.ABORTED, SettleOutcome.NOT_FOUND));
            case RESTORE_ACCEPTED -> new Reply.RestoreAccepted(id(r), 1 + r.nextInt(Integer.MAX_VALUE));
            case HINTED -> new Reply.Hinted(pick(r, HintKind.values()), r.nextInt(Integer.MAX_VALUE),
                    r.nextInt(Integer.MAX_VALUE), r.nextInt(Integer.MAX_VALUE));
            case CONTAINED -> {
                List<PageLocation> locations = new ArrayList<>();
                for (int i = 0, n = r.nextInt(64); i < n; i++) locations.add(pick(r, PageLocation.values()));
                yield new Reply.Contained(r.nextBoolean(), locations);
            }
            case STATS_REPLY -> {
                List<Reply.Counter> counters = new ArrayList<>();
                for (int i = 0, n = r.nextInt(6); i < n; i++) {
                    counters.add(new Reply.Counter("counter_" + i + "." + r.nextInt(1000), r.nextLong(Long.MAX_VALUE)));
                }
                yield new Reply.StatsReply(counters);
            }
            case PREPARED -> {
                Reply.PrepareOutcome outcome = pick(r, Reply.PrepareOutcome.values());
                boolean refused = outcome == Reply.PrepareOutcome.REFUSED;
                yield new Reply.Prepared(id(r), outcome, refused ? 0 : r.nextInt(Integer.MAX_VALUE),
                        r.nextInt(Integer.MAX_VALUE), r.nextInt(Integer.MAX_VALUE), refused ? 0 : r.nextLong(Long.MAX_VALUE));
            }
            case COMPLETION -> new Reply.Completion(id(r), r.nextInt(Integer.MAX_VALUE), pick(r, CompletionEvent.values()),
                    switch (r.nextInt(3)) {
                        case 0 -> Reply.Settled.OK;
                        case 1 -> Reply.Settled.CANCELLED;
                        default -> new Reply.Failed(pick(r, ErrorCode.values()));
                    });
            case ERROR -> new Reply.Error(pick(r, ErrorCode.values()), text(r, 0));
        };
    }

    /** A request id allowed for {@code type}. */
    static long requestId(FrameType type, Random r) {
        if (type == FrameType.COMPLETION) return FrameLayout.NO_REQUEST;
        long id = r.nextLong();
        return id == 0 ? 1 : id;
    }

    static Namespace namespace(Random r, int pageTokens) {
        int tp = 1 + r.nextInt(8);
        return new Namespace(text(r, 1), text(r, 1), "sha256:" + Long.toHexString(r.nextLong()), text(r, 1),
                text(r, 0), "bf16", "nhd", pageTokens, tp, r.nextInt(tp), 1, 0, 1 + r.nextInt(3));
    }

    static RecoveryContract contract(Random r, int pageTokens) {
        List<StateGroup> groups = new ArrayList<>();
        for (int i = 0, n = 1 + r.nextInt(4); i < n; i++) {
            groups.add(switch (r.nextInt(3)) {
                case 0 -> new StateGroup.Full(i);
                case 1 -> new StateGroup.SlidingWindow(i, 1 + r.nextInt(1 << 17), r.nextInt(64));
                default -> new StateGroup.Recurrent(i);
            });
        }
        return new RecoveryContract(pageTokens, groups);
    }

    private static Request.Register register(Random r) {
        int pageTokens = 1 + r.nextInt(256);
        return new Request.Register(text(r, 1), r.nextLong(Long.MAX_VALUE), namespace(r, pageTokens), contract(r, pageTokens));
    }

    private static Request.Query query(Random r) {
        List<Request.QueryGroup> groups = new ArrayList<>();
        for (int g = 0, n = 1 + r.nextInt(3); g < n; g++) {
            KeyForm form = pick(r, KeyForm.values());
            int width = form == KeyForm.STATE_KEY ? 32 : pick(r, new Integer[] {8, 32, 1 + r.nextInt(64)});
            int pages = r.nextInt(20);
            groups.add(new Request.QueryGroup(g * 3, form, Hashes.packed(width, bytes(r, width * pages))));
        }
        long prompt = 1 + r.nextLong(1 << 20);
        return new Request.Query(id(r), r.nextInt(Integer.MAX_VALUE), pick(r, CompletionTarget.values()), prompt,
                r.nextLong(prompt), r.nextBoolean() ? 0 : r.nextInt(Integer.MAX_VALUE), groups);
    }

    private static Reply.QueryResult queryResult(Random r) {
        QueryStatus status = pick(r, QueryStatus.values());
        boolean hit = r.nextBoolean();
        List<Reply.GroupResult> groups = new ArrayList<>();
        for (int g = 0, n = r.nextInt(4); g < n; g++) {
            List<Reply.Span> spans = new ArrayList<>();
            long next = r.nextInt(10);
            for (int s = 0, m = r.nextInt(3); s < m; s++) {
                List<Reply.PageResult> pages = new ArrayList<>();
                for (int p = 0, k = 1 + r.nextInt(10); p < k; p++) pages.add(page(r, status, hit));
                spans.add(new Reply.Span(next, pages));
                next += pages.size() + r.nextInt(5);
            }
            groups.add(new Reply.GroupResult(g, spans));
        }
        return new Reply.QueryResult(id(r), r.nextInt(Integer.MAX_VALUE), status, hit, r.nextLong(1L << 40), groups);
    }

    private static Reply.PageResult page(Random r, QueryStatus status, boolean hit) {
        PageState state = status == QueryStatus.PENDING ? pick(r, PageState.values())
                : hit ? pick(r, new PageState[] {PageState.RESIDENT, PageState.READY})
                : pick(r, new PageState[] {PageState.MISS, PageState.CANDIDATE});
        return switch (state) {
            case MISS -> Reply.Unleased.MISS;
            case CANDIDATE -> Reply.Unleased.CANDIDATE;
            case RESERVED -> Reply.Unleased.RESERVED;
            case READY -> Reply.Unleased.READY;
            case RESIDENT -> new Reply.Resident(new Reply.Lease(r.nextInt(16), r.nextLong(1L << 40), 1 + r.nextInt(1 << 21)));
        };
    }

    private static List<Long> ids(Random r) {
        List<Long> ids = new ArrayList<>();
        for (int i = 0, n = 1 + r.nextInt(8); i < n; i++) ids.add(1000L * i + 1 + r.nextInt(999));
        return ids;
    }

    private static List<SettleOutcome> settle(Random r, SettleOutcome... allowed) {
        List<SettleOutcome> out = new ArrayList<>();
        for (int i = 0, n = 1 + r.nextInt(8); i < n; i++) out.add(pick(r, allowed));
        return out;
    }

    private static long id(Random r) {
        return 1 + r.nextLong(Long.MAX_VALUE - 1);
    }

    private static String text(Random r, int min) {
        int[] cps = "abc/xyz_09.-ü模😀".codePoints().toArray();
        StringBuilder sb = new StringBuilder();
        for (int i = 0, n = min + r.nextInt(16); i < n; i++) sb.appendCodePoint(cps[r.nextInt(cps.length)]);
        return sb.toString();
    }

    private static byte[] bytes(Random r, int n) {
        byte[] b = new byte[n];
        r.nextBytes(b);
        return b;
    }

    private static <T> T pick(Random r, T[] values) {
        return values[r.nextInt(values.length)];
    }

    private static DescriptorTicket ticket(java.util.Random r) {
        byte[] b = new byte[DescriptorTicket.BYTES];
        r.nextBytes(b);
        return DescriptorTicket.of(b);
    }
}
