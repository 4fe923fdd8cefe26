package io.orbitkv.server.cluster;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.grpc.Status;
import io.grpc.StatusRuntimeException;
import io.orbitkv.server.cluster.proto.ClusterInfoGrpc;
import io.orbitkv.server.cluster.proto.HelloRequest;
import java.io.IOException;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import io.orbitkv.testkit.Environment;
import io.orbitkv.testkit.ProcessTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * Mutual TLS on the cluster endpoint with certificates made by the test ({@code openssl}: an EC
 * P-256 CA and a node certificate for 127.0.0.1, PKCS#8 key): a peer with a certificate of the
 * cluster's CA and the token is served; a plaintext peer and a peer whose certificate comes from
 * another CA are refused at the handshake.
 */
@ProcessTest
class ClusterMtlsTest {

    static final Path OPENSSL = Path.of("/usr/bin/openssl");
    static final byte[] TOKEN = "mtls-cluster-token-0123456789".getBytes(StandardCharsets.UTF_8);

    @TempDir
    Path dir;

    static void run(Path cwd, String... cmd) throws IOException, InterruptedException {
        Process p = new ProcessBuilder(cmd).directory(cwd.toFile()).redirectErrorStream(true).start();
        String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
        if (p.waitFor() != 0) throw new IOException(String.join(" ", cmd) + " failed: " + out);
    }

    /** A CA and one node certificate signed by it, in {@code d}. */
    static ClusterSecurity.TlsFiles pki(Path d) throws Exception {
        Files.createDirectories(d);
        run(d, OPENSSL.toString(), "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "ca.key");
        run(d, OPENSSL.toString(), "req", "-x509", "-new", "-key", "ca.key", "-subj", "/CN=orbitkv-test-ca", "-days", "2", "-out", "ca.pem");
        run(d, OPENSSL.toString(), "genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", "node.key");
        run(d, OPENSSL.toString(), "req", "-new", "-key", "node.key", "-subj", "/CN=node", "-out", "node.csr");
        Files.writeString(d.resolve("ext.cnf"), "subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth,clientAuth\n");
        run(d, OPENSSL.toString(), "x509", "-req", "-in", "node.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-days", "2", "-extfile", "ext.cnf", "-out", "node.pem");
        return new ClusterSecurity.TlsFiles(d.resolve("node.pem"), d.resolve("node.key"), d.resolve("ca.pem"));
    }

    @Test
    void onlyPeersWithACertificateOfTheClusterCaAndTheTokenAreServed() throws Exception {
        Environment.require(Files.isExecutable(OPENSSL), "openssl at " + OPENSSL + ", to make test certificates");
        ClusterSecurity.TlsFiles ours = pki(dir.resolve("ours"));
        ClusterSecurity.TlsFiles foreign = pki(dir.resolve("foreign"));
        ClusterSecurity security = new ClusterSecurity("tls", TOKEN, Optional.of(ours));
        try (ClusterRpcServer server = ClusterRpcServer.start(new InetSocketAddress("127.0.0.1", 0), security,
                List.of(new ClusterInfoService("tls-node", 3, keys -> CompletableFuture.completedFuture(Map.of()))))) {
            String endpoint = "127.0.0.1:" + server.address().getPort();

            try (ClusterChannels channels = new ClusterChannels(security)) {
                assertThat(ClusterInfoGrpc.newBlockingStub(channels.channel(endpoint)).withDeadlineAfter(10, TimeUnit.SECONDS)
                        .hello(HelloRequest.getDefaultInstance()).getNodeId()).isEqualTo("tls-node");
            }
            for (ClusterSecurity peer : List.of(new ClusterSecurity("tls", TOKEN, Optional.empty()),
                    new ClusterSecurity("tls", TOKEN, Optional.of(foreign)))) {
                try (ClusterChannels channels = new ClusterChannels(peer)) {
                    assertThatThrownBy(() -> ClusterInfoGrpc.newBlockingStub(channels.channel(endpoint))
                            .withDeadlineAfter(10, TimeUnit.SECONDS).hello(HelloRequest.getDefaultInstance()))
                            .as(peer.toString())
                            .isInstanceOfSatisfying(StatusRuntimeException.class,
                                    e -> assertThat(e.getStatus().getCode()).isEqualTo(Status.Code.UNAVAILABLE));
                }
            }
        }
    }
}
