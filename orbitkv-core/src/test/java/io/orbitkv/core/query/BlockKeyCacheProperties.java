package io.orbitkv.core.query;

import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.StateKeys;
import io.orbitkv.state.protocol.Hashes;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;

import java.util.List;
import java.util.Random;

import static org.assertj.core.api.Assertions.assertThat;

/** The cache answers exactly what the derivation would, through collisions and across namespaces. */
class BlockKeyCacheProperties {

    private static SessionScope scope(String model, int namespaceId) {
        Namespace ns = new Namespace(model, "r1", "w", "t", "", "bf16", "nhd", 16, 1, 0, 1, 0, 1);
        return new SessionScope(ns, namespaceId, new RecoveryContract(16, List.of(new StateGroup.Full(0))));
    }

    @Property(tries = 50)
    void everyAnswerEqualsTheDerivation(@ForAll long seed, @ForAll @IntRange(min = 1, max = 64) int width,
                                        @ForAll @Size(min = 1, max = 4) List<@IntRange(min = 0, max = 7) Integer> groups) {
        BlockKeyCache cache = new BlockKeyCache();
        SessionScope a = scope("model-a", 0);
        SessionScope b = scope("model-b", 1);
        Random random = new Random(seed);
        // Few distinct hashes, many repeats: hits, misses and (with ENTRIES slots) rare collisions.
        byte[][] hashes = new byte[64][width];
        for (byte[] h : hashes) random.nextBytes(h);
        for (int i = 0; i < 2_000; i++) {
            SessionScope s = random.nextBoolean() ? a : b;
            int group = groups.get(random.nextInt(groups.size()));
            byte[] hash = hashes[random.nextInt(hashes.length)].clone();
            StateKey got = cache.key(s, group, hash);
            assertThat(got).isEqualTo(StateKeys.forBlockHash(s.digestBytes(), group, hash));
        }
    }

    @Property(tries = 40)
    void promptKeysEqualTheDerivationWhenPromptsSharePrefixes(@ForAll long seed,
                                                              @ForAll @IntRange(min = 1, max = 40) int width) {
        // prompts that grow, fork and restart from a few stems, in two namespaces and two groups, read
        // in random page order (as a planner that stops at a miss and resumes would): every key is
        // the derivation's, whichever remembered prompt it came from
        BlockKeyCache cache = new BlockKeyCache();
        List<SessionScope> scopes = List.of(scope("model-a", 0), scope("model-b", 1));
        Random random = new Random(seed);
        byte[][] stem = new byte[3][];
        for (int i = 0; i < stem.length; i++) {
            stem[i] = new byte[width * 40];
            random.nextBytes(stem[i]);
        }
        for (int round = 0; round < 200; round++) {
            SessionScope s = scopes.get(random.nextInt(2));
            int group = random.nextInt(2);
            byte[] packed = stem[random.nextInt(stem.length)].clone();
            int pages = 1 + random.nextInt(40);
            if (random.nextInt(3) == 0) packed[random.nextInt(pages * width)] ^= 1; // fork somewhere
            Hashes hashes = Hashes.packed(width, java.util.Arrays.copyOf(packed, pages * width));
            BlockKeyCache.PromptKeys keys = cache.prompt(s, group, hashes);
            for (int k = 0; k < pages; k++) {
                int page = random.nextInt(pages);
                assertThat(keys.key(page)).isEqualTo(StateKeys.forBlockHash(s.digestBytes(), group, hashes.get(page)));
            }
        }
    }

    @Property(tries = 20)
    void theSameHashInAnotherNamespaceIsAnotherKey(@ForAll @Size(min = 1, max = 64) byte[] hash) {
        BlockKeyCache cache = new BlockKeyCache();
        StateKey inA = cache.key(scope("model-a", 0), 0, hash.clone());
        StateKey inB = cache.key(scope("model-b", 1), 0, hash.clone());
        assertThat(inA).isNotEqualTo(inB);
        assertThat(cache.key(scope("model-a", 0), 0, hash.clone())).isEqualTo(inA);
    }

    /**
     * The same prompt asked again keeps every page's hint, even when a pass in between (the peer
     * wait's scan of the missing pages) touched only some pages; a different prompt does not see
     * a hint for a page it does not share.
     */
    @net.jqwik.api.Example
    void theSamePromptAgainKeepsEveryPagesHint() {
        BlockKeyCache cache = new BlockKeyCache();
        SessionScope scope = scope("model-a", 0);
        Random random = new Random(7);
        List<byte[]> pages = new java.util.ArrayList<>();
        for (int i = 0; i < 8; i++) {
            byte[] h = new byte[16];
            random.nextBytes(h);
            pages.add(h);
        }
        Hashes prompt = Hashes.of(pages);
        BlockKeyCache.PromptKeys first = cache.prompt(scope, 0, prompt);
        for (int i = 0; i < 8; i++) {
            first.key(i);
            first.remember(i, "image " + i);
        }
        BlockKeyCache.PromptKeys scan = cache.prompt(scope, 0, prompt);
        assertThat(scan.key(6)).isEqualTo(first.key(6));
        BlockKeyCache.PromptKeys again = cache.prompt(scope, 0, prompt);
        for (int i = 0; i < 8; i++) {
            assertThat(again.hint(i)).as("page %d", i).isEqualTo("image " + i);
            assertThat(again.key(i)).isEqualTo(StateKeys.forBlockHash(scope.digestBytes(), 0, pages.get(i)));
        }
        List<byte[]> other = new java.util.ArrayList<>(pages.subList(0, 4));
        byte[] diverging = new byte[16];
        random.nextBytes(diverging);
        other.add(diverging);
        BlockKeyCache.PromptKeys longer = cache.prompt(scope, 0, Hashes.of(other));
        assertThat(longer.hint(3)).isEqualTo("image 3");
        assertThat(longer.hint(4)).as("a page the prompts do not share").isNull();
    }
}
