package io.orbitkv.server.cli;

import io.orbitkv.router.CostModel;
import io.orbitkv.router.MeasuredCosts;
import io.orbitkv.router.Policy;
import io.orbitkv.router.RouterSettings;
import io.orbitkv.router.daemon.PrepareTransport;
import io.orbitkv.router.daemon.RouterDaemon;
import io.orbitkv.router.daemon.WorkerEndpoint;
import io.orbitkv.server.cluster.ClusterChannels;
import io.orbitkv.server.cluster.ClusterSecurity;
import io.orbitkv.server.cluster.GrpcPrepareTransport;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code orbitkv router}: runs the KV-aware router (docs/routing.md) in the foreground until
 * SIGTERM or SIGINT: it follows each worker's KV events and answers {@code POST /route}.
 *
 * <p>One instance per invocation; the caller's thread starts the daemon, prints the ready line and
 * waits for a stop signal, then closes it and returns 0. Bad flags exit 2 with one line.
 */
@Command(name = "router", mixinStandardHelpOptions = true,
        description = "Run the KV-aware router: follows the workers' KV events, answers POST /route with the worker "
                + "of least estimated TTFT (or a baseline policy), serves GET /metrics, until SIGTERM or Ctrl-C.")
final class RouterCommand implements Callable<Integer> {

    @Spec
    CommandSpec spec;

    @Option(names = "--worker", required = true, paramLabel = "SPEC",
            description = "name=W,topic=INSTANCE,events=tcp://H:P[,replay=tcp://H:P][,manager=H:P][,namespace=HEX]"
                    + " (repeat per worker, 1..64; manager: its Manager's cluster endpoint, prepared on each route)")
    List<String> workers = new ArrayList<>();

    @Option(names = "--listen", paramLabel = "HOST:PORT", description = "HTTP address (default 127.0.0.1:8480; port 0: any free one)")
    String listen = "127.0.0.1:8480";

    @Option(names = "--policy", paramLabel = "NAME", description = "joint (default), load or overlap; a request may name its own")
    String policy = "joint";

    @Option(names = "--block-tokens", paramLabel = "N", description = "tokens per block (the engine's page size, default 16)")
    int blockTokens = 16;

    @Option(names = "--kv-bytes-per-token", paramLabel = "B", description = "KV bytes per token (default: the llama.cpp bench model's 8192)")
    long kvBytesPerToken = MeasuredCosts.KV_BYTES_PER_TOKEN;

    @Option(names = "--prefill-rate", paramLabel = "TOKENS_PER_S", description = "prefill rate until a worker reports one (default 1037, measured)")
    double prefillRate = MeasuredCosts.PREFILL_TOKENS_PER_SECOND;

    @Option(names = "--dram-gbps", paramLabel = "GB_S", description = "local DRAM restore bandwidth (default 12.6, measured)")
    double dramGbps = MeasuredCosts.DRAM_BYTES_PER_SECOND / 1e9;

    @Option(names = "--ssd-gbps", paramLabel = "GB_S", description = "SSD read bandwidth (default 1.001, measured)")
    double ssdGbps = MeasuredCosts.SSD_BYTES_PER_SECOND / 1e9;

    @Option(names = "--peer-gbps", paramLabel = "GB_S", description = "peer read bandwidth (default 0.57, measured)")
    double peerGbps = MeasuredCosts.PEER_BYTES_PER_SECOND / 1e9;

    @Option(names = "--peer-fixed-ms", paramLabel = "MS", description = "fixed cost of a peer read per request (default 12.5, measured)")
    double peerFixedMs = MeasuredCosts.PEER_FIXED_SECONDS * 1e3;

    @Option(names = "--max-blocks", paramLabel = "N", description = "index bound in blocks (default 1000000)")
    int maxBlocks = RouterSettings.DEFAULT_MAX_BLOCKS;

    @Option(names = "--repair-bound-ms", paramLabel = "MS", description = "longest a gap is repaired by replay before the worker's entries are cleared (default 2000)")
    long repairBoundMs = RouterSettings.DEFAULT_REPAIR_BOUND_NANOS / 1_000_000;

    @Option(names = "--stale-after-ms", paramLabel = "MS", description = "silence after due events that makes a worker stale (default 10000)")
    long staleAfterMs = RouterSettings.DEFAULT_STALE_AFTER_NANOS / 1_000_000;

    @Option(names = "--token-chain-namespace", paramLabel = "HEX",
            description = "namespace digest (64 hex) to key token_ids with the project's token chain, as the StateKeys an OrbitKV client"
                    + " without block hashes publishes; without it requests carry block_hashes")
    String tokenChainNamespace;

    @Option(names = "--cluster-token-file", paramLabel = "FILE",
            description = "the cluster token file the Managers use: needed by workers with manager=, whose Managers the router asks to"
                    + " prepare each routed request's prefix")
    Path clusterTokenFile;

    @Option(names = "--cluster-id", defaultValue = "orbitkv", paramLabel = "ID", description = "the cluster's name (default ${DEFAULT-VALUE})")
    String clusterId;

    @Option(names = "--tls-cert", paramLabel = "PEM", description = "certificate chain for mutual TLS to the Managers (with --tls-key, --tls-ca)")
    Path tlsCert;

    @Option(names = "--tls-key", paramLabel = "PEM", description = "PKCS#8 private key for mutual TLS")
    Path tlsKey;

    @Option(names = "--tls-ca", paramLabel = "PEM", description = "CA bundle the Managers' certificates must chain to")
    Path tlsCa;

    /** The remote prepare transport when --cluster-token-file is given, else null. */
    private PrepareTransport prepares() {
        if (clusterTokenFile == null) {
            if (tlsCert != null || tlsKey != null || tlsCa != null) throw new InputException("--tls-* need --cluster-token-file");
            return null;
        }
        ClusterSecurity security = ClusterCliSecurity.load(clusterId, clusterTokenFile, "--cluster-token-file", tlsCert, tlsKey, tlsCa);
        try {
            return new GrpcPrepareTransport(new ClusterChannels(security));
        } catch (IOException e) {
            throw new InputException("--tls-cert/--tls-key/--tls-ca: " + e.getMessage());
        }
    }

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut();
        RouterDaemon.Options options;
        try {
            List<WorkerEndpoint> ws = new ArrayList<>();
            for (String w : workers) ws.add(WorkerEndpoint.parse(w));
            int colon = listen.lastIndexOf(':');
            if (colon <= 0) throw new IllegalArgumentException("--listen wants HOST:PORT, got '" + listen + "'");
            int port = Integer.parseInt(listen.substring(colon + 1));
            CostModel cost = new CostModel(blockTokens, blockTokens * kvBytesPerToken, dramGbps * 1e9, ssdGbps * 1e9,
                    peerGbps * 1e9, peerFixedMs / 1e3, prefillRate);
            RouterSettings settings = new RouterSettings(cost, maxBlocks, RouterSettings.DEFAULT_MAX_CHAIN_BLOCKS,
                    repairBoundMs * 1_000_000, staleAfterMs * 1_000_000, RouterSettings.DEFAULT_RATE_WEIGHT);
            byte[] ns = null;
            if (tokenChainNamespace != null) {
                if (!tokenChainNamespace.matches("[0-9a-fA-F]{64}")) {
                    throw new IllegalArgumentException("--token-chain-namespace wants 64 hex characters (a SHA-256 digest)");
                }
                ns = HexFormat.of().parseHex(tokenChainNamespace);
            }
            PrepareTransport transport = prepares();
            try {
                options = new RouterDaemon.Options(listen.substring(0, colon), port, ws, Policy.named(policy), settings, ns,
                        transport);
            } catch (IllegalArgumentException e) {
                if (transport != null) transport.close();
                throw e;
            }
        } catch (IllegalArgumentException e) {
            throw new InputException(e.getMessage());
        }
        RouterDaemon daemon;
        try {
            daemon = RouterDaemon.start(options);
        } catch (IOException e) {
            if (options.prepares() != null) options.prepares().close();
            throw new InputException("cannot listen on " + listen + ": " + e.getMessage());
        } catch (IllegalArgumentException e) {
            throw new InputException(e.getMessage());
        }
        CountDownLatch stop = new CountDownLatch(1);
        StopSignals.install(List.of("TERM", "INT"), name -> stop.countDown());
        Runtime.getRuntime().addShutdownHook(new Thread(daemon::close, "orbitkv-router-shutdown"));
        out.println("orbitkv router: listening on http://" + options.host() + ":" + daemon.port() + " (" + workers.size()
                + " workers, policy " + policy + ")");
        out.flush();
        try {
            stop.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        daemon.close();
        return 0;
    }
}
