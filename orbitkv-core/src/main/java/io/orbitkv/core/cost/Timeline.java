package io.orbitkv.core.cost;

/**
 * Host-clock instants ({@link System#nanoTime()}) of one executed operation, from which the
 * stages are derived: queue = admitted − enqueued, admission = submitted − admitted,
 * service = completed − submitted, total = completed − enqueued.
 *
 * @param enqueuedNanos  the request entered the owner's queue
 * @param admittedNanos  it left the queue (a worker or a slot took it)
 * @param submittedNanos its I/O or copy was issued
 * @param completedNanos its terminal outcome was known
 */
public record Timeline(long enqueuedNanos, long admittedNanos, long submittedNanos, long completedNanos) {
    public Timeline {
        if (admittedNanos - enqueuedNanos < 0 || submittedNanos - admittedNanos < 0
                || completedNanos - submittedNanos < 0) {
            throw new IllegalArgumentException("instants out of order: " + enqueuedNanos + ", " + admittedNanos
                    + ", " + submittedNanos + ", " + completedNanos);
        }
    }

    public long queueNanos() {
        return admittedNanos - enqueuedNanos;
    }

    public long admissionNanos() {
        return submittedNanos - admittedNanos;
    }

    public long serviceNanos() {
        return completedNanos - submittedNanos;
    }

    public long totalNanos() {
        return completedNanos - enqueuedNanos;
    }
}
