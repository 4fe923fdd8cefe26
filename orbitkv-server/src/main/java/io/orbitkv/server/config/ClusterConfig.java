package io.orbitkv.server.config;

import java.net.InetSocketAddress;
import java.nio.file.Path;
import java.util.List;
import java.util.Objects;
import java.util.Optional;

/**
 * The cluster part of a Manager's configuration (docs/operations.md, "Cluster"). A Manager with
 * no etcd endpoint is single-node: no cluster endpoint, membership or catalog.
 *
 * <p>Immutable value. Invariant: when {@link #enabled()}, a node id, a listen address and a token
 * file are set, and the TLS files are all set or none.
 *
 * @param etcdEndpoints    etcd client URLs; empty = single-node
 * @param nodeId           this node's stable name
 * @param clusterId        the cluster's name: etcd key prefix and the {@code orbitkv-cluster-id} header
 * @param listen           cluster gRPC address, {@code host:port} (port 0 = any free one)
 * @param dataListen       bulk data plane address, {@code host:port} (docs/peer-data-plane.md); empty =
 *                         the cluster listen host with an ephemeral port (peers ask for it by RPC)
 * @param credentials      the token file and the mutual-TLS files
 * @param leaseTtlMillis   etcd lease TTL (also how long the view stays valid without renewal)
 * @param lookupTimeoutMillis deadline of one catalog lookup batch
 * @param catalogReplicas  catalog owners of each key's residency evidence (R, 1..8)
 */
public record ClusterConfig(List<String> etcdEndpoints, String nodeId, String clusterId, String listen,
                            String dataListen, Credentials credentials, long leaseTtlMillis, long lookupTimeoutMillis,
                            int catalogReplicas) {

    /**
     * The files a member proves itself with.
     *
     * @param tokenFile file holding the cluster token
     * @param tlsCert   this node's certificate chain (PEM), for mutual TLS
     * @param tlsKey    this node's PKCS#8 private key (PEM)
     * @param tlsCa     CA bundle peers' certificates must chain to
     */
    public record Credentials(Optional<Path> tokenFile, Optional<Path> tlsCert, Optional<Path> tlsKey,
                              Optional<Path> tlsCa) {
        public Credentials {
            Objects.requireNonNull(tokenFile, "tokenFile");
            int tls = (tlsCert.isPresent() ? 1 : 0) + (tlsKey.isPresent() ? 1 : 0) + (tlsCa.isPresent() ? 1 : 0);
            if (tls != 0 && tls != 3) {
                throw new IllegalArgumentException("clusterTlsCert, clusterTlsKey and clusterTlsCa go together");
            }
        }
    }

    public ClusterConfig {
        etcdEndpoints = List.copyOf(etcdEndpoints);
        Objects.requireNonNull(nodeId, "nodeId");
        Objects.requireNonNull(clusterId, "clusterId");
        Objects.requireNonNull(listen, "listen");
        Objects.requireNonNull(dataListen, "dataListen");
        Objects.requireNonNull(credentials, "credentials");
        if (!dataListen.isEmpty()) listenAddress(dataListen);
        if (leaseTtlMillis < 2_000) throw new IllegalArgumentException("clusterLeaseTtlMillis must be >= 2000");
        if (lookupTimeoutMillis < 1) throw new IllegalArgumentException("clusterLookupTimeoutMillis must be >= 1");
        if (catalogReplicas < 1 || catalogReplicas > 8) throw new IllegalArgumentException("catalogReplicas must be 1..8: " + catalogReplicas);
        if (!etcdEndpoints.isEmpty()) {
            if (nodeId.isEmpty()) throw new IllegalArgumentException("a cluster member needs nodeId (--node-id)");
            if (credentials.tokenFile().isEmpty()) throw new IllegalArgumentException("a cluster member needs clusterTokenFile (--cluster-token-file)");
            listenAddress(listen);
        }
    }

    /** {@link Credentials#tokenFile()}. */
    public Optional<Path> tokenFile() {
        return credentials.tokenFile();
    }

    /** {@link Credentials#tlsCert()}. */
    public Optional<Path> tlsCert() {
        return credentials.tlsCert();
    }

    /** {@link Credentials#tlsKey()}. */
    public Optional<Path> tlsKey() {
        return credentials.tlsKey();
    }

    /** {@link Credentials#tlsCa()}. */
    public Optional<Path> tlsCa() {
        return credentials.tlsCa();
    }

    /** True when this Manager joins a cluster. */
    public boolean enabled() {
        return !etcdEndpoints.isEmpty();
    }

    /** Where the bulk data plane binds: {@link #dataListen}, or the cluster listen host with port 0. */
    public InetSocketAddress dataListenAddress() {
        return dataListen.isEmpty() ? new InetSocketAddress(listenAddress(listen).getHostString(), 0) : listenAddress(dataListen);
    }

    /** Parses {@code host:port}. */
    public static InetSocketAddress listenAddress(String listen) {
        int colon = listen.lastIndexOf(':');
        if (colon <= 0) throw new IllegalArgumentException("clusterListen wants host:port, got '" + listen + "'");
        try {
            int port = Integer.parseInt(listen.substring(colon + 1));
            if (port < 0 || port > 65_535) throw new NumberFormatException();
            return new InetSocketAddress(listen.substring(0, colon), port);
        } catch (NumberFormatException e) {
            throw new IllegalArgumentException("clusterListen port must be 0..65535: '" + listen + "'");
        }
    }
}
