package io.orbitkv.reliability.crash;

import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.OrbitKvException;
import io.orbitkv.reliability.manager.CampaignEngine;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.Reply;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

/**
 * Reads back pages a Manager serves and checks every byte: each name is asked for alone (a
 * one-page HOST_READY query, so a missing page never hides the ones after it), a hit's lease is
 * read through the shared mapping and compared with the page its name derives, then released.
 * A miss is not an error (a page that was not yet on SSD when the Manager died is simply gone);
 * a served page with one wrong byte is a corrupt page.
 *
 * <p>Thread model: {@link #check} runs {@code threads} workers over one client connection (the
 * client pipelines them); the counters are the result, read after it returns.
 */
final class ServedPages {

    /** Retries of one query refused BUSY (staging budget full under the workers' own load), 5 ms apart. */
    private static final int BUSY_RETRIES = 400;

    final AtomicLong asked = new AtomicLong();
    final AtomicLong served = new AtomicLong();
    final AtomicLong corrupt = new AtomicLong();
    final AtomicReference<String> firstCorrupt = new AtomicReference<>();

    /** Asks for each of {@code names} on {@code client}, {@code threads} at a time; returns when all were checked. */
    void check(OrbitKvClient client, List<byte[]> names, int threads) throws InterruptedException {
        try (ExecutorService pool = Executors.newFixedThreadPool(threads)) {
            List<Future<?>> work = new ArrayList<>();
            for (int t = 0; t < threads; t++) {
                int worker = t;
                work.add(pool.submit(() -> {
                    long op = (long) worker << 40;
                    for (int i = worker; i < names.size(); i += threads) checkOne(client, ++op, names.get(i));
                    return null;
                }));
            }
            for (Future<?> f : work) {
                try {
                    f.get();
                } catch (ExecutionException e) {
                    throw new IllegalStateException("reading back served pages failed", e.getCause());
                }
            }
        }
    }

    private void checkOne(OrbitKvClient client, long op, byte[] name) throws InterruptedException {
        asked.incrementAndGet();
        Reply.QueryResult hit = null;
        for (int attempt = 0; hit == null; attempt++) {
            try {
                hit = client.awaitSettled(client.query(CampaignEngine.query(op, 0, CompletionTarget.HOST_READY, List.of(name))));
            } catch (OrbitKvException e) {
                if (e.code() != ErrorCode.BUSY || attempt >= BUSY_RETRIES) throw e;
                Thread.sleep(5);
            }
        }
        try {
            for (CampaignEngine.Leased l : CampaignEngine.leased(hit)) {
                served.incrementAndGet();
                long wrong = CampaignEngine.firstWrongByte(name, client.readLease(l.lease()));
                if (wrong >= 0) {
                    corrupt.incrementAndGet();
                    firstCorrupt.compareAndSet(null, "page " + java.util.HexFormat.of().formatHex(name) + " of "
                            + l.lease().lengthBytes() + " bytes: first wrong byte at " + wrong);
                }
            }
        } finally {
            client.release(op);
        }
    }
}
