package io.orbitkv.reliability.crash;

import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.Region;
import io.orbitkv.reliability.manager.CampaignEngine;
import io.orbitkv.reliability.manager.DerivedPages;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.CompletableFuture;

/**
 * The client process the second crash loop kills: {@code CrashClient SOCKET MODE SEED PRELOADED
 * DIR} connects through the Java client and keeps one kind of work in flight until it is
 * SIGKILLed, printing {@code ACTIVE} once that work holds something on the Manager:
 * <ul>
 *   <li>{@code publish}: one reservation held open (reserved, never committed) and publish
 *       batches in a loop, so the kill lands between RESERVE and COMMIT;
 *   <li>{@code lease}: up to 16 HOST_READY hits over preloaded pages kept leased, the oldest
 *       released as a new one comes, many staged from SSD;
 *   <li>{@code restore}: up to 4 ENGINE_RESTORE copies into a region in flight at once.
 * </ul>
 * It never exits on its own before 120 s (a driver that died must not leave it running forever).
 */
public final class CrashClient {

    enum Mode { PUBLISH, LEASE, RESTORE }

    /** Stream of the names a publishing client invents; the preloaded pages are stream 0. */
    static final long PUBLISH_STREAM_BASE = 1L << 32;
    private static final long LIFETIME_NANOS = 120_000_000_000L;

    private CrashClient() {}

    public static void main(String[] args) throws Exception {
        Path socket = Path.of(args[0]);
        Mode mode = Mode.valueOf(args[1].toUpperCase(java.util.Locale.ROOT));
        SplittableRandom random = new SplittableRandom(Long.parseLong(args[2]));
        int preloaded = Integer.parseInt(args[3]);
        Path dir = Path.of(args[4]);
        long end = System.nanoTime() + LIFETIME_NANOS;
        try (OrbitKvClient client = CampaignEngine.connect(socket, "crash-client", 1, Duration.ofSeconds(20))) {
            switch (mode) {
                case PUBLISH -> publish(client, random, end);
                case LEASE -> lease(client, random, preloaded, end);
                case RESTORE -> restore(client, random, preloaded, dir, end);
            }
        }
        System.exit(3);
    }

    private static void active() {
        System.out.println("ACTIVE");
        System.out.flush();
    }

    private static void publish(OrbitKvClient client, SplittableRandom random, long end) {
        long stream = PUBLISH_STREAM_BASE + random.nextLong(1L << 30);
        long next = 0;
        List<byte[]> held = new ArrayList<>();
        for (int i = 0; i < 4; i++) held.add(DerivedPages.name(stream, next++));
        List<Request.PublishPage> entries = new ArrayList<>();
        for (var page : CampaignEngine.pages(held)) entries.add(new Request.PublishPage(0, page.form(),
                io.orbitkv.state.protocol.Hashes.of(List.of(page.name())), (int) page.image().byteSize()));
        client.join(client.send(new Request.PublishReserve(entries), Reply.Reserved.class), "PUBLISH_RESERVE");
        active();
        while (System.nanoTime() < end) {
            List<byte[]> batch = new ArrayList<>();
            for (int i = 0; i < 16; i++) batch.add(DerivedPages.name(stream, next++));
            client.publish(CampaignEngine.pages(batch));
        }
    }

    private static List<byte[]> prefix(SplittableRandom random, int preloaded, int pages) {
        int first = random.nextInt(preloaded - pages + 1);
        List<byte[]> names = new ArrayList<>(pages);
        for (int i = 0; i < pages; i++) names.add(DerivedPages.name(0, first + i));
        return names;
    }

    private static void lease(OrbitKvClient client, SplittableRandom random, int preloaded, long end) {
        ArrayDeque<Long> live = new ArrayDeque<>();
        long op = 0;
        boolean announced = false;
        while (System.nanoTime() < end) {
            Reply.QueryResult r = client.awaitSettled(client.query(CampaignEngine.query(++op, 0, CompletionTarget.HOST_READY,
                    prefix(random, preloaded, 1 + random.nextInt(8)))));
            live.add(op);
            if (r.hit() && !announced) {
                active();
                announced = true;
            }
            if (live.size() > 16) client.release(live.poll());
        }
    }

    private static void restore(OrbitKvClient client, SplittableRandom random, int preloaded, Path dir, long end) {
        Region region = client.registerRegion(dir.resolve("crash-client-region"), CampaignEngine.MAX_PAGE_BYTES, 32);
        ArrayDeque<Long> ops = new ArrayDeque<>();
        ArrayDeque<CompletableFuture<Reply.Completion>> copies = new ArrayDeque<>();
        long op = 0;
        boolean announced = false;
        while (System.nanoTime() < end) {
            long id = ++op;
            Reply.QueryResult r = client.awaitSettled(client.query(CampaignEngine.query(id, 0, CompletionTarget.ENGINE_RESTORE,
                    prefix(random, preloaded, 8))));
            // four copies in flight, each into its own 8 destination pages
            List<Request.RestorePage> mapping = OrbitKvClient.residentPages(r, (int) (id % 4) * 8);
            if (mapping.isEmpty()) {
                client.release(id);
                continue;
            }
            copies.add(client.restoreAsync(id, region, mapping));
            ops.add(id);
            if (!announced) {
                active();
                announced = true;
            }
            if (copies.size() >= 4) {
                client.join(copies.poll(), "RESTORE_DONE");
                client.release(ops.poll());
            }
        }
    }
}
