package io.orbitkv.core.engine;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.cost.CostConfig;
import io.orbitkv.core.cost.CostKey;
import io.orbitkv.core.cost.CostObserver;
import io.orbitkv.core.cost.Lookup;
import io.orbitkv.core.cost.SampleKind;
import io.orbitkv.core.cost.Terminal;
import io.orbitkv.core.transfer.RestoreObservations;
import io.orbitkv.state.protocol.CompletionEvent;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.ProtocolLimits;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/** A finished RESTORE trains one ENGINE_RESTORE complete-route sample (and its operation sample). */
class RestoreObservationTest {

    @TempDir
    Path dir;

    @Test
    void eachFinishedRestoreIsOneCompleteRouteSampleOfItsBytesAndPages() throws IOException {
        CostObserver cost = CostObserver.create(CostConfig.defaults(true), new SimpleMeterRegistry(), System::nanoTime);
        // in the fixture's directory, its region directory
        Path regionFile = Files.createDirectories(dir.resolve("m")).resolve("region.bin");
        int pageBytes = 24 * 1024;
        try (FileChannel ch = FileChannel.open(regionFile, StandardOpenOption.CREATE, StandardOpenOption.READ,
                StandardOpenOption.WRITE)) {
            ch.write(java.nio.ByteBuffer.allocate(1), 8L * pageBytes - 1);
        }
        try (ManagerFixture m = new ManagerFixture(dir.resolve("m"), 64, ProtocolLimits.DEFAULTS,
                ManagerBounds.DEFAULTS, io.orbitkv.core.query.RemotePages.NONE, cost);
             Client c = m.register("e1", 1, ManagerCoreTest.NS, ManagerFixture.FULL)) {
            c.publish(3, 0, 0, 1, 2);
            int region = ((Reply.RegionRegistered) c.send(new Request.RegisterRegion(regionFile.toString(),
                    8L * pageBytes, pageBytes, 8))).regionId();
            CostKey key = new RestoreObservations(cost, m.core.copier().costResource())
                    .key(3L * ManagerFixture.PAGE_BYTES, 3);
            for (int op = 1; op <= 4; op++) {
                c.send(Client.query(op, 0, CompletionTarget.ENGINE_RESTORE, 3 * 16 + 1, 0, 3, new int[] {0}, 3));
                assertThat(c.send(new Request.Restore(op, region, List.of(new Request.RestorePage(0, 0, 0),
                        new Request.RestorePage(0, 1, 1), new Request.RestorePage(0, 2, 2)))))
                        .isEqualTo(new Reply.RestoreAccepted(op, 3));
                assertThat(c.sink.await(op, CompletionEvent.RESTORE_DONE).outcome()).isEqualTo(Reply.Settled.OK);
                c.send(new Request.Release(op));
                if (op < 4) assertThat(cost.estimate(key)).isEqualTo(new Lookup.Cold(op));
            }
            assertThat(cost.estimate(key)).isInstanceOf(Lookup.Warm.class);
            assertThat(cost.estimate(key.withKind(SampleKind.OPERATION))).isInstanceOf(Lookup.Warm.class);
            assertThat(cost.status().censored()).containsEntry(Terminal.FAILED, 0L).containsEntry(Terminal.CANCELLED, 0L);
        }
    }
}
