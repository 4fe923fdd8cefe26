package io.orbitkv.server.membership;

import io.orbitkv.core.catalog.Member;
import java.util.concurrent.CompletableFuture;

/**
 * Decides whether a member registered in etcd may count as live: {@link EtcdMembership} gives a
 * member no place in its view (no shards, no lookups, no peer reads) until its verification
 * completed with true.
 */
@FunctionalInterface
public interface MemberVerifier {

    /** Trusts every registered member (tests of membership alone, where endpoints serve nothing). */
    MemberVerifier TRUST_ALL = member -> CompletableFuture.completedFuture(true);

    /**
     * Verifies {@code member}; completes with true when it proved itself, false otherwise (never
     * exceptionally), on any thread.
     */
    CompletableFuture<Boolean> verify(Member member);
}
