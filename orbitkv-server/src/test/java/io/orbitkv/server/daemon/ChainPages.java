package io.orbitkv.server.daemon;

import io.orbitkv.client.PageToPublish;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.StateKeys;
import io.orbitkv.state.TokenChain;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * The pages the cluster process tests publish: the first {@code count} pages of a token run
 * {@code firstToken, firstToken + 1, ...} in a namespace (full attention, group 0), each a 4 KiB
 * image filled with its page index: their engine block hashes, the catalog keys they are found by,
 * and the prompt's length (one token past the last page, as an engine that computes one more).
 */
record ChainPages(List<byte[]> hashes, List<PageToPublish> pages, List<StateKey> keys, int promptTokens) {

    static ChainPages of(Namespace ns, int count, int firstToken) {
        int[] tokens = new int[count * ns.pageTokens() + 1];
        for (int i = 0; i < tokens.length; i++) tokens[i] = firstToken + i;
        byte[][] hashes = TokenChain.pageHashes(ns.digest(), tokens, ns.pageTokens(), new byte[0]);
        List<PageToPublish> pages = new ArrayList<>(count);
        List<StateKey> keys = new ArrayList<>(count);
        for (int p = 0; p < count; p++) {
            byte[] image = new byte[4096];
            Arrays.fill(image, (byte) p);
            pages.add(PageToPublish.ofBlockHash(0, hashes[p], MemorySegment.ofArray(image)));
            keys.add(StateKeys.forBlockHash(ns.digest(), 0, hashes[p]));
        }
        return new ChainPages(List.of(hashes), List.copyOf(pages), List.copyOf(keys), tokens.length);
    }
}
