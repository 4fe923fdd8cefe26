package io.orbitkv.core.cost;

/** How an observed operation ended. Only {@link #SUCCEEDED} trains an estimate. */
public enum Terminal {
    SUCCEEDED,
    /** An error from the device, the kernel or the peer. */
    FAILED,
    /** The caller gave up; the physical work may still have run to completion. */
    CANCELLED,
    /** A deadline passed first: a censored sample, not a completion time. */
    TIMED_OUT
}
