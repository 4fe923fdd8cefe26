package io.orbitkv.bench.serve;
import io.orbitkv.engine.ManagerLauncher;
import io.orbitkv.testkit.EtcdServer;
import io.orbitkv.testkit.ProcessTest;
import io.orbitkv.testmodel.TinyLlamaSpec;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.nio.file.Path;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * The routed loop end to end: three llama.cpp engine processes on the CI model, three clustered
 * Managers publishing KV events, etcd, and a router daemon following the three streams. Each
 * session's first turn is served on its own engine (session s on engine s); once the router's
 * index holds those pages, each follow-up turn is routed by {@code joint} with every worker idle,
 * so only the prefix can tell the workers apart: it must go to the engine that served the first
 * turn (a load-only choice would send all three to worker 0, the tie-break), restore its prefix
 * there, and produce logits bit-identical to the cold engines'. At the end nothing is held: no
 * Manager lease or reservation, no charge left in the router.
 */
@ProcessTest
class RoutedServeTest {

    @TempDir
    Path tmp;

    @Test
    void followUpTurnsGoWhereTheirPrefixIsAndRestoreBitIdenticalToCold() throws Exception {
        EtcdServer.requireInstalled();
        ServeWorkload.Shape shape = new ServeWorkload.Shape("routed-test", 3, 3, 2, 64, 16, 8, 2, 0, 0, 7);
        List<ServeRequest> requests = ServeWorkload.synthetic(shape);
        assertThat(requests).hasSize(6);
        RoutedServeBench.Engines e = RoutedServeBench.engines(TinyLlamaSpec.ci(), tmp, 160, 1);
        Path token = ManagerLauncher.Cluster.writeToken(tmp.resolve("cluster.token"));
        try (EtcdServer etcd = EtcdServer.start(tmp.resolve("etcd"));
             EnginePool pool = EnginePool.start(3, List.of("-Xmx128m", "-XX:+UseSerialGC"), e.args(), tmp.resolve("logs"))) {
            pool.arm(i -> "COLD");
            Map<Integer, Long> cold = new HashMap<>();
            for (EnginePool.Result r : pool.run(requests, 3, 0)) cold.put(r.request().id(), r.logitsHash());

            try (RoutedCluster cluster = RoutedCluster.start(tmp.resolve("cluster"), etcd.endpoint(), token, "t", 3,
                    e.pageBytes(), RoutedServeBench.PAGE_TOKENS, e.namespace().digest(), "joint", 20_000)) {
                pool.arm(i -> "ORBITKV " + cluster.socket(i) + " " + RoutedCluster.instance(i) + " 1");
                List<ServeRequest> first = requests.subList(0, 3);
                List<ServeRequest> second = requests.subList(3, 6);
                // the first turns: session s on engine s, whatever the router would say
                EnginePool.Dispatcher bySession = EnginePool.byAffinity(3);
                long firstPages = 0;
                for (ServeRequest r : first) {
                    EnginePool.Result res = pool.run(List.of(r), 1, 0, bySession).getFirst();
                    assertThat(res.engine()).isEqualTo((int) r.affinity());
                    assertThat(res.logitsHash()).as("first turn %d against cold", r.id()).isEqualTo(cold.get(r.id()));
                    firstPages += (r.prompt().length - 1) / RoutedServeBench.PAGE_TOKENS;
                }
                long deadline = System.nanoTime() + 30_000_000_000L;
                while (cluster.routerStatus().path("index_blocks").asLong() < firstPages) {
                    assertThat(System.nanoTime()).as("the router indexed the first turns' %d pages", firstPages).isLessThan(deadline);
                    Thread.sleep(20);
                }

                Map<Integer, RoutedCluster.Route> routes = new ConcurrentHashMap<>();
                EnginePool.Dispatcher routed = cluster.dispatcher(routes);
                for (ServeRequest r : second) {
                    EnginePool.Result res = pool.run(List.of(r), 1, 0, routed).getFirst();
                    RoutedCluster.Route route = routes.get(r.id());
                    assertThat(route.fallback()).isFalse();
                    assertThat(route.worker()).as("follow-up of session %d", r.affinity()).isEqualTo((int) r.affinity());
                    assertThat(route.localPrefixBlocks()).isPositive();
                    assertThat(res.engine()).isEqualTo(route.worker());
                    assertThat(res.restoredTokens()).as("restored on the engine that holds the prefix").isPositive();
                    assertThat(res.logitsHash()).as("follow-up %d against cold", r.id()).isEqualTo(cold.get(r.id()));
                }
                assertThat(cluster.hitTokens()[0]).as("DRAM hit tokens").isPositive();
                pool.arm(i -> "COLD");
                assertThat(cluster.awaitDrained()).as("leases and reservations held").isZero();
                assertThat(cluster.routerOutstandingTokens()).as("tokens the router still charges").isZero();
            }
        }
    }
}
