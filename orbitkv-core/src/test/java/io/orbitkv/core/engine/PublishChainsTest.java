package io.orbitkv.core.engine;

import io.orbitkv.core.storage.dram.ChainLink;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.protocol.Hashes;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.Request;
import org.junit.jupiter.api.Test;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

import static org.assertj.core.api.Assertions.assertThat;

/** The chain links an engine session derives from a RESERVE's page order and its latest QUERY's match. */
class PublishChainsTest {

    private static StateKey key(int i) {
        byte[] b = new byte[StateKey.BYTES];
        b[0] = (byte) i;
        b[1] = 1;
        return StateKey.ofBytes(b);
    }

    private static List<Request.PublishPage> pages(int... groups) {
        List<Request.PublishPage> out = new ArrayList<>();
        for (int i = 0; i < groups.length; i++) {
            out.add(new Request.PublishPage(groups[i], KeyForm.BLOCK_HASH, Hashes.of(List.of(new byte[] {(byte) i})), 64));
        }
        return out;
    }

    @Test
    void eachGroupsPagesChainInOrderAndItsFirstHangsUnderItsMatchedEnd() {
        PublishChains chains = new PublishChains();
        StateKey matched0 = key(100);
        chains.matched(Map.of(0, matched0));
        StateKey[] keys = {key(0), key(1), key(2), key(3), key(4)};
        ChainLink[] links = chains.links(pages(0, 1, 0, 1, 0), keys);
        assertThat(links[0]).isEqualTo(new ChainLink(matched0, true, false));
        assertThat(links[1]).as("group 1 matched nothing: a root").isEqualTo(new ChainLink(null, true, false));
        assertThat(links[2]).isEqualTo(new ChainLink(keys[0], false, false));
        assertThat(links[3]).isEqualTo(new ChainLink(keys[1], false, true));
        assertThat(links[4]).isEqualTo(new ChainLink(keys[2], false, true));
    }

    @Test
    void aMissForgetsThePreviousMatch() {
        PublishChains chains = new PublishChains();
        chains.matched(Map.of(0, key(100)));
        chains.matched(Map.of());
        assertThat(chains.links(pages(0), new StateKey[] {key(0)})[0]).isEqualTo(new ChainLink(null, true, true));
    }
}
