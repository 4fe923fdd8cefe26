package io.orbitkv.server.cluster;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Objects;
import java.util.Optional;
import java.util.regex.Pattern;

/**
 * The credentials a Manager presents to, and demands from, its cluster peers: the cluster id, the
 * shared cluster token, and optionally mutual TLS files.
 *
 * <p>Immutable value, validated on construction: the id is {@code [A-Za-z0-9_.-]{1,64}}, the
 * token at least {@value #MIN_TOKEN_BYTES} bytes (a shorter secret is a configuration mistake, not
 * a security level). {@link #toString()} never prints the token.
 *
 * <p>Design note: the token is read from a file (mode 0600 by convention), never from the command
 * line, where {@code ps} would show it to every local user. mTLS is optional because the token
 * already rejects a foreign or unauthenticated peer; TLS adds confidentiality on a real network.
 *
 * @param clusterId the cluster every peer must name in its {@code orbitkv-cluster-id} header
 * @param token     the shared secret, UTF-8, surrounding whitespace stripped
 * @param tls       certificate, key and CA files for mutual TLS; empty means plaintext on the wire
 */
public record ClusterSecurity(String clusterId, byte[] token, Optional<TlsFiles> tls) {

    /** Shortest accepted token, in bytes. */
    public static final int MIN_TOKEN_BYTES = 16;

    private static final Pattern CLUSTER_ID = Pattern.compile("[A-Za-z0-9_.-]{1,64}");

    /**
     * Files for mutual TLS: this node's certificate chain and PKCS#8 private key (PEM), and the CA
     * bundle every peer's certificate must chain to (both directions: clients are verified too).
     */
    public record TlsFiles(Path certChain, Path privateKey, Path trustedCa) {
        public TlsFiles {
            Objects.requireNonNull(certChain, "certChain");
            Objects.requireNonNull(privateKey, "privateKey");
            Objects.requireNonNull(trustedCa, "trustedCa");
        }
    }

    public ClusterSecurity {
        Objects.requireNonNull(clusterId, "clusterId");
        if (!CLUSTER_ID.matcher(clusterId).matches()) {
            throw new IllegalArgumentException("cluster id must match " + CLUSTER_ID.pattern() + ": '" + clusterId + "'");
        }
        Objects.requireNonNull(token, "token");
        if (token.length < MIN_TOKEN_BYTES) {
            throw new IllegalArgumentException("cluster token must be at least " + MIN_TOKEN_BYTES + " bytes");
        }
        token = token.clone();
        Objects.requireNonNull(tls, "tls");
    }

    /** Reads the token from {@code tokenFile} (whitespace around it is ignored). */
    public static ClusterSecurity fromTokenFile(String clusterId, Path tokenFile, Optional<TlsFiles> tls) throws IOException {
        String text = Files.readString(tokenFile, StandardCharsets.UTF_8).strip();
        return new ClusterSecurity(clusterId, text.getBytes(StandardCharsets.UTF_8), tls);
    }

    @Override
    public byte[] token() {
        return token.clone();
    }

    @Override
    public String toString() {
        return "ClusterSecurity[clusterId=" + clusterId + ", token=<" + token.length + " bytes>, tls="
                + (tls.isPresent() ? "mutual" : "off") + "]";
    }
}
