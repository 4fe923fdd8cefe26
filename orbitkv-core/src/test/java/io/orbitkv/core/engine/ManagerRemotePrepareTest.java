package io.orbitkv.core.engine;

import io.orbitkv.state.Namespace;
import io.orbitkv.state.NamespaceDigest;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.QueryStatus;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.TimeUnit;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/** PREPAREs from the cluster plane: held for the namespace, consumed by any connection's QUERY, bounded, expiring. */
class ManagerRemotePrepareTest {

    static final Namespace NS = ManagerFixture.namespace("model-a");
    static final Namespace OTHER = ManagerFixture.namespace("model-b");

    @TempDir
    Path dir;
    ManagerFixture m;

    @AfterEach
    void close() {
        if (m != null) m.close();
    }

    void onSsdOnly(Client c, long prompt, long... pages) {
        m.onSsdOnly(c, NS, prompt, pages);
    }

    RemotePrepares.Answer prepare(Namespace ns, long prompt, int pages, int firstUseMillis) {
        Request.Query demand = Client.query(1, 0, CompletionTarget.HOST_READY,
                (long) pages * ManagerFixture.PAGE_TOKENS + 1, 0, prompt, new int[] {0}, pages);
        return m.core.remotePrepares().prepare(NamespaceDigest.ofBytes(ns.digest()), firstUseMillis, 0,
                demand.promptTokens(), demand.groups()).join();
    }

    double answered(String outcome) {
        return m.registry.get("orbitkv.manager.remote.prepares").tag("outcome", outcome).counter().count();
    }

    @Test
    void aRemotePrepareStagesPagesThatAQueryOfAnotherConnectionFindsResident() throws IOException {
        m = ManagerFixture.open(dir);
        try (Client publisher = m.register("e1", 1, NS, ManagerFixture.FULL)) {
            onSsdOnly(publisher, 7, 0, 1, 2);
            RemotePrepares.Answer a = prepare(NS, 7, 3, 0);
            assertThat(a.outcome()).isEqualTo(RemotePrepares.Outcome.ACCEPTED);
            assertThat(a.pagesToStage()).isEqualTo(3);
            assertThat(m.core.remotePrepares().live()).isEqualTo(1);
            await().atMost(RecordingSink.WAIT).until(() -> m.core.speculation().heldPages() == 3);
            assertThat(m.core.status().leases()).as("a remote prepare takes no lease table entry").isZero();
            try (Client reader = m.register("e2", 1, NS, ManagerFixture.FULL)) {
                Reply.QueryResult r = reader.queryFull(1, 7, 3);
                assertThat(r.status()).as("served from DRAM, no staging").isEqualTo(QueryStatus.FINAL);
                assertThat(r.boundaryTokens()).isEqualTo(48);
                reader.assertBytes(r, 7);
                reader.send(new Request.Release(1));
            }
            await().atMost(RecordingSink.WAIT).until(() -> m.core.remotePrepares().live() == 0);
            assertThat(m.core.preparation().namespaces()).anySatisfy(n -> assertThat(n.consumed()).isEqualTo(3));
        }
        m.assertNothingHeld();
        assertThat(answered("accepted")).isEqualTo(1);
        assertThat(m.registry.get("orbitkv.manager.remote.prepares.live").gauge().value()).isZero();
    }

    @Test
    void aNamespaceWithoutARegisteredEngineIsNotRegisteredAndTouchesNothing() throws IOException {
        m = ManagerFixture.open(dir);
        try (Client c = m.register("e1", 1, NS, ManagerFixture.FULL)) {
            onSsdOnly(c, 3, 0, 1);
            assertThat(prepare(OTHER, 3, 2, 0).outcome()).isEqualTo(RemotePrepares.Outcome.NOT_REGISTERED);
        }
        await().atMost(RecordingSink.WAIT).until(() -> m.core.status().sessions() == 0);
        assertThat(prepare(NS, 3, 2, 0).outcome()).as("its engine disconnected")
                .isEqualTo(RemotePrepares.Outcome.NOT_REGISTERED);
        assertThat(answered("not_registered")).isEqualTo(2);
        assertThat(m.core.speculation().heldPages()).isZero();
        m.assertNothingHeld();
    }

    @Test
    void unconsumedPagesExpireAtFirstUsePlusGraceAndEveryBudgetReturnsToZero() throws IOException {
        m = ManagerFixture.open(dir);
        try (Client c = m.register("e1", 1, NS, ManagerFixture.FULL)) {
            onSsdOnly(c, 5, 0, 1);
            assertThat(prepare(NS, 5, 2, 0).outcome()).isEqualTo(RemotePrepares.Outcome.ACCEPTED);
            await().atMost(RecordingSink.WAIT).until(() -> m.core.speculation().heldPages() == 2);
            assertThat(m.core.speculation().held().used()).isPositive();
            m.advance(m.core.speculation().bounds().graceNanos() + TimeUnit.MILLISECONDS.toNanos(50));
            await().atMost(RecordingSink.WAIT).untilAsserted(() -> {
                m.advance(TimeUnit.MILLISECONDS.toNanos(10));
                assertThat(m.core.remotePrepares().live()).isZero();
            });
            m.assertNothingHeld();
            assertThat(m.core.preparation().namespaces()).anySatisfy(n -> {
                assertThat(n.expired()).isEqualTo(2);
                assertThat(n.consumed()).isZero();
            });
        }
    }

    @Test
    void aNamespaceHasAtMostMaxOperationsPerConnectionRemotePreparesLive() throws IOException {
        m = new ManagerFixture(dir, 64, io.orbitkv.state.protocol.ProtocolLimits.DEFAULTS.withConnectionBudgets(8, 1, 64, 8),
                ManagerBounds.DEFAULTS);
        try (Client c = m.register("e1", 1, NS, ManagerFixture.FULL)) {
            onSsdOnly(c, 3, 0, 1);
            // first use a minute away: the prepare waits, holding its budget, and stays live
            assertThat(prepare(NS, 3, 2, 60_000).outcome()).isEqualTo(RemotePrepares.Outcome.ACCEPTED);
            assertThat(prepare(NS, 3, 2, 60_000).outcome()).isEqualTo(RemotePrepares.Outcome.BUSY);
            assertThat(answered("busy")).isEqualTo(1);
            assertThat(m.core.remotePrepares().live()).isEqualTo(1);
            assertThat(m.core.speculation().held().used()).as("the waiting prepare's bytes are taken").isPositive();
        }
        m.core.close();
        assertThat(m.core.remotePrepares().live()).as("the Manager's close lets go of it").isZero();
        assertThat(m.core.speculation().held().used()).isZero();
        assertThat(m.core.speculation().inFlight().used()).isZero();
    }

    @Test
    void aDemandThatFailsTheQueryChecksIsInvalid() throws IOException {
        m = ManagerFixture.open(dir);
        try (Client c = m.register("e1", 1, NS, ManagerFixture.FULL)) {
            RemotePrepares.Answer a = m.core.remotePrepares().prepare(NamespaceDigest.ofBytes(NS.digest()), 0, 0, 5,
                    List.of(new Request.QueryGroup(9, io.orbitkv.state.protocol.KeyForm.BLOCK_HASH,
                            io.orbitkv.state.protocol.Hashes.of(List.of(new byte[8]))))).join();
            assertThat(a.outcome()).isEqualTo(RemotePrepares.Outcome.INVALID);
            assertThat(a.detail()).isNotEmpty();
            c.send(new Request.Stats());
        }
        m.assertNothingHeld();
    }
}
