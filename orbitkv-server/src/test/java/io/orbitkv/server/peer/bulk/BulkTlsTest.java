package io.orbitkv.server.peer.bulk;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.peer.AuthorizeResult;
import io.orbitkv.core.peer.PeerCandidate;
import io.orbitkv.core.peer.PeerReadResult;
import io.orbitkv.core.peer.PeerReader;
import io.orbitkv.core.peer.ReleaseRetrier;
import io.orbitkv.server.cluster.ClusterSecurity;
import io.orbitkv.core.storage.TieredStore;
import io.orbitkv.testkit.Environment;
import io.orbitkv.testkit.ProcessTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The data plane under the cluster's mutual TLS, with certificates made by the test
 * ({@code openssl}, EC P-256 CA and a node certificate for 127.0.0.1): a requester with the
 * cluster's CA and token reads bit-identical pages; a plaintext requester and one whose
 * certificate comes from another CA get nothing, and nothing is pinned at the source.
 */
@ProcessTest
class BulkTlsTest {

    static final Path OPENSSL = Path.of("/usr/bin/openssl");
    static final byte[] TOKEN = "0123456789abcdef-bulk".getBytes(StandardCharsets.UTF_8);

    @TempDir
    Path dir;

    static void run(Path cwd, String... cmd) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(cmd).directory(cwd.toFile()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (p.waitFor() != 0) throw new IOException(String.join(" ", cmd) + " failed: " + out);
    }

    static ClusterSecurity.TlsFiles pki(Path d) throws Exception {
        Files.createDirectories(d);
        String o = OPENSSL.toString();
        run(d, o, "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "ca.key");
        run(d, o, "req", "-x509", "-new", "-key", "ca.key", "-subj", "/CN=orbitkv-bulk-ca", "-days", "2", "-out", "ca.pem");
        run(d, o, "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "node.key");
        run(d, o, "req", "-new", "-key", "node.key", "-subj", "/CN=node", "-out", "node.csr");
        Files.writeString(d.resolve("ext.cnf"), "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n");
        run(d, o, "x509", "-req", "-in", "node.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-days", "2", "-extfile", "ext.cnf", "-out", "node.pem");
        return new ClusterSecurity.TlsFiles(d.resolve("node.pem"), d.resolve("node.key"), d.resolve("ca.pem"));
    }

    @Test
    void onlyRequestersWithACertificateOfTheClusterCaAreServed() throws Exception {
        Environment.require(Files.isExecutable(OPENSSL), "openssl at " + OPENSSL + ", to make test certificates");
        ClusterSecurity ours = new ClusterSecurity("orbit-bulk", TOKEN, Optional.of(pki(dir.resolve("ours"))));
        ClusterSecurity foreign = new ClusterSecurity("orbit-bulk", TOKEN, Optional.of(pki(dir.resolve("foreign"))));
        ClusterSecurity plain = new ClusterSecurity("orbit-bulk", TOKEN, Optional.empty());
        BulkPeerReadTest.Source a = new BulkPeerReadTest.Source(dir, BulkPeerReadTest.A, BulkLimits.defaults(), ours);
        try (a; TieredStore requester = BulkPeerReadTest.store(dir, "b")) {
            List<PeerCandidate> candidates = List.of(a.candidate(BulkPeerReadTest.key(1), a.put(BulkPeerReadTest.key(1))),
                    a.candidate(BulkPeerReadTest.key(2), a.put(BulkPeerReadTest.key(2))));
            for (ClusterSecurity refused : List.of(plain, foreign)) {
                try (BulkPayloadTransport t = transport(a, refused)) {
                    for (PeerReadResult r : read(t, requester, candidates)) {
                        assertThat(r).isInstanceOfSatisfying(PeerReadResult.Refused.class,
                                x -> assertThat(x.reason()).isEqualTo(AuthorizeResult.Rejection.UNREACHABLE));
                    }
                }
                assertThat(a.server.batchesServed()).as(refused.toString()).isZero();
                assertThat(a.tickets.size()).isZero();
            }
            try (BulkPayloadTransport t = transport(a, ours)) {
                assertThat(BulkPeerReadTest.releaseFetched(read(t, requester, candidates))).isEqualTo(2);
                for (PeerCandidate c : candidates) requester.dram().evict(c.key());
                assertThat(BulkPeerReadTest.releaseFetched(read(t, requester, candidates)))
                        .as("read again: the remembered checksum, the trailer with the last piece, through TLS").isEqualTo(2);
            }
            assertThat(a.server.checksumsReused()).isEqualTo(2);
            assertThat(a.server.batchesServed()).isEqualTo(2);
            a.awaitIdle();
        }
    }

    static BulkPayloadTransport transport(BulkPeerReadTest.Source a, ClusterSecurity security) throws Exception {
        return new BulkPayloadTransport(new BulkPeerReadTest.RefusingControl(),
                source -> CompletableFuture.completedFuture(Optional.of(a.server.address())), security,
                BulkLimits.defaults(), new SimpleMeterRegistry());
    }

    static List<PeerReadResult> read(BulkPayloadTransport t, TieredStore requester, List<PeerCandidate> candidates) {
        PeerReader reader = new PeerReader(BulkPeerReadTest.B, requester.dram(), BulkPeerReadTest.MEMBERS, t,
                new ReleaseRetrier(t, 16, 4, 1_000, 10_000), System::nanoTime);
        return reader.readBatch(candidates, BulkPeerReadTest.NS).stream().map(f -> f.orTimeout(20, TimeUnit.SECONDS).join()).toList();
    }
}
