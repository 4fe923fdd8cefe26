package io.orbitkv.server.cluster;

import io.grpc.BindableService;

/**
 * A cluster service whose handlers never block (no I/O, no waiting on a lock held across I/O, no
 * bounded-queue put): {@link ClusterRpcServer} runs its calls on {@code directExecutor()}, i.e.
 * on the Netty event loop that read the request, instead of handing each one to a virtual
 * thread.
 *
 * <p>Design note: the hop to the handler executor costs one thread wake-up per call and per
 * flow-control callback (tens of µs on an idle host, up to a millisecond on a loaded 2-core one);
 * for the peer-read data path, which is only CAS/short-monitor work and async staging, that hop
 * is pure overhead. A handler that may block must not implement this: it would stall every call
 * on that event loop.
 */
public interface NonBlockingService extends BindableService {
}
