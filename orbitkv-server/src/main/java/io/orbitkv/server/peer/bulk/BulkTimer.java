package io.orbitkv.server.peer.bulk;

import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;

/** The data plane's one timer thread per owner: cuts handshakes and batches that overrun their deadline by closing their socket. */
final class BulkTimer {

    private BulkTimer() {
    }

    static ScheduledExecutorService create(String name) {
        ScheduledThreadPoolExecutor timer = (ScheduledThreadPoolExecutor) Executors.newScheduledThreadPool(1,
                Thread.ofPlatform().name(name).daemon().factory());
        timer.setRemoveOnCancelPolicy(true); // a cancelled deadline (the normal case) frees its entry at once
        return timer;
    }
}
