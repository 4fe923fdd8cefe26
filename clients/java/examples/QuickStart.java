// OrbitKV quick start in Java: publish a prompt prefix's KV pages, then restore them into an engine region.
//
// Start a Manager first (bin/orbitkv manager), then run, from the same directory:
//
//     bin/orbitkv java clients/java/examples/QuickStart.java [SOCKET]
//
// (a single-file program: the launcher runs it with JDK 25 and the OrbitKV jar on the class path).
// SOCKET defaults to ./var/orbitkv/manager.sock, the Manager's default. The Java twin of
// clients/python/examples/quickstart.py, on other tokens: registers an engine instance, publishes
// the four 16-token pages of a 64-token prefix (fake KV bytes), queries a 65-token prompt for
// ENGINE_RESTORE, has the Manager copy the leased pages into a shared-memory region, checks the
// bytes and releases. Exit status 0 when the restored bytes are equal, 1 otherwise.

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

final class QuickStart {

    public static void main(String[] args) throws Exception {
        Path socket = Path.of(args.length > 0 ? args[0] : "var/orbitkv/manager.sock");
        // the region file must outlive the connection (protocol.md 5.2); shared memory where there is one
        Path shm = Path.of("/dev/shm");
        Path regionFile = (Files.isDirectory(shm) ? shm : Path.of(System.getProperty("java.io.tmpdir")))
                .resolve("orbitkv-quickstart-" + ProcessHandle.current().pid() + ".region");
        boolean ok;
        try {
            ok = run(socket, regionFile);
        } finally {
            Files.deleteIfExists(regionFile); // before exit: System.exit runs no finally block
        }
        System.exit(ok ? 0 : 1);
    }

    static boolean run(Path socket, Path regionFile) throws Exception {
        // [quickstart]
        Namespace ns = Namespace.builder().model("quickstart/tiny-llama", "r1").digests("sha256:00", "sha256:01")
                .dtype("bf16").kvLayout("nhd").pageTokens(16).build();          // one rank, no adapter
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
            Reply.QueryResult hit = client.awaitSettled(client.query(Request.Query.builder(1, prompt.length)
                    .target(CompletionTarget.ENGINE_RESTORE).group(0, KeyForm.BLOCK_HASH, Hashes.of(hashes)).build()));
            Region region = client.registerRegion(regionFile, 8192, hashes.size());
            Reply.Completion done = client.restore(1, region, OrbitKvClient.residentPages(hit, 0));
            boolean equal = true;
            for (int i = 0; i < hashes.size(); i++) equal &= region.page(i).mismatch(pages.get(i).image()) == -1;
            client.release(1);
            System.out.println("published " + published + ", hit=" + hit.hit() + " boundary=" + hit.boundaryTokens()
                    + ", restore " + done.outcome() + ", bytes equal: " + equal);
            // [/quickstart]
            return hit.hit() && done.outcome() == Reply.Settled.OK && equal;
        }
    }
}
