package io.orbitkv.server.daemon;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.PublishOutcome;
import io.orbitkv.server.cluster.ClusterChannels;
import io.orbitkv.server.cluster.ClusterSecurity;
import io.orbitkv.server.daemon.PeerProcessTest.Prefix;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.StateGroup;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.testkit.EtcdServer;
import io.orbitkv.testkit.ManagerProcess;
import io.orbitkv.testkit.ProcessTest;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Two Managers and a real etcd: B's engine QUERYs 8 pages only A holds once without a wait (a miss
 * that starts the catalog lookup), A is frozen (SIGSTOP) and B QUERYs again with a 2 s peer wait.
 * B holds catalog candidates and has no bulk connection to A, so the fetch goes through the control
 * fallback and would only end at the transport's 10 s deadline: the QUERY still settles FINAL by
 * its 2 s bound, a miss, and every lease, staging byte, fetch and ticket on B returns to 0.
 */
@ProcessTest
class PeerWaitFrozenPeerProcessTest {

    static final int WAIT_MILLIS = 2_000;

    @TempDir
    Path dir;

    @Test
    void aFrozenPeerCannotHoldAQueryPastItsPeerWait() throws Exception {
        Path token = Managers.clusterToken(dir);
        ClusterSecurity security = ClusterSecurity.fromTokenFile("test", token, Optional.empty());
        try (EtcdServer etcd = EtcdServer.start(dir);
             ClusterChannels channels = new ClusterChannels(security)) {
            ManagerProcess a = Managers.startMember(dir, etcd.endpoint(), "a", token);
            ManagerProcess b = Managers.startMember(dir, etcd.endpoint(), "b", token);
            boolean frozen = false;
            try {
                Managers.awaitMembers(List.of(a, b), 2);
                Namespace ns = new Namespace("frozen-peer", "r1", "sha256:w", "sha256:t", "", "bf16", "nhd",
                        PeerProcessTest.PAGE_TOKENS, 1, 0, 1, 0, 1);
                RecoveryContract contract = new RecoveryContract(PeerProcessTest.PAGE_TOKENS, List.of(new StateGroup.Full(0)));
                try (OrbitKvClient onA = OrbitKvClient.connect(ManagerProcess.socket(a.dir()), Duration.ofSeconds(20));
                     OrbitKvClient onB = OrbitKvClient.connect(ManagerProcess.socket(b.dir()), Duration.ofSeconds(20))) {
                    onA.register("engine-a", 1, ns, contract);
                    onB.register("engine-b", 1, ns, contract);
                    Prefix prefix = Prefix.of(ns, 8, 32 * 1024, 21);
                    assertThat(onA.publish(prefix.toPublish())).containsOnly(PublishOutcome.SEALED).hasSize(8);
                    await("the catalog knows the prefix").atMost(Duration.ofSeconds(20)).until(() ->
                            ClusterProcessTest.locate(channels, a, prefix.keys()).stream().allMatch(l -> ClusterProcessTest.heldBy(l, "a")));

                    Reply.QueryResult miss = onB.awaitSettled(onB.query(prefix.query(1)));
                    assertThat(miss.boundaryTokens()).as("without a wait the first QUERY misses").isZero();
                    onB.release(miss.operationId());
                    Thread.sleep(500);
                    signal(a, "-STOP");
                    frozen = true;

                    long sent = System.nanoTime();
                    Reply.QueryResult settled = onB.awaitSettled(onB.query(prefix.query(2).withPeerWaitMillis(WAIT_MILLIS)));
                    long millis = (System.nanoTime() - sent) / 1_000_000;
                    System.out.println("QUERY with a " + WAIT_MILLIS + " ms peer wait, peer frozen: settled in " + millis + " ms");
                    assertThat(millis).as("settled by its peer wait bound, not the transport's 10 s deadline")
                            .isBetween((long) WAIT_MILLIS - 50, (long) WAIT_MILLIS + 1_500);
                    assertThat(settled.boundaryTokens()).as("a miss: nothing of the prefix is local").isZero();
                    onB.release(settled.operationId());
                    PeerProcessTest.awaitDrained(List.of(b));
                }
            } finally {
                if (frozen) signal(a, "-CONT");
                a.close();
                b.close();
            }
        }
    }

    private static void signal(ManagerProcess m, String signal) throws Exception {
        assertThat(new ProcessBuilder("kill", signal, Long.toString(m.pid())).inheritIO().start().waitFor()).isZero();
    }
}
