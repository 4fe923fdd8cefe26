/**
 * The value contracts every OrbitKV process shares: namespaces, state keys and hash chains,
 * recovery contracts, and the channel's wire format. JDK only, so an engine adapter can take it
 * without taking the Manager.
 *
 * <p>Every package is exported: each is a contract some other process reads or writes.
 * <ul>
 *   <li>{@code io.orbitkv.state}: namespaces, keys, recovery contracts and demands (the client,
 *       the engines, the router and the Manager all build them).</li>
 *   <li>{@code io.orbitkv.state.protocol}: the channel frames and their codecs, written by the
 *       Java client and read by the Manager's channel server.</li>
 *   <li>{@code io.orbitkv.state.unix}: descriptor passing (SCM_RIGHTS) over the channel's Unix
 *       socket, used by both ends of the channel.</li>
 * </ul>
 */
module io.orbitkv.state {
    exports io.orbitkv.state;
    exports io.orbitkv.state.protocol;
    exports io.orbitkv.state.unix;
}
