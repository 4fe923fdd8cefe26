package io.orbitkv.server.daemon;

import static org.awaitility.Awaitility.await;

import io.orbitkv.testkit.ManagerProcess;
import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;

/**
 * The small Manager these process tests start ({@link ManagerProcess} over one directory): 16 MiB
 * of DRAM in 64 KiB slots, 32 MiB of SSD, a 192 MiB heap, and the directory itself as the region
 * directory (REGISTER_REGION files go directly in it). Stateless.
 */
final class Managers {

    private static final List<String> JVM = List.of("-Xmx192m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto");

    private Managers() {
    }

    /** The launch of the small Manager over {@code dir} plus {@code extra} options. */
    static ManagerProcess.Launch small(Path dir, String... extra) {
        return ManagerProcess.over(dir).jvm(JVM)
                .options("--dram-bytes", "16m", "--ssd-bytes", "32m", "--set", "dramSlotBytes=64k", "--set", "regionDir=" + dir)
                .options(extra);
    }

    /** Its command line (for a second process started by hand). */
    static List<String> command(Path dir, String... extra) {
        return small(dir, extra).command();
    }

    /** Starts the small Manager and waits for its ready line. */
    static ManagerProcess start(Path dir, String... extra) throws IOException {
        return small(dir, extra).start();
    }

    /**
     * As {@link #start(Path, String...)}, under {@code launcher} (a command prefix such as
     * {@code setpriv ... --}; may be empty) with {@code environment} added to this process's.
     */
    static ManagerProcess start(Path dir, List<String> launcher, Map<String, String> environment, String... extra)
            throws IOException {
        return small(dir, extra).prefix(launcher).environment(environment).start();
    }

    /** Options making a Manager member {@code nodeId} of cluster {@code test} (see {@link ManagerProcess#clusterOptions}). */
    static String[] clusterOptions(String etcd, String nodeId, Path tokenFile) {
        return ManagerProcess.clusterOptions(etcd, "test", nodeId, tokenFile).toArray(String[]::new);
    }

    /** Writes the cluster token file the members share under {@code dir}; returns its path. */
    static Path clusterToken(Path dir) throws IOException {
        return ManagerProcess.writeClusterToken(dir.resolve("token"));
    }

    /** Starts cluster member {@code nodeId} of etcd {@code etcd} over {@code parent/nodeId} and waits for it. */
    static ManagerProcess startMember(Path parent, String etcd, String nodeId, Path tokenFile) throws IOException {
        return start(parent.resolve(nodeId), clusterOptions(etcd, nodeId, tokenFile));
    }

    /** Waits (30 s each) until every one of {@code all} has a valid membership view of {@code live} members. */
    static void awaitMembers(List<ManagerProcess> all, int live) {
        for (ManagerProcess m : all) {
            await("membership converges on " + m.dir()).atMost(Duration.ofSeconds(30)).until(() ->
                    m.metric("orbitkv_membership_valid") == 1 && m.metric("orbitkv_membership_live") == live);
        }
    }
}
