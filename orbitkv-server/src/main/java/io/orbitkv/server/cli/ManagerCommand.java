package io.orbitkv.server.cli;

import io.orbitkv.server.config.ConfigException;
import io.orbitkv.server.config.ManagerConfig;
import io.orbitkv.server.daemon.ManagerDaemon;
import io.orbitkv.server.log.LogLevel;
import io.orbitkv.server.log.Logging;
import java.io.IOException;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.logging.Logger;
import picocli.CommandLine.Command;
import picocli.CommandLine.Model.CommandSpec;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;

/**
 * {@code orbitkv manager}: runs a single-node Manager in the foreground until SIGTERM or SIGINT
 * (Ctrl-C), then drains and exits with status 0. Configuration: embedded defaults, then the
 * environment aliases ({@code ORBITKV_COST_*}), then {@code --config FILE}, then
 * {@code --set KEY=VALUE} and the named options (each names a key of {@link ManagerConfig#KEYS}).
 *
 * <p>One instance per invocation. Thread model: the caller's thread starts the daemon, prints the
 * ready line and waits; the JDK's signal-dispatch thread only releases that wait, so shutdown
 * always runs on the caller's thread and the command returns 0 (a plain shutdown hook would
 * leave the JVM's 143 exit status after SIGTERM). A shutdown hook still closes the daemon if the
 * JVM exits another way (SIGHUP, {@code System.exit}).
 *
 * <p>Exit status: 0 after a clean stop, 2 for bad configuration (a refused cluster token file
 * included) or when another Manager holds the store's lock (one line on stderr), 1 if startup
 * failed for another reason.
 */
@Command(name = "manager", mixinStandardHelpOptions = true,
        description = "Run a single-node Manager (DRAM + SSD tiers, engine socket, HTTP /metrics and /status) "
                + "until SIGTERM or Ctrl-C.")
final class ManagerCommand implements Callable<Integer> {

    @Spec
    CommandSpec spec;

    @Option(names = "--config", paramLabel = "FILE", description = "JSON file of configuration keys (docs/operations.md)")
    Path configFile;

    @Option(names = "--dram-bytes", paramLabel = "SIZE", description = "DRAM tier size, e.g. 512m, 1g (default 1g)")
    String dramBytes;

    @Option(names = "--dram-dir", paramLabel = "DIR", description = "directory of the DRAM lock file; arenas are memfds (default /dev/shm/orbitkv-$USER)")
    String dramDir;

    @Option(names = "--ssd-dir", paramLabel = "DIR", description = "SSD store directory, holds manager.lock (default ./var/orbitkv/ssd)")
    String ssdDir;

    @Option(names = "--ssd-bytes", paramLabel = "SIZE", description = "SSD store size, e.g. 4g (default 4g)")
    String ssdBytes;

    @Option(names = "--ssd-policy", paramLabel = "POLICY", description = "write-through, on-evict or reuse-aware[:N]")
    String ssdPolicy;

    @Option(names = "--ssd-read-path", paramLabel = "ROUTE",
            description = "SSD read route: positional, uring (refuses to start without io_uring) or auto (default)")
    String ssdReadPath;

    @Option(names = "--socket", paramLabel = "PATH", description = "engine socket (default ./var/orbitkv/manager.sock)")
    String socket;

    @Option(names = "--http", paramLabel = "PORT", description = "HTTP port on 127.0.0.1; 0 picks a free one (default 9464)")
    String httpPort;

    @Option(names = "--ready-file", paramLabel = "FILE", description = "where the ready line is written (default <ssd-dir>/manager.ready)")
    String readyFile;

    @Option(names = "--etcd", paramLabel = "URLS", description = "etcd client URLs (comma-separated): join a cluster, e.g. http://127.0.0.1:2379")
    String etcd;

    @Option(names = "--node-id", paramLabel = "ID", description = "this node's stable name in the cluster")
    String nodeId;

    @Option(names = "--cluster-id", paramLabel = "ID", description = "cluster name (default orbitkv)")
    String clusterId;

    @Option(names = "--cluster-listen", paramLabel = "HOST:PORT", description = "cluster gRPC address (default 127.0.0.1:0)")
    String clusterListen;

    @Option(names = "--cluster-data-listen", paramLabel = "HOST:PORT",
            description = "bulk data plane address for peer page reads (default: the cluster host, any free port)")
    String clusterDataListen;

    @Option(names = "--cluster-token-file", paramLabel = "FILE", description = "file holding the cluster token (mode 0600, >= 16 bytes, >= 8 distinct byte values)")
    String clusterTokenFile;

    @Option(names = "--log-level", paramLabel = "LEVEL", defaultValue = "info",
            description = "error, warn, info (default), debug or trace: the lowest level written to stderr")
    String logLevel;

    @Option(names = "--set", paramLabel = "KEY=VALUE", description = "set any configuration key (repeatable)")
    List<String> sets = List.of();

    @Override
    public Integer call() {
        PrintWriter out = spec.commandLine().getOut();
        LogLevel level;
        try {
            level = LogLevel.parse(logLevel);
        } catch (IllegalArgumentException e) {
            throw new InputException(e.getMessage());
        }
        Logging.configure(level, System.err);
        Logger log = Logger.getLogger(ManagerDaemon.class.getName());
        ManagerConfig config;
        try {
            config = ManagerConfig.defaults().withEnvironment(System.getenv());
            if (configFile != null) config = config.withJson(configFile);
            config = config.withOverrides(overrides());
        } catch (ConfigException e) {
            throw new InputException(e.getMessage());
        }
        ManagerDaemon.Startup startup;
        try {
            startup = ManagerDaemon.start(config);
        } catch (ConfigException e) {
            throw new InputException(e.getMessage());
        } catch (IOException e) {
            throw new InputException("cannot start the Manager: " + e.getMessage());
        }
        ManagerDaemon daemon = switch (startup) {
            case ManagerDaemon.Startup.Locked l -> throw new InputException("another Manager holds " + l.lockFile()
                    + l.holderPid().map(pid -> " (pid " + pid + ")").orElse("") + "; not starting a second one on this store");
            case ManagerDaemon.Startup.Started s -> s.daemon();
        };
        CountDownLatch stop = new CountDownLatch(1);
        StopSignals.install(List.of("TERM", "INT"), name -> {
            log.info("SIG" + name + " received, draining");
            stop.countDown();
        });
        Runtime.getRuntime().addShutdownHook(new Thread(daemon::close, "orbitkv-shutdown"));
        try {
            daemon.announceReady(out);
        } catch (IOException e) {
            daemon.close();
            throw new InputException("cannot write the ready file: " + e.getMessage());
        }
        try {
            stop.await();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        daemon.close();
        return 0;
    }

    private Map<String, String> overrides() {
        Map<String, String> o = new LinkedHashMap<>();
        for (String s : sets) {
            int eq = s.indexOf('=');
            if (eq <= 0) throw new InputException("--set wants KEY=VALUE, got '" + s + "'");
            o.put(s.substring(0, eq).strip(), s.substring(eq + 1).strip());
        }
        put(o, "dramBytes", dramBytes);
        put(o, "dramDir", dramDir);
        put(o, "ssdDir", ssdDir);
        put(o, "ssdBytes", ssdBytes);
        put(o, "ssdPolicy", ssdPolicy);
        put(o, "ssdReadPath", ssdReadPath);
        put(o, "socket", socket);
        put(o, "httpPort", httpPort);
        put(o, "readyFile", readyFile);
        put(o, "etcd", etcd);
        put(o, "nodeId", nodeId);
        put(o, "clusterId", clusterId);
        put(o, "clusterListen", clusterListen);
        put(o, "clusterDataListen", clusterDataListen);
        put(o, "clusterTokenFile", clusterTokenFile);
        return o;
    }

    private static void put(Map<String, String> o, String key, String value) {
        if (value != null) o.put(key, value);
    }
}
