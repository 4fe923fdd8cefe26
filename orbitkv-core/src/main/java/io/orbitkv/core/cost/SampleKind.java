package io.orbitkv.core.cost;

/**
 * The two sample boundaries. Both come from the same execution event but are kept under
 * different keys and are never added together: a route total already contains the waiting
 * and the service time of its operations.
 */
public enum SampleKind {
    /** Submission to completion of one physical operation (service time). */
    OPERATION,
    /** Enqueue to terminal of a complete route (queue + admission + service + completion). */
    ROUTE
}
