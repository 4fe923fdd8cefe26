package io.orbitkv.server.cli;

import io.orbitkv.server.cluster.ClusterSecurity;
import io.orbitkv.server.config.ConfigException;
import java.nio.file.Path;
import java.util.Optional;

/**
 * The cluster credentials of a command that calls Managers' cluster endpoints from outside the
 * cluster ({@code orbitkv cluster locate}, {@code orbitkv router}): a token file and, for mutual
 * TLS, a certificate, key and CA given together. Bad input is an {@link InputException} naming
 * the flag. Stateless.
 */
final class ClusterCliSecurity {

    private ClusterCliSecurity() {}

    /** @param tokenFlag the flag that named {@code tokenFile}, for messages */
    static ClusterSecurity load(String clusterId, Path tokenFile, String tokenFlag, Path tlsCert, Path tlsKey, Path tlsCa) {
        int tlsGiven = (tlsCert == null ? 0 : 1) + (tlsKey == null ? 0 : 1) + (tlsCa == null ? 0 : 1);
        if (tlsGiven != 0 && tlsGiven != 3) throw new InputException("--tls-cert, --tls-key and --tls-ca go together");
        Optional<ClusterSecurity.TlsFiles> tls = tlsGiven == 3
                ? Optional.of(new ClusterSecurity.TlsFiles(tlsCert, tlsKey, tlsCa)) : Optional.empty();
        CliFiles.read(tokenFile, tokenFlag); // existence and size, with the CLI's messages
        try {
            return ClusterSecurity.fromTokenFile(clusterId, tokenFile, tls);
        } catch (ConfigException | IllegalArgumentException e) {
            throw new InputException(tokenFlag + ": " + e.getMessage());
        }
    }
}
