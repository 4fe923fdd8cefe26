package io.orbitkv.server.peer.bulk;

import io.orbitkv.server.cluster.ClusterSecurity;

import javax.net.ssl.KeyManagerFactory;
import javax.net.ssl.SSLContext;
import javax.net.ssl.TrustManagerFactory;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyStore;
import java.security.PrivateKey;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.security.spec.PKCS8EncodedKeySpec;
import java.util.Base64;
import java.util.List;
import java.util.Optional;

/**
 * The data plane's TLS context from the cluster port's files ({@link ClusterSecurity.TlsFiles}:
 * PEM certificate chain, PKCS#8 PEM key, PEM CA bundle), so both planes trust exactly the same
 * peers. Stateless.
 */
final class BulkTls {

    private BulkTls() {
    }

    /** The context for {@code security}'s TLS files, or empty when the cluster runs without TLS. */
    static Optional<SSLContext> context(ClusterSecurity security) throws IOException {
        if (security.tls().isEmpty()) return Optional.empty();
        ClusterSecurity.TlsFiles files = security.tls().get();
        try {
            CertificateFactory x509 = CertificateFactory.getInstance("X.509");
            List<? extends Certificate> chain;
            try (InputStream in = Files.newInputStream(files.certChain())) {
                chain = List.copyOf(x509.generateCertificates(in));
            }
            List<? extends Certificate> cas;
            try (InputStream in = Files.newInputStream(files.trustedCa())) {
                cas = List.copyOf(x509.generateCertificates(in));
            }
            if (chain.isEmpty() || cas.isEmpty()) throw new IOException("no certificate in " + files);
            char[] password = new char[0];
            KeyStore keys = KeyStore.getInstance("PKCS12");
            keys.load(null, null);
            keys.setKeyEntry("node", privateKey(Files.readString(files.privateKey(), StandardCharsets.US_ASCII)), password,
                    chain.toArray(Certificate[]::new));
            KeyManagerFactory kmf = KeyManagerFactory.getInstance(KeyManagerFactory.getDefaultAlgorithm());
            kmf.init(keys, password);
            KeyStore trust = KeyStore.getInstance("PKCS12");
            trust.load(null, null);
            for (int i = 0; i < cas.size(); i++) trust.setCertificateEntry("ca" + i, cas.get(i));
            TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
            tmf.init(trust);
            SSLContext context = SSLContext.getInstance("TLSv1.3");
            context.init(kmf.getKeyManagers(), tmf.getTrustManagers(), null);
            return Optional.of(context);
        } catch (GeneralSecurityException e) {
            throw new IOException("cannot build the data plane's TLS context from " + files + ": " + e.getMessage(), e);
        }
    }

    private static PrivateKey privateKey(String pem) throws GeneralSecurityException, IOException {
        String begin = "-----BEGIN PRIVATE KEY-----";
        String end = "-----END PRIVATE KEY-----";
        int from = pem.indexOf(begin);
        int to = pem.indexOf(end);
        if (from < 0 || to < from) throw new IOException("the TLS key must be a PKCS#8 PEM (BEGIN PRIVATE KEY)");
        byte[] der = Base64.getMimeDecoder().decode(pem.substring(from + begin.length(), to));
        PKCS8EncodedKeySpec spec = new PKCS8EncodedKeySpec(der);
        GeneralSecurityException last = null;
        for (String algorithm : List.of("EC", "RSA", "Ed25519")) {
            try {
                return KeyFactory.getInstance(algorithm).generatePrivate(spec);
            } catch (GeneralSecurityException e) {
                last = e;
            }
        }
        throw last;
    }
}
