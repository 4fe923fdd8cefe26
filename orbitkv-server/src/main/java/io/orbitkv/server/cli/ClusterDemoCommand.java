package io.orbitkv.server.cli;

import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.PageToPublish;
import io.orbitkv.client.PublishOutcome;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.StateKey;
import io.orbitkv.state.StateKeys;
import io.orbitkv.state.TokenChain;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.Hashes;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import java.io.IOException;
import java.io.PrintWriter;
import java.lang.foreign.MemorySegment;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.SplittableRandom;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code orbitkv cluster demo}: a cross-node hit, end to end, through two Managers' engine
 * sockets. It publishes {@code --pages} pages of random bytes through the first socket, then
 * QUERYs the same prompt (HOST_READY) through the second until every page is a hit, checks each
 * leased page's bytes against the published ones, releases, and prints the boundary. The prompt
 * comes from a fresh seed each run (printed; {@code --seed} repeats one), so no node holds its
 * pages before: a hit through the second socket is a peer read from the first Manager.
 *
 * <p>One run per instance, on the caller's thread; it owns both connections and closes them.
 * Exit status 0 for a full hit with equal bytes, {@value #EXIT_NO_HIT} when the publish was not
 * sealed, no full hit came within {@code --max-queries}, or a byte differed (the reason on the
 * error stream).
 *
 * <p>Design note: a QUERY of pages only a peer holds may miss today (it starts the catalog
 * lookup; QUERY never blocks on the network) and later QUERYs read them from the peer, so the
 * demo re-queries at an engine's cadence: {@code --pause-millis} (200 ms) apart, at most
 * {@code --max-queries} (150) times, 30 s. Measured on a 2-core machine with the three walk-through
 * Managers: 5-6 QUERYs once the cluster had converged (the boundary grew by one page per QUERY),
 * 31 when the demo started while the Managers were still starting. A line is printed only when
 * the answer changes. Each QUERY also asks the Manager to wait up to {@code --peer-wait-millis}
 * for peers (the QUERY field {@code peer_wait_millis}); a Manager that ignores it answers at once
 * and the re-query covers it.
 */
@Command(name = "demo", mixinStandardHelpOptions = true,
        description = "Publish pages through one Manager's socket and read them through another's (a cross-node hit).")
final class ClusterDemoCommand implements Callable<Integer> {

    /** Exit status when no full hit with equal bytes was shown. */
    static final int EXIT_NO_HIT = 3;
    static final int PAGE_TOKENS = 16;
    /** One page image: small enough for any DRAM slot class a Manager starts with. */
    static final int PAGE_BYTES = 8192;
    /** Most pages one demo publishes: one PUBLISH round trip, a few hundred KiB. */
    static final int MAX_PAGES = 64;
    /** Pause between two connection attempts while a Manager is still starting. */
    static final long CONNECT_PAUSE_MILLIS = 100;

    static final Namespace NAMESPACE = new Namespace("orbitkv/cluster-demo", "r1", "sha256:00", "sha256:01", "",
            "bf16", "nhd", PAGE_TOKENS, 1, 0, 1, 0, 1);
    static final RecoveryContract CONTRACT = new RecoveryContract(PAGE_TOKENS, List.of(new StateGroup.Full(0)));

    @Spec
    CommandSpec spec;

    @Option(names = "--publish-socket", required = true, paramLabel = "PATH",
            description = "engine socket of the Manager that receives the pages (node A)")
    Path publishSocket;

    @Option(names = "--query-socket", required = true, paramLabel = "PATH",
            description = "engine socket of the Manager that is queried (node B)")
    Path querySocket;

    @Option(names = "--pages", defaultValue = "4", paramLabel = "N", description = "pages to publish, 1.." + MAX_PAGES + " (default ${DEFAULT-VALUE})")
    int pages;

    @Option(names = "--keys-file", paramLabel = "FILE", description = "write the pages' StateKeys here, one per line (for cluster locate)")
    Path keysFile;

    @Option(names = "--max-queries", defaultValue = "150", paramLabel = "N", description = "QUERYs through B before giving up (default ${DEFAULT-VALUE})")
    int maxQueries;

    @Option(names = "--pause-millis", defaultValue = "200", paramLabel = "MS", description = "pause between two QUERYs (default ${DEFAULT-VALUE})")
    long pauseMillis;

    @Option(names = "--peer-wait-millis", defaultValue = "1000", paramLabel = "MS",
            description = "how long a QUERY may wait for peers, sent as peer_wait_millis (default ${DEFAULT-VALUE})")
    int peerWaitMillis;

    @Option(names = "--connect-timeout-millis", defaultValue = "60000", paramLabel = "MS",
            description = "how long to wait for each socket to accept: Managers may still be starting (default ${DEFAULT-VALUE})")
    long connectTimeoutMillis;

    @Option(names = "--seed", paramLabel = "N", description = "seed of the prompt and page bytes (default: a fresh one, printed)")
    Long seed;

    @Override
    public Integer call() throws IOException, InterruptedException {
        if (pages < 1 || pages > MAX_PAGES) throw new InputException("--pages must be 1.." + MAX_PAGES + ": " + pages);
        if (maxQueries < 1) throw new InputException("--max-queries must be positive: " + maxQueries);
        if (pauseMillis < 0) throw new InputException("--pause-millis must not be negative: " + pauseMillis);
        if (peerWaitMillis < 0) throw new InputException("--peer-wait-millis must not be negative: " + peerWaitMillis);
        if (connectTimeoutMillis < 0) throw new InputException("--connect-timeout-millis must not be negative: " + connectTimeoutMillis);
        PrintWriter out = spec.commandLine().getOut();
        PrintWriter err = spec.commandLine().getErr();
        long runSeed = seed != null ? seed : new SplittableRandom().nextLong();
        Prompt prompt = Prompt.of(runSeed, pages);
        if (keysFile != null) {
            StringBuilder lines = new StringBuilder();
            for (StateKey k : prompt.keys()) lines.append(k.toHex()).append('\n');
            Files.writeString(keysFile, lines, StandardCharsets.UTF_8);
        }
        out.println("seed " + runSeed + ": " + pages + " pages of " + PAGE_BYTES + " bytes, " + pages * PAGE_TOKENS + " tokens");
        try (OrbitKvClient a = connect(publishSocket, "--publish-socket");
             OrbitKvClient b = connect(querySocket, "--query-socket")) {
            a.register("orbitkv-cluster-demo-" + Long.toHexString(runSeed) + "-a", 1, NAMESPACE, CONTRACT);
            b.register("orbitkv-cluster-demo-" + Long.toHexString(runSeed) + "-b", 1, NAMESPACE, CONTRACT);
            List<PublishOutcome> published = a.publish(prompt.toPublish());
            out.println("published through " + publishSocket + ": " + published);
            if (published.stream().anyMatch(o -> o != PublishOutcome.SEALED)) {
                err.println("orbitkv cluster demo: not every page was sealed on A: " + published);
                return EXIT_NO_HIT;
            }
            long fullBoundary = (long) pages * PAGE_TOKENS;
            String previous = "";
            for (int q = 1; q <= maxQueries; q++) {
                if (q > 1) Thread.sleep(pauseMillis);
                Reply.QueryResult r = b.awaitSettled(b.query(prompt.query(q, peerWaitMillis)));
                try {
                    String answer = (r.hit() ? "hit" : "miss") + ", boundary " + r.boundaryTokens() + " of " + fullBoundary + " tokens";
                    if (!answer.equals(previous)) out.println("query " + q + " through " + querySocket + ": " + answer);
                    previous = answer;
                    if (!r.hit() || r.boundaryTokens() != fullBoundary) continue;
                    String differs = prompt.firstDifference(b, r);
                    if (differs != null) {
                        err.println("orbitkv cluster demo: " + differs);
                        return EXIT_NO_HIT;
                    }
                    out.println("cross-node hit: " + pages + " pages published through " + publishSocket + " read through "
                            + querySocket + " (query " + q + "), boundary " + r.boundaryTokens() + " tokens, bytes equal");
                    return 0;
                } finally {
                    b.release(r.operationId());
                }
            }
            err.println("orbitkv cluster demo: no full hit through " + querySocket + " after " + maxQueries + " queries "
                    + pauseMillis + " ms apart (are both Managers members of one cluster? see /metrics orbitkv_membership_live)");
            return EXIT_NO_HIT;
        }
    }

    /** Connects to {@code socket}, retrying while it does not accept yet, for at most --connect-timeout-millis. */
    private OrbitKvClient connect(Path socket, String option) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(connectTimeoutMillis);
        while (true) {
            try {
                return OrbitKvClient.connect(socket, Duration.ofSeconds(30));
            } catch (IOException e) {
                if (System.nanoTime() - deadline >= 0) {
                    throw new InputException(option + " " + socket + ": no Manager accepted within "
                            + connectTimeoutMillis + " ms: " + e.getMessage());
                }
                Thread.sleep(CONNECT_PAUSE_MILLIS);
            }
        }
    }

    /** The demo's prompt: token ids from the seed, its page hashes and keys, and one random image per page. */
    record Prompt(int[] tokens, List<byte[]> hashes, List<byte[]> images, List<StateKey> keys) {

        static Prompt of(long seed, int pages) {
            SplittableRandom random = new SplittableRandom(seed);
            int[] tokens = new int[pages * PAGE_TOKENS + 1];
            for (int i = 0; i < tokens.length; i++) tokens[i] = random.nextInt(32_000);
            List<byte[]> hashes = List.of(TokenChain.pageHashes(NAMESPACE.digest(), tokens, PAGE_TOKENS, new byte[0]));
            List<byte[]> images = new ArrayList<>(pages);
            List<StateKey> keys = new ArrayList<>(pages);
            for (int p = 0; p < pages; p++) {
                byte[] image = new byte[PAGE_BYTES];
                random.nextBytes(image);
                images.add(image);
                keys.add(StateKeys.forBlockHash(NAMESPACE.digest(), 0, hashes.get(p)));
            }
            return new Prompt(tokens, hashes, images, keys);
        }

        List<PageToPublish> toPublish() {
            List<PageToPublish> out = new ArrayList<>(images.size());
            for (int p = 0; p < images.size(); p++) {
                out.add(PageToPublish.ofBlockHash(0, hashes.get(p), MemorySegment.ofArray(images.get(p))));
            }
            return out;
        }

        Request.Query query(long operationId, int peerWaitMillis) {
            return new Request.Query(operationId, 0, CompletionTarget.HOST_READY, tokens.length, 0, 0, peerWaitMillis,
                    List.of(new Request.QueryGroup(0, KeyForm.BLOCK_HASH, Hashes.of(hashes))));
        }

        /** Null when every leased page of {@code r} holds its published bytes, else which page differs. */
        String firstDifference(OrbitKvClient client, Reply.QueryResult r) {
            int resident = 0;
            for (Reply.Span span : r.groups().getFirst().spans()) {
                for (int j = 0; j < span.pages().size(); j++) {
                    if (!(span.pages().get(j) instanceof Reply.Resident page)) continue;
                    int p = Math.toIntExact(span.firstPage() + j);
                    if (client.readLease(page.lease()).mismatch(MemorySegment.ofArray(images.get(p))) != -1) {
                        return "page " + p + " read through B differs from the bytes published through A";
                    }
                    resident++;
                }
            }
            return resident == images.size() ? null
                    : "the hit leased " + resident + " of " + images.size() + " pages";
        }
    }
}
