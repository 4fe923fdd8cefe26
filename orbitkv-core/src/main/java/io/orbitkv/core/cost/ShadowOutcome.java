package io.orbitkv.core.cost;

/** Result of comparing the executed route's estimate with one alternative's. */
public enum ShadowOutcome {
    /** The alternative is faster beyond both errors and the 5 % margin. */
    FASTER,
    /** Both are warm and comparable, but the guard is not passed. */
    WITHIN_MARGIN,
    /** Different target, resource, representation, shape or sample kind: no comparison is meaningful. */
    INCOMPARABLE,
    /** One of the two has no warm estimate. */
    UNKNOWN
}
