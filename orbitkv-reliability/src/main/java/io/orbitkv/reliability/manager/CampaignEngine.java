package io.orbitkv.reliability.manager;

import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.PageToPublish;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.Hashes;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

/**
 * The engine the crash loops and the soak play, through the real Java client: one namespace and
 * a full-attention contract of {@value #PAGE_TOKENS}-token pages, pages named and filled by
 * {@link DerivedPages}, and queries over a list of those names. Stateless helpers.
 */
public final class CampaignEngine {

    /** Tokens per page of the campaign namespace. */
    public static final int PAGE_TOKENS = 16;
    /** Shortest page image, in bytes. */
    public static final int MIN_PAGE_BYTES = 4 * 1024;
    /** Longest page image, in bytes: fits the Manager's 64 KiB slot class. */
    public static final int MAX_PAGE_BYTES = 60 * 1024;

    public static final Namespace NAMESPACE =
            new Namespace("reliability", "r1", "sha256:w", "sha256:t", "", "bf16", "nhd", PAGE_TOKENS, 1, 0, 1, 0, 1);
    public static final RecoveryContract CONTRACT = new RecoveryContract(PAGE_TOKENS, List.of(new StateGroup.Full(0)));

    private CampaignEngine() {}

    /** A client connected to {@code socket} and registered as {@code instance} at {@code epoch}. */
    public static OrbitKvClient connect(Path socket, String instance, long epoch, Duration replyTimeout) throws IOException {
        OrbitKvClient c = OrbitKvClient.connect(socket, replyTimeout);
        try {
            c.register(instance, epoch, NAMESPACE, CONTRACT);
            return c;
        } catch (RuntimeException e) {
            c.close();
            throw e;
        }
    }

    /** The length of the page named {@code name}. */
    public static int lengthBytes(byte[] name) {
        return DerivedPages.lengthBytes(name, MIN_PAGE_BYTES, MAX_PAGE_BYTES);
    }

    /** The pages named {@code names}, ready to publish. */
    public static List<PageToPublish> pages(List<byte[]> names) {
        List<PageToPublish> out = new ArrayList<>(names.size());
        for (byte[] n : names) out.add(PageToPublish.ofBlockHash(0, n, DerivedPages.image(n, lengthBytes(n))));
        return out;
    }

    /** A QUERY of operation {@code op} for the prefix whose pages are {@code names}, plus one token. */
    public static Request.Query query(long op, int revision, CompletionTarget target, List<byte[]> names) {
        return new Request.Query(op, revision, target, (long) names.size() * PAGE_TOKENS + 1, 0,
                List.of(new Request.QueryGroup(0, KeyForm.BLOCK_HASH, Hashes.of(names))));
    }

    /**
     * The pages of {@code result} that are RESIDENT (leased) as (index in the query, lease).
     * Pages of a hit are a prefix of the query, so the index names the page.
     */
    public static List<Leased> leased(Reply.QueryResult result) {
        List<Leased> out = new ArrayList<>();
        for (Reply.GroupResult g : result.groups()) {
            for (Reply.Span s : g.spans()) {
                for (int i = 0; i < s.pages().size(); i++) {
                    if (s.pages().get(i) instanceof Reply.Resident r) out.add(new Leased(s.firstPage() + i, r.lease()));
                }
            }
        }
        return out;
    }

    /** A leased page of a query result: its page index and its lease. */
    public record Leased(long page, Reply.Lease lease) {}

    /** -1 when {@code served} is exactly the page named {@code name}, else the first wrong byte's offset. */
    public static long firstWrongByte(byte[] name, MemorySegment served) {
        return DerivedPages.firstWrongByte(name, lengthBytes(name), served);
    }
}
