package io.orbitkv.state;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import java.util.Random;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;
import net.jqwik.api.constraints.IntRange;

/** The canonical encoding round-trips, and every field is bound into the digest and the keys. */
class NamespaceProperties {

    private static final int FIELDS = 13;

    @Provide
    Arbitrary<Namespace> namespaces() {
        return Arbitraries.randomValue(NamespaceProperties::randomNamespace);
    }

    static Namespace randomNamespace(Random r) {
        int tp = 1 + r.nextInt(8);
        int pp = 1 + r.nextInt(4);
        return new Namespace(text(r, false), text(r, false), text(r, false), text(r, false), text(r, true),
                text(r, false), text(r, false), 1 + r.nextInt(256), tp, r.nextInt(tp), pp, r.nextInt(pp),
                1 + r.nextInt(3));
    }

    private static String text(Random r, boolean mayBeEmpty) {
        String alphabet = "abcxyz0123-_/.ü模😀";
        int length = (mayBeEmpty ? 0 : 1) + r.nextInt(12);
        StringBuilder sb = new StringBuilder();
        int[] cps = alphabet.codePoints().toArray();
        for (int i = 0; i < length; i++) sb.appendCodePoint(cps[r.nextInt(cps.length)]);
        return sb.toString();
    }

    @Property(tries = 300)
    void canonicalEncodingRoundTrips(@ForAll("namespaces") Namespace ns) {
        assertThat(Namespace.decode(ns.canonicalBytes())).isEqualTo(new NamespaceDecoding.Decoded(ns));
    }

    @Property(tries = 300)
    void changingAnyFieldChangesTheDigestAndEveryKey(@ForAll("namespaces") Namespace ns,
                                                     @ForAll @IntRange(min = 0, max = FIELDS - 1) int field,
                                                     @ForAll @IntRange(min = 1, max = 1000) int seed) {
        Namespace changed = mutate(ns, field, new Random(seed));
        assertThat(changed).isNotEqualTo(ns);
        assertThat(changed.digest()).isNotEqualTo(ns.digest());
        byte[] blockHash = {1, 2, 3, 4, 5, 6, 7, 8};
        assertThat(StateKeys.forBlockHash(changed.digest(), 0, blockHash))
                .isNotEqualTo(StateKeys.forBlockHash(ns.digest(), 0, blockHash));
        int[] tokens = {5, 6, 7, 8, 9, 10, 11, 12};
        List<StateKey> a = StateKeys.forTokens(ns.digest(), 0, tokens, 2, new byte[0]);
        List<StateKey> b = StateKeys.forTokens(changed.digest(), 0, tokens, 2, new byte[0]);
        assertThat(a).hasSize(4);
        for (int i = 0; i < a.size(); i++) assertThat(b.get(i)).isNotEqualTo(a.get(i));
    }

    /** A namespace that differs from {@code ns} in field {@code field} only. */
    static Namespace mutate(Namespace ns, int field, Random r) {
        String s = "~" + r.nextInt(100);
        return switch (field) {
            case 0 -> new Namespace(ns.modelId() + s, ns.revision(), ns.weightsDigest(), ns.tokenizerDigest(), ns.adapterId(), ns.dtype(), ns.kvLayout(), ns.pageTokens(), ns.tpSize(), ns.tpRank(), ns.ppSize(), ns.ppRank(), ns.formatVersion());
            case 1 -> new Namespace(ns.modelId(), ns.revision() + s, ns.weightsDigest(), ns.tokenizerDigest(), ns.adapterId(), ns.dtype(), ns.kvLayout(), ns.pageTokens(), ns.tpSize(), ns.tpRank(), ns.ppSize(), ns.ppRank(), ns.formatVersion());
            case 2 -> new Namespace(ns.modelId(), ns.revision(), ns.weightsDigest() + s, ns.tokenizerDigest(), ns.adapterId(), ns.dtype(), ns.kvLayout(), ns.pageTokens(), ns.tpSize(), ns.tpRank(), ns.ppSize(), ns.ppRank(), ns.formatVersion());
            case 3 -> new Namespace(ns.modelId(), ns.revision(), ns.weightsDigest(), ns.tokenizerDigest() + s, ns.adapterId(), ns.dtype(), ns.kvLayout(), ns.pageTokens(), ns.tpSize(), ns.tpRank(), ns.ppSize(), ns.ppRank(), ns.formatVersion());
            case 4 -> new Namespace(ns.modelId(), ns.revision(), ns.weightsDigest(), ns.tokenizerDigest(), ns.adapterId() + s, ns.dtype(), ns.kvLayout(), ns.pageTokens(), ns.tpSize(), ns.tpRank(), ns.ppSize(), ns.ppRank(), ns.formatVersion());
            case 5 -> new Namespace(ns.modelId(), ns.revision(), ns.weightsDigest(), ns.tokenizerDigest(), ns.adapterId(), ns.dtype() + s, ns.kvLayout(), ns.pageTokens(), ns.tpSize(), ns.tpRank(), ns.ppSize(), ns.ppRank(), ns.formatVersion());
            case 6 -> new Namespace(ns.modelId(), ns.revision(), ns.weightsDigest(), ns.tokenizerDigest(), ns.adapterId(), ns.dtype(), ns.kvLayout() + s, ns.pageTokens(), ns.tpSize(), ns.tpRank(), ns.ppSize(), ns.ppRank(), ns.formatVersion());
            case 7 -> new Namespace(ns.modelId(), ns.revision(), ns.weightsDigest(), ns.tokenizerDigest(), ns.adapterId(), ns.dtype(), ns.kvLayout(), ns.pageTokens() + 1 + r.nextInt(4), ns.tpSize(), ns.tpRank(), ns.ppSize(), ns.ppRank(), ns.formatVersion());
            case 8 -> new Namespace(ns.modelId(), ns.revision(), ns.weightsDigest(), ns.tokenizerDigest(), ns.adapterId(), ns.dtype(), ns.kvLayout(), ns.pageTokens(), ns.tpSize() + 1, ns.tpRank(), ns.ppSize(), ns.ppRank(), ns.formatVersion());
            case 9 -> withTpRank(ns, (ns.tpRank() + 1) % Math.max(2, ns.tpSize()));
            case 10 -> new Namespace(ns.modelId(), ns.revision(), ns.weightsDigest(), ns.tokenizerDigest(), ns.adapterId(), ns.dtype(), ns.kvLayout(), ns.pageTokens(), ns.tpSize(), ns.tpRank(), ns.ppSize() + 1, ns.ppRank(), ns.formatVersion());
            case 11 -> withPpRank(ns, (ns.ppRank() + 1) % Math.max(2, ns.ppSize()));
            case 12 -> new Namespace(ns.modelId(), ns.revision(), ns.weightsDigest(), ns.tokenizerDigest(), ns.adapterId(), ns.dtype(), ns.kvLayout(), ns.pageTokens(), ns.tpSize(), ns.tpRank(), ns.ppSize(), ns.ppRank(), ns.formatVersion() + 1);
            default -> throw new IllegalArgumentException("field " + field);
        };
    }

    /** Changes the TP rank, growing the TP size only when it must (size 1 has one rank). */
    private static Namespace withTpRank(Namespace ns, int rank) {
        int size = Math.max(ns.tpSize(), rank + 1);
        return new Namespace(ns.modelId(), ns.revision(), ns.weightsDigest(), ns.tokenizerDigest(), ns.adapterId(), ns.dtype(), ns.kvLayout(), ns.pageTokens(), size, rank, ns.ppSize(), ns.ppRank(), ns.formatVersion());
    }

    private static Namespace withPpRank(Namespace ns, int rank) {
        int size = Math.max(ns.ppSize(), rank + 1);
        return new Namespace(ns.modelId(), ns.revision(), ns.weightsDigest(), ns.tokenizerDigest(), ns.adapterId(), ns.dtype(), ns.kvLayout(), ns.pageTokens(), ns.tpSize(), ns.tpRank(), size, rank, ns.formatVersion());
    }
}
