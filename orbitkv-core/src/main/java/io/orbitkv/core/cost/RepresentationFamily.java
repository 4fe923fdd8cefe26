package io.orbitkv.core.cost;

/** How the moved bytes are represented; different families never compare. */
public enum RepresentationFamily {
    /** Raw KV pages as the engine wrote them. */
    RAW,
    /** Bytes produced by a codec; must be decoded before use. */
    ENCODED
}
