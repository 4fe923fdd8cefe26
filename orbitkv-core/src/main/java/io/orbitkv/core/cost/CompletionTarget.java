package io.orbitkv.core.cost;

/** What "complete" means for an observed route: host bytes ready, or restored into the engine. */
public enum CompletionTarget {
    /** Verified bytes are in host DRAM (a staged slot, a fetched buffer). */
    HOST_READY,
    /** The engine can consume the state (restore copy finished and visible). */
    ENGINE_RESTORE
}
