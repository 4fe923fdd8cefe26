package io.orbitkv.server.cli;

import com.google.protobuf.ByteString;
import io.grpc.StatusRuntimeException;
import io.orbitkv.server.cluster.CatalogService;
import io.orbitkv.server.cluster.ClusterChannels;
import io.orbitkv.server.cluster.ClusterSecurity;
import io.orbitkv.server.cluster.proto.ClusterInfoGrpc;
import io.orbitkv.server.cluster.proto.Holder;
import io.orbitkv.server.cluster.proto.KeyResult;
import io.orbitkv.server.cluster.proto.LookupReply;
import io.orbitkv.server.cluster.proto.LookupRequest;
import io.orbitkv.state.StateKey;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.TimeUnit;
import java.util.stream.Collectors;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Parameters;
import picocli.CommandLine.Spec;

/**
 * {@code orbitkv cluster locate}: asks one Manager's cluster endpoint where keys are
 * ({@code ClusterInfo.Locate}: a catalog lookup that node runs through its own membership view
 * and catalog, as a query planner on it would) and prints one line per key, in the order given:
 * <pre>
 * KEY present a@1:DRAM b@1:DRAM     holders as node@incarnation:medium
 * KEY absent                        no live node holds it (complete coverage)
 * KEY unknown NOT_CAUGHT_UP         the node cannot tell yet (the reason)
 * </pre>
 * The call carries the cluster id and token, and mutual TLS when given, through
 * {@link ClusterChannels}, exactly as a member's calls do. One run per instance, on the caller's
 * thread; it owns its channel and closes it before returning.
 *
 * <p>Design note: Unknown is the catalog's "cannot answer yet" (no valid view yet, a shard owner
 * still receiving a source's snapshot: a few hundred ms after a member joins), not an answer about
 * the key. So locate re-asks every {@value #SETTLE_PAUSE_MILLIS} ms while any key is Unknown, for
 * at most {@code --settle-millis} (default 3 s), and prints the last answer; Present and Absent are
 * printed at once. {@code --settle-millis 0} asks once: an operator watching an etcd outage wants
 * the Unknown immediately.
 */
@Command(name = "locate", mixinStandardHelpOptions = true,
        description = "Print who holds each key, as seen by the Manager at --endpoint (ClusterInfo.Locate).")
final class ClusterLocateCommand implements Callable<Integer> {

    /** Pause between two asks while an answer is Unknown. */
    static final long SETTLE_PAUSE_MILLIS = 100;

    @Spec
    CommandSpec spec;

    @Option(names = "--endpoint", required = true, paramLabel = "HOST:PORT",
            description = "a Manager's cluster endpoint (its --cluster-listen)")
    String endpoint;

    @Option(names = "--token-file", required = true, paramLabel = "FILE",
            description = "the cluster token file the Managers use (--cluster-token-file)")
    Path tokenFile;

    @Option(names = "--cluster-id", defaultValue = "orbitkv", paramLabel = "ID",
            description = "the cluster's name (default ${DEFAULT-VALUE})")
    String clusterId;

    @Option(names = "--tls-cert", paramLabel = "PEM", description = "certificate chain for mutual TLS (with --tls-key, --tls-ca)")
    Path tlsCert;

    @Option(names = "--tls-key", paramLabel = "PEM", description = "PKCS#8 private key for mutual TLS")
    Path tlsKey;

    @Option(names = "--tls-ca", paramLabel = "PEM", description = "CA bundle the endpoint's certificate must chain to")
    Path tlsCa;

    @Option(names = "--deadline-millis", defaultValue = "5000", paramLabel = "MS",
            description = "how long one ask may wait for the endpoint, connecting included (default ${DEFAULT-VALUE})")
    long deadlineMillis;

    @Option(names = "--settle-millis", defaultValue = "3000", paramLabel = "MS",
            description = "re-ask while an answer is unknown, for at most this long; 0 asks once (default ${DEFAULT-VALUE})")
    long settleMillis;

    @Parameters(arity = "1..*", paramLabel = "KEY", description = "StateKeys, 64 hex digits each (orbitkv keys prints them)")
    List<String> keyArgs;

    @Override
    public Integer call() throws InterruptedException {
        if (deadlineMillis <= 0) throw new InputException("--deadline-millis must be positive: " + deadlineMillis);
        if (settleMillis < 0) throw new InputException("--settle-millis must not be negative: " + settleMillis);
        if (keyArgs.size() > CatalogService.MAX_LOOKUP_KEYS) {
            throw new InputException(keyArgs.size() + " keys: one ask takes at most " + CatalogService.MAX_LOOKUP_KEYS);
        }
        List<StateKey> keys = new ArrayList<>(keyArgs.size());
        for (String k : keyArgs) keys.add(parseKey(k));
        LookupRequest.Builder request = LookupRequest.newBuilder();
        for (StateKey k : keys) request.addKeys(ByteString.copyFrom(k.toBytes()));
        try (ClusterChannels channels = channels(security())) {
            ClusterInfoGrpc.ClusterInfoBlockingStub stub = ClusterInfoGrpc.newBlockingStub(channels.channel(endpoint));
            long settleDeadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(settleMillis);
            LookupReply reply = ask(stub, request.build());
            while (anyUnknown(reply) && System.nanoTime() - settleDeadline < 0) {
                Thread.sleep(SETTLE_PAUSE_MILLIS);
                reply = ask(stub, request.build());
            }
            if (reply.getResultsCount() != keys.size()) {
                throw new IllegalStateException(endpoint + " answered " + reply.getResultsCount() + " results for "
                        + keys.size() + " keys");
            }
            PrintWriter out = spec.commandLine().getOut();
            for (int i = 0; i < keys.size(); i++) out.println(keys.get(i).toHex() + " " + describe(reply.getResults(i)));
            return 0;
        }
    }

    private LookupReply ask(ClusterInfoGrpc.ClusterInfoBlockingStub stub, LookupRequest request) {
        try {
            // wait-for-ready: a Manager still starting is waited for (within the deadline), not refused
            return stub.withWaitForReady().withDeadlineAfter(deadlineMillis, TimeUnit.MILLISECONDS).locate(request);
        } catch (StatusRuntimeException e) {
            throw new InputException("--endpoint " + endpoint + ": " + e.getStatus().getCode()
                    + (e.getStatus().getDescription() == null ? "" : ": " + e.getStatus().getDescription()));
        }
    }

    private static ClusterChannels channels(ClusterSecurity security) {
        try {
            return new ClusterChannels(security);
        } catch (IOException e) {
            throw new InputException("--tls-cert/--tls-key/--tls-ca: " + e.getMessage());
        }
    }

    private ClusterSecurity security() {
        return ClusterCliSecurity.load(clusterId, tokenFile, "--token-file", tlsCert, tlsKey, tlsCa);
    }

    static StateKey parseKey(String hex) {
        try {
            return StateKey.ofHex(hex);
        } catch (IllegalArgumentException e) {
            throw new InputException("KEY \"" + hex + "\": " + e.getMessage());
        }
    }

    private static boolean anyUnknown(LookupReply reply) {
        for (KeyResult r : reply.getResultsList()) {
            if (r.getResultCase() != KeyResult.ResultCase.PRESENT && r.getResultCase() != KeyResult.ResultCase.ABSENT) return true;
        }
        return false;
    }

    /** {@code present a@1:DRAM ...}, {@code absent} or {@code unknown REASON}. */
    static String describe(KeyResult r) {
        return switch (r.getResultCase()) {
            case PRESENT -> "present " + r.getPresent().getHoldersList().stream()
                    .map(ClusterLocateCommand::holder).collect(Collectors.joining(" "));
            case ABSENT -> "absent";
            case UNKNOWN -> "unknown " + r.getUnknown().getReason();
            case RESULT_NOT_SET -> "unknown (no result in the reply)";
        };
    }

    private static String holder(Holder h) {
        return h.getNodeId() + "@" + h.getIncarnation() + ":" + h.getMedium().name();
    }
}
