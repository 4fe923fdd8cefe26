/**
 * The Manager's logic without sockets. This declaration is the core's face: what the server,
 * the reliability campaign and the benchmarks may use. Modules that run on the class path, where
 * the JVM does not enforce it, are held to it by {@code ModuleFaceTest}.
 *
 * <p>Exported, each with the reason another module needs it:
 * <ul>
 *   <li>{@code engine}: the session entry points ({@code ManagerCore}, {@code ChannelSession},
 *       {@code EventSink}) the channel server drives, and {@code ManagerBounds}, a config.</li>
 *   <li>{@code query}: the query ports the server plugs peers into ({@code RemotePages}).</li>
 *   <li>{@code peer}: the peer SPI ({@code PayloadTransport}, {@code PayloadSink},
 *       {@code PeerReader}) the gRPC and bulk transports implement, and the values they carry.</li>
 *   <li>{@code catalog}: the catalog's transport port and wire values, which the server's gRPC
 *       catalog service encodes.</li>
 *   <li>{@code namespace}, {@code transfer}: the namespace table and the region directory the
 *       daemon builds and hands to the core.</li>
 *   <li>{@code storage}, {@code storage.dram}, {@code storage.ssd}, {@code storage.publish}: the
 *       tier configs the server reads from its config file, and the stores the daemon opens.</li>
 *   <li>{@code storage.residency}: residency events, which the catalog and the KV-event publisher
 *       carry off the host.</li>
 *   <li>{@code cost}: the cost configs and the status the daemon reports.</li>
 *   <li>{@code fd}: owner-only file creation and POSIX calls the server's sockets and lock files
 *       share with the core's arenas.</li>
 *   <li>{@code log}: {@code RateLimitedLog} and {@code UnexpectedErrors}, the one counted boundary
 *       for bugs, used by every layer of the Manager.</li>
 * </ul>
 *
 * <p>Not exported: {@code storage.ssd.uring} (the io_uring ring and its libc bindings; others
 * choose the route through {@code storage.ssd.ReadPath}).
 */
module io.orbitkv.core {
    requires transitive io.orbitkv.state;
    // meter registries appear in the exported constructors
    requires transitive micrometer.core;
    requires com.github.benmanes.caffeine;
    // ExtentFiles looks up com.sun.nio.file.ExtendedOpenOption.DIRECT by name
    requires jdk.unsupported;

    exports io.orbitkv.core.catalog;
    exports io.orbitkv.core.cost;
    exports io.orbitkv.core.engine;
    exports io.orbitkv.core.fd;
    exports io.orbitkv.core.log;
    exports io.orbitkv.core.namespace;
    exports io.orbitkv.core.peer;
    exports io.orbitkv.core.query;
    exports io.orbitkv.core.storage;
    exports io.orbitkv.core.storage.dram;
    exports io.orbitkv.core.storage.publish;
    exports io.orbitkv.core.storage.residency;
    exports io.orbitkv.core.storage.ssd;
    exports io.orbitkv.core.transfer;
}
