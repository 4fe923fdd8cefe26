package io.orbitkv.core.engine;

import io.orbitkv.state.Namespace;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * An engine is given its own namespace's arenas only (protocol §6.1): not one of the arenas
 * REGISTERED names to an engine of namespace A is B's, A's mapping holds zeros where B's pages
 * are, B reads its own pages, and no arena lies on a file system.
 */
class NamespaceArenasTest {

    static final Namespace NS_A = ManagerFixture.namespace("model-a");
    static final Namespace NS_B = ManagerFixture.namespace("model-b");

    @TempDir
    Path dir;

    ManagerFixture m;

    @BeforeEach
    void open() throws IOException {
        m = ManagerFixture.open(dir);
    }

    @AfterEach
    void close() {
        m.close();
    }

    @Test
    void anEngineOfANamespaceMapsOnlyItsOwnNamespacesPages() throws IOException {
        try (Client b = m.register("engine-b", 1, NS_B, ManagerFixture.FULL);
             Client a = m.register("engine-a", 1, NS_A, ManagerFixture.FULL)) {
            b.publish(3, 0, 0, 1, 2);
            Reply.QueryResult r = (Reply.QueryResult) b.send(Client.query(1, 0, CompletionTarget.HOST_READY,
                    3 * 16 + 1, 0, 3, new int[] {0}, 3));
            b.assertBytes(r, 3);
            List<Reply.Lease> leases = new ArrayList<>();
            for (Reply.GroupResult g : r.groups()) {
                for (Reply.Span s : g.spans()) {
                    for (Reply.PageResult p : s.pages()) {
                        if (p instanceof Reply.Resident(Reply.Lease lease)) leases.add(lease);
                    }
                }
            }
            assertThat(leases).hasSize(3);
            for (Reply.Lease lease : leases) {
                assertThat(a.read(lease)).as("B's page at %d, read through A's arenas", lease.offsetBytes())
                        .containsOnly((byte) 0);
            }
            List<Integer> fdsOfA = java.util.Arrays.stream(a.arenaFds).boxed().toList();
            List<Integer> fdsOfB = java.util.Arrays.stream(b.arenaFds).boxed().toList();
            assertThat(fdsOfA).as("A is given none of B's arenas").doesNotContainAnyElementsOf(fdsOfB);
            b.send(new Request.Release(1));
        }
        try (var files = Files.list(dir.resolve("dram"))) {
            assertThat(files.toList()).as("nothing on a file system").isEmpty();
        }
        m.assertNothingHeld();
    }
}
