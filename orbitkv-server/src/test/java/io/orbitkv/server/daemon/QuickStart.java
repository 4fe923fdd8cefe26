package io.orbitkv.server.daemon;

import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.PageToPublish;
import io.orbitkv.client.PublishOutcome;
import io.orbitkv.client.Region;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.TokenChain;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.Hashes;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * The README's Java quick start, exactly as the README shows it (between the markers; a test
 * checks the README copy): publish the four pages of a 64-token prefix, query it for
 * ENGINE_RESTORE, let the Manager copy it into a shared-memory region, check the bytes.
 */
final class QuickStart {

    private QuickStart() {
    }

    /** Runs the quick start against the Manager at {@code socket}; true if the restored bytes are equal. */
    static boolean run(Path socket, Path regionFile) throws Exception {
        // [quickstart]
        Namespace ns = new Namespace("quickstart/tiny-llama", "r1", "sha256:00", "sha256:01", "", "bf16", "nhd",
                16, 1, 0, 1, 0, 1);
        RecoveryContract contract = new RecoveryContract(16, List.of(new StateGroup.Full(0)));
        int[] prompt = new int[65];                                   // 4 full pages of 16 tokens + 1
        for (int i = 0; i < prompt.length; i++) prompt[i] = 2000 + i;
        List<byte[]> hashes = List.of(TokenChain.pageHashes(ns.digest(), prompt, 16, new byte[0]));
        List<PageToPublish> pages = new ArrayList<>();
        for (int i = 0; i < hashes.size(); i++) {
            byte[] kv = new byte[8192];                                // this page's KV bytes
            Arrays.fill(kv, (byte) (i + 1));
            pages.add(PageToPublish.ofBlockHash(0, hashes.get(i), MemorySegment.ofArray(kv)));
        }
        try (OrbitKvClient client = OrbitKvClient.connect(socket)) {
            client.register("quickstart-java", 1, ns, contract);
            List<PublishOutcome> published = client.publish(pages);   // reserve, write into the arena, commit
            Reply.QueryResult hit = client.awaitSettled(client.query(new Request.Query(1, 0,
                    CompletionTarget.ENGINE_RESTORE, prompt.length, 0,
                    List.of(new Request.QueryGroup(0, KeyForm.BLOCK_HASH, Hashes.of(hashes))))));
            Region region = client.registerRegion(regionFile, 8192, hashes.size());
            Reply.Completion done = client.restore(1, region, OrbitKvClient.residentPages(hit, 0));
            boolean equal = true;
            for (int i = 0; i < hashes.size(); i++) equal &= region.page(i).mismatch(pages.get(i).image()) == -1;
            client.release(1);
            System.out.println("published " + published + ", hit=" + hit.hit() + " boundary=" + hit.boundaryTokens()
                    + ", restore " + done.outcome() + ", bytes equal: " + equal);
            // [/quickstart]
            Files.deleteIfExists(regionFile);
            return hit.hit() && done.outcome() == Reply.Settled.OK && equal;
        }
    }
}
