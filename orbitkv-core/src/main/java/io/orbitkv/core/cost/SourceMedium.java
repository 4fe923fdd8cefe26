package io.orbitkv.core.cost;

/**
 * The medium a source's bytes live on. Two sources on the same medium (two SSD read routes of
 * one store; a local and a peer DRAM owner) differ only in mechanism, so measured estimates may
 * pick between them; a switch between media changes which copy serves and needs stronger evidence.
 */
public enum SourceMedium {
    DRAM,
    SSD
}
