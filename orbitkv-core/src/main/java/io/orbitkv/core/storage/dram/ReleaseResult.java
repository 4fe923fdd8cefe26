package io.orbitkv.core.storage.dram;

/** Outcome of {@link Lease#release()}: the first call releases, later calls change nothing. */
public enum ReleaseResult {
    /** This call ended the lease. */
    RELEASED,
    /** The lease had already been released; the reference count was not touched. */
    ALREADY_RELEASED
}
