package io.orbitkv.engine;
import io.orbitkv.testkit.ManagerProcess;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/**
 * Starts the Manager the engine adapters run against ({@link ManagerProcess}, all its files under
 * one directory), sized for one page size: used by the demo, the parity gates, the handoff tests
 * and the TTFT bench; started with a {@link Cluster}, it is a member of an etcd cluster
 * ({@link io.orbitkv.testkit.EtcdServer}). Stateless.
 *
 * <p>Design note: the budgets (256 DRAM slots of at least 64 KiB, SSD four times DRAM,
 * write-through) hold a demo conversation many times over and make every sealed page reach the
 * SSD, so "the Manager restarts" finds every page in its recovered store.
 */
public final class ManagerLauncher {

    private static final long MIN_SLOT_BYTES = 64 * 1024;
    private static final long DRAM_SLOTS = 256;

    private ManagerLauncher() {
    }

    /**
     * Membership of a clustered Manager: etcd {@code etcd}, node {@code nodeId}, the shared token
     * file ({@link ManagerProcess#clusterOptions}: a 2 s lease, a 1 s catalog lookup deadline).
     */
    public record Cluster(String etcd, String nodeId, Path tokenFile) {
        public Cluster {
            Objects.requireNonNull(etcd, "etcd");
            Objects.requireNonNull(nodeId, "nodeId");
            Objects.requireNonNull(tokenFile, "tokenFile");
        }

        /** The {@code --cluster-id} every launched member shares. */
        public static final String CLUSTER_ID = "launcher";

        /** Writes a cluster token to {@code file}, mode 0600 as docs/operations.md asks, and returns the file. */
        public static Path writeToken(Path file) throws IOException {
            return ManagerProcess.writeClusterToken(file);
        }

        List<String> options() {
            return ManagerProcess.clusterOptions(etcd, CLUSTER_ID, nodeId, tokenFile);
        }
    }

    /** Starts a Manager sized for pages of up to 64 KiB; see {@link #start(Path, long)}. */
    public static ManagerProcess start(Path dir) throws IOException {
        return start(dir, MIN_SLOT_BYTES);
    }

    /**
     * Starts a Manager over {@code dir} (reusing its SSD store if one is there) whose DRAM slots
     * hold {@code pageBytes}, and waits until ready. Budgets: slot = the next power of two of
     * the page, at least 64 KiB; DRAM = 256 slots (16 MiB for the CI model's 8 KiB pages, 64 MiB
     * for the bench model's 256 KiB pages); SSD = 4 x DRAM.
     */
    public static ManagerProcess start(Path dir, long pageBytes) throws IOException {
        return start(dir, pageBytes, List.of());
    }

    /**
     * As {@link #start(Path, long)}, with {@code extraOptions} appended to the command line (for
     * instance {@code --set maxLeases=2}); a later option wins.
     */
    public static ManagerProcess start(Path dir, long pageBytes, List<String> extraOptions) throws IOException {
        long slotBytes = Math.max(MIN_SLOT_BYTES, Long.highestOneBit(Math.max(1, pageBytes - 1)) << 1);
        long dramBytes = DRAM_SLOTS * slotBytes;
        return ManagerProcess.over(dir)
                .options("--dram-bytes", dramBytes / 1024 + "k", "--ssd-bytes", 4 * dramBytes / 1024 + "k",
                        "--ssd-policy", "write-through", "--set", "dramSlotBytes=" + slotBytes / 1024 + "k")
                .options(extraOptions).start();
    }

    /**
     * As {@link #start(Path, long)}, as a member of {@code cluster}. Returns once the Manager is
     * ready; its membership view may still be converging ({@link ManagerProcess#awaitView}).
     */
    public static ManagerProcess start(Path dir, long pageBytes, Cluster cluster) throws IOException {
        return start(dir, pageBytes, cluster.options());
    }

    /**
     * As {@link #start(Path, long, Cluster)}, with {@code extraOptions} appended to the command
     * line (for instance {@code --set kvEventsEndpoint=tcp://127.0.0.1:P}); a later option wins.
     */
    public static ManagerProcess start(Path dir, long pageBytes, Cluster cluster, List<String> extraOptions)
            throws IOException {
        List<String> options = new ArrayList<>(cluster.options());
        options.addAll(extraOptions);
        return start(dir, pageBytes, options);
    }

    /** The engine socket of a Manager over {@code dir}. */
    public static Path socket(Path dir) {
        return ManagerProcess.socket(dir);
    }
}
