package io.orbitkv.server.daemon;

import io.orbitkv.server.cluster.ClusterChannels;
import io.orbitkv.server.cluster.ClusterSecurity;
import io.orbitkv.testkit.EtcdServer;
import io.orbitkv.testkit.ManagerProcess;
import java.io.IOException;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;

/**
 * The cluster the loopback process tests start: a cluster token, a real etcd, authenticated cluster
 * channels for the test's own catalog calls, and small Manager members ({@link Managers}) named by
 * node id, each over {@code dir/<id>}, started and seen by one another before {@link #start} returns.
 *
 * <p>Owns etcd and the channels ({@link #close} closes both); the members belong to the test, which
 * kills, restarts and closes them ({@link #members} is a fresh mutable list for that).
 */
final class LoopbackCluster implements AutoCloseable {

    private final Path token;
    private final EtcdServer etcd;
    private final ClusterChannels channels;
    private final List<ManagerProcess> members = new ArrayList<>();

    private LoopbackCluster(Path token, EtcdServer etcd, ClusterChannels channels) {
        this.token = token;
        this.etcd = etcd;
        this.channels = channels;
    }

    /** Starts etcd and a member per node id, then waits until every member sees all of them. */
    static LoopbackCluster start(Path dir, String... nodeIds) throws IOException {
        Path token = Managers.clusterToken(dir);
        ClusterSecurity security = ClusterSecurity.fromTokenFile("test", token, Optional.empty());
        EtcdServer etcd = EtcdServer.start(dir);
        LoopbackCluster cluster = new LoopbackCluster(token, etcd, new ClusterChannels(security));
        try {
            for (String id : nodeIds) cluster.members.add(Managers.startMember(dir, etcd.endpoint(), id, token));
            Managers.awaitMembers(cluster.members, nodeIds.length);
        } catch (IOException | RuntimeException | Error e) {
            for (ManagerProcess m : cluster.members) m.close();
            cluster.close();
            throw e;
        }
        return cluster;
    }

    /** The member started as {@code index} (0 for the first node id). */
    ManagerProcess member(int index) {
        return members.get(index);
    }

    /** The members in start order, as a list of the test's own. */
    List<ManagerProcess> members() {
        return new ArrayList<>(members);
    }

    Path token() {
        return token;
    }

    EtcdServer etcd() {
        return etcd;
    }

    ClusterChannels channels() {
        return channels;
    }

    @Override
    public void close() {
        try {
            channels.close();
        } finally {
            etcd.close();
        }
    }
}
