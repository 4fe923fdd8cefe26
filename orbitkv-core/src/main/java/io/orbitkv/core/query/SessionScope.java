package io.orbitkv.core.query;

import io.orbitkv.state.Namespace;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.RecoveryContract;

import java.util.Objects;

/**
 * What a registered session may see: its namespace (the DRAM tier's small id, and the digest
 * that block-hash keys are derived from and SSD extents record) and its recovery contract. Every
 * key a session names is derived from, or checked against, this scope, so a client only ever
 * sees pages of the namespace it registered.
 *
 * <p>Immutable and thread-safe; the digest is computed once here (SHA-256 of the canonical
 * namespace bytes) instead of once per query page.
 */
public final class SessionScope {

    private final Namespace namespace;
    private final int namespaceId;
    private final RecoveryContract contract;
    private final byte[] digestBytes;
    private final NamespaceDigest digest;

    public SessionScope(Namespace namespace, int namespaceId, RecoveryContract contract) {
        this.namespace = Objects.requireNonNull(namespace, "namespace");
        this.contract = Objects.requireNonNull(contract, "contract");
        this.namespaceId = namespaceId;
        this.digestBytes = namespace.digest();
        this.digest = NamespaceDigest.ofBytes(digestBytes);
    }

    public Namespace namespace() {
        return namespace;
    }

    /** The DRAM tier's id for the namespace; images carry it. */
    public int namespaceId() {
        return namespaceId;
    }

    public RecoveryContract contract() {
        return contract;
    }

    /** The namespace digest that {@code StateKeys.forBlockHash} binds keys to (a copy). */
    public byte[] digestBytes() {
        return digestBytes.clone();
    }

    byte[] digestBytesShared() {
        return digestBytes;
    }

    /** The digest as SSD extent headers record it. */
    public NamespaceDigest digest() {
        return digest;
    }
}
