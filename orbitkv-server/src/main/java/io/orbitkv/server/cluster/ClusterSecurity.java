package io.orbitkv.server.cluster;

import io.orbitkv.server.config.ClusterConfig;
import io.orbitkv.server.config.ConfigException;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFileAttributeView;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.PosixFilePermissions;
import java.util.EnumSet;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.regex.Pattern;

/**
 * The credentials a Manager presents to, and demands from, its cluster peers: the cluster id, the
 * shared cluster token, and optionally mutual TLS files.
 *
 * <p>Immutable value, validated on construction: the id is {@code [A-Za-z0-9_.-]{1,64}}, the
 * token at least {@value #MIN_TOKEN_BYTES} bytes with at least {@value #MIN_DISTINCT_TOKEN_BYTES}
 * distinct byte values (a shorter or trivially repetitive secret, such as 16 NUL bytes or
 * {@code aaaa...}, is a configuration mistake, not a security level). {@link #toString()} never
 * prints the token.
 *
 * <p>Design note: the token is read from a file, never from the command line, where {@code ps}
 * would show it to every local user; as ssh does for private keys, a token file that group or
 * others may read, write or execute is refused ({@link #fromTokenFile}), so a world-readable
 * secret never becomes the cluster's credential. 8 distinct values in 16 bytes is a floor that
 * every random token passes (a random 16-byte token has fewer than 8 distinct bytes with
 * probability below 10^-20) while placeholder tokens fail. mTLS is optional because the token
 * already rejects a foreign or unauthenticated peer; TLS adds confidentiality on a real network.
 *
 * @param clusterId the cluster every peer must name in its {@code orbitkv-cluster-id} header
 * @param token     the shared secret, UTF-8, surrounding whitespace stripped
 * @param tls       certificate, key and CA files for mutual TLS; empty means plaintext on the wire
 */
public record ClusterSecurity(String clusterId, byte[] token, Optional<TlsFiles> tls) {

    /** Shortest accepted token, in bytes. */
    public static final int MIN_TOKEN_BYTES = 16;
    /** Fewest distinct byte values an accepted token has. */
    public static final int MIN_DISTINCT_TOKEN_BYTES = 8;
    /** Permission bits a token file must not have (ssh's rule for private keys). */
    private static final Set<PosixFilePermission> NOT_OWNER = EnumSet.of(
            PosixFilePermission.GROUP_READ, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_EXECUTE,
            PosixFilePermission.OTHERS_READ, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_EXECUTE);

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
            throw new IllegalArgumentException("cluster token must be at least " + MIN_TOKEN_BYTES + " bytes, got " + token.length);
        }
        if (distinctBytes(token) < MIN_DISTINCT_TOKEN_BYTES) {
            throw new IllegalArgumentException("cluster token has fewer than " + MIN_DISTINCT_TOKEN_BYTES
                    + " distinct byte values (a placeholder, not a secret); generate one, e.g. openssl rand -hex 32");
        }
        token = token.clone();
        Objects.requireNonNull(tls, "tls");
    }

    /**
     * Reads the token from {@code tokenFile} (whitespace around it is ignored) and checks it.
     *
     * @throws ConfigException naming the file when it cannot be read, is accessible by group or
     *                         others, or holds a token the constructor refuses
     */
    public static ClusterSecurity fromTokenFile(String clusterId, Path tokenFile, Optional<TlsFiles> tls) {
        String text;
        try {
            PosixFileAttributeView attributes = Files.getFileAttributeView(tokenFile, PosixFileAttributeView.class);
            if (attributes != null) {
                Set<PosixFilePermission> mode = attributes.readAttributes().permissions();
                if (mode.stream().anyMatch(NOT_OWNER::contains)) {
                    throw new ConfigException("cluster token file " + tokenFile + " is accessible by group or others (mode "
                            + PosixFilePermissions.toString(mode) + "); refusing it: run chmod 600 " + tokenFile);
                }
            }
            text = Files.readString(tokenFile, StandardCharsets.UTF_8).strip();
        } catch (IOException e) {
            throw new ConfigException("cannot read cluster token file " + tokenFile + ": " + e);
        }
        try {
            return new ClusterSecurity(clusterId, text.getBytes(StandardCharsets.UTF_8), tls);
        } catch (IllegalArgumentException e) {
            throw new ConfigException("cluster token file " + tokenFile + ": " + e.getMessage());
        }
    }

    /**
     * The credentials a cluster member's configuration names, read and checked now (the daemon
     * calls this before it opens any store, so a bad token costs no recovery).
     *
     * @throws ConfigException as {@link #fromTokenFile} does
     */
    public static ClusterSecurity load(ClusterConfig config) {
        Optional<TlsFiles> tls = config.tlsCert().map(cert ->
                new TlsFiles(cert, config.tlsKey().orElseThrow(), config.tlsCa().orElseThrow()));
        return fromTokenFile(config.clusterId(), config.tokenFile().orElseThrow(
                () -> new ConfigException("a cluster member needs clusterTokenFile (--cluster-token-file)")), tls);
    }

    private static int distinctBytes(byte[] token) {
        boolean[] seen = new boolean[256];
        int distinct = 0;
        for (byte b : token) {
            if (!seen[b & 0xFF]) {
                seen[b & 0xFF] = true;
                distinct++;
            }
        }
        return distinct;
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
