package io.orbitkv.state;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.Arrays;
import java.util.List;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.constraints.IntRange;
import net.jqwik.api.constraints.Size;
import org.junit.jupiter.api.Test;

/** The token chain and the keys built on it. */
class TokenChainProperties {

    private static final byte[] NS = NamespaceTest.sample().digest();

    @Property(tries = 300)
    void keysOfAPrefixAreThePrefixOfTheKeys(@ForAll @Size(max = 200) int[] tokens,
                                           @ForAll @IntRange(min = 1, max = 17) int pageTokens,
                                           @ForAll @IntRange(min = 0, max = 200) int cut,
                                           @ForAll @Size(max = 8) byte[] extra) {
        int prefix = Math.min(cut, tokens.length);
        List<StateKey> all = StateKeys.forTokens(NS, 3, tokens, pageTokens, extra);
        List<StateKey> part = StateKeys.forTokens(NS, 3, Arrays.copyOf(tokens, prefix), pageTokens, extra);
        assertThat(all).hasSize(tokens.length / pageTokens);
        assertThat(part).isEqualTo(all.subList(0, prefix / pageTokens));
    }

    @Property(tries = 200)
    void changingOneTokenChangesItsPageAndEveryLaterKeyOnly(@ForAll @Size(min = 1, max = 120) int[] tokens,
                                                          @ForAll @IntRange(min = 1, max = 9) int pageTokens,
                                                          @ForAll @IntRange(min = 0, max = 119) int at) {
        int i = at % tokens.length;
        int[] other = tokens.clone();
        other[i] ^= 0x10000;
        List<StateKey> a = StateKeys.forTokens(NS, 0, tokens, pageTokens, new byte[0]);
        List<StateKey> b = StateKeys.forTokens(NS, 0, other, pageTokens, new byte[0]);
        int changedPage = i / pageTokens;
        for (int p = 0; p < a.size(); p++) {
            if (p < changedPage) assertThat(b.get(p)).isEqualTo(a.get(p));
            else assertThat(b.get(p)).isNotEqualTo(a.get(p));
        }
    }

    @Property(tries = 100)
    void groupAndExtraAreBoundIntoEveryKey(@ForAll @Size(min = 4, max = 64) int[] tokens,
                                          @ForAll @IntRange(min = 0, max = 1000) int group) {
        List<StateKey> base = StateKeys.forTokens(NS, group, tokens, 4, new byte[0]);
        List<StateKey> otherGroup = StateKeys.forTokens(NS, group + 1, tokens, 4, new byte[0]);
        List<StateKey> withExtra = StateKeys.forTokens(NS, group, tokens, 4, new byte[] {0});
        for (int p = 0; p < base.size(); p++) {
            assertThat(otherGroup.get(p)).isNotEqualTo(base.get(p));
            assertThat(withExtra.get(p)).isNotEqualTo(base.get(p));
        }
    }

    @Test
    void chainRootBindsTheNamespace() throws Exception {
        var sha = java.security.MessageDigest.getInstance("SHA-256");
        sha.update("orbitkv/token-chain/v1".getBytes(java.nio.charset.StandardCharsets.US_ASCII));
        sha.update(NS);
        assertThat(TokenChain.root(NS)).isEqualTo(sha.digest());
        // h(0) = SHA-256(root ‖ tokens LE ‖ extra)
        sha.update(TokenChain.root(NS));
        sha.update(new byte[] {1, 0, 0, 0, (byte) 0xff, (byte) 0xff, (byte) 0xff, (byte) 0xff});
        sha.update(new byte[] {9});
        assertThat(TokenChain.pageHashes(NS, new int[] {1, -1, 5}, 2, new byte[] {9})[0]).isEqualTo(sha.digest());
    }

    @Test
    void blockHashKeyHashesDigestGroupAndHash() throws Exception {
        var sha = java.security.MessageDigest.getInstance("SHA-256");
        sha.update(NS);
        sha.update(new byte[] {7, 0, 0, 0});
        sha.update(new byte[] {0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01});
        StateKey expected = StateKey.ofBytes(sha.digest());
        assertThat(StateKeys.forBlockHash(NS, 7, 0x0102030405060708L)).isEqualTo(expected);
        assertThat(StateKeys.forBlockHash(NS, 7, new byte[] {8, 7, 6, 5, 4, 3, 2, 1})).isEqualTo(expected);
    }

    @Test
    void rejectsBadArguments() {
        assertThatThrownBy(() -> StateKeys.forBlockHash(new byte[31], 0, new byte[8])).hasMessageContaining("32 bytes");
        assertThatThrownBy(() -> StateKeys.forBlockHash(NS, -1, new byte[8])).hasMessageContaining("group id");
        assertThatThrownBy(() -> StateKeys.forBlockHash(NS, 0, new byte[0])).hasMessageContaining("1..64");
        assertThatThrownBy(() -> StateKeys.forBlockHash(NS, 0, new byte[65])).hasMessageContaining("1..64");
        assertThatThrownBy(() -> TokenChain.pageHashes(NS, new int[4], 0, new byte[0])).hasMessageContaining("pageTokens");
    }
}
