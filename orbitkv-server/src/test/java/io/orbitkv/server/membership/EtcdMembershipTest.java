package io.orbitkv.server.membership;

import static org.assertj.core.api.Assertions.assertThat;

import io.micrometer.core.instrument.simple.SimpleMeterRegistry;
import io.orbitkv.core.catalog.Member;
import io.orbitkv.core.catalog.MembershipView;
import io.orbitkv.testkit.EtcdServer;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import io.orbitkv.testkit.ProcessTest;
import org.awaitility.Awaitility;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Membership against one real etcd process: convergence, stale incarnations, outage and recovery. */
@ProcessTest
class EtcdMembershipTest {

    @TempDir
    Path dir;

    final List<AutoCloseable> open = new ArrayList<>();

    @AfterEach
    void closeAll() throws Exception {
        for (AutoCloseable c : open.reversed()) c.close();
    }

    EtcdMembership join(EtcdServer etcd, String node, long incarnation) {
        var settings = new EtcdMembership.Settings(List.of(etcd.endpoint()), "test", new Member(node, "127.0.0.1:1" + node.length(), incarnation),
                Duration.ofSeconds(2), Duration.ofMillis(50), Duration.ofMillis(500));
        EtcdMembership m = EtcdMembership.start(settings, new SimpleMeterRegistry());
        open.add(m);
        return m;
    }

    static List<String> ids(MembershipView v) {
        return v.live().stream().map(m -> m.nodeId() + "#" + m.incarnation()).toList();
    }

    @Test
    void viewsConvergeAndALeaverDisappears() throws Exception {
        EtcdServer etcd = EtcdServer.start(dir);
        open.add(etcd);
        EtcdMembership a = join(etcd, "a", 1);
        EtcdMembership b = join(etcd, "b", 4);
        EtcdMembership c = join(etcd, "c", 2);
        for (EtcdMembership m : List.of(a, b, c)) {
            Awaitility.await().atMost(Duration.ofSeconds(15)).untilAsserted(() -> assertThat(m.view().live()).as(m.view().toString()).hasSize(3));
            Awaitility.await().atMost(Duration.ofSeconds(5)).until(() -> m.view().valid());
            assertThat(ids(m.view())).containsExactly("a#1", "b#4", "c#2");
        }
        assertThat(a.view().revision()).isPositive();
        c.close();
        Awaitility.await().atMost(Duration.ofSeconds(10)).until(() -> a.view().live().size() == 2);
        assertThat(ids(a.view())).containsExactly("a#1", "b#4");
        assertThat(a.view().valid()).isTrue();
    }

    @Test
    void aNodeRestartedWithAWipedStateDirectoryRejoinsAboveTheStoredIncarnationAndSaysWhy() throws Exception {
        EtcdServer etcd = EtcdServer.start(dir);
        open.add(etcd);
        Path state = dir.resolve("ssd-a");
        List<String> endpoints = List.of(etcd.endpoint());
        long first = EtcdMembership.startIncarnation(endpoints, "test", "a", state, Duration.ofMillis(500));
        EtcdMembership before = join(etcd, "a", first);
        Awaitility.await().atMost(Duration.ofSeconds(15)).until(() -> before.view().valid());
        before.close();
        first = EtcdMembership.startIncarnation(endpoints, "test", "a", state, Duration.ofMillis(500));
        EtcdMembership second = join(etcd, "a", first);
        Awaitility.await().atMost(Duration.ofSeconds(15)).until(() -> second.view().valid());
        second.close();
        assertThat(first).isEqualTo(2);

        try (var wiped = java.nio.file.Files.walk(state)) { // the SSD directory wiped: its epoch file is gone
            for (Path p : wiped.sorted(java.util.Comparator.reverseOrder()).toList()) java.nio.file.Files.delete(p);
        }
        java.util.logging.Logger log = java.util.logging.Logger.getLogger(EtcdMembership.class.getName());
        List<java.util.logging.LogRecord> records = new java.util.concurrent.CopyOnWriteArrayList<>();
        java.util.logging.Handler capture = new java.util.logging.Handler() {
            @Override public void publish(java.util.logging.LogRecord r) { records.add(r); }
            @Override public void flush() { }
            @Override public void close() { }
        };
        log.addHandler(capture);
        try {
            long restarted = EtcdMembership.startIncarnation(endpoints, "test", "a", state, Duration.ofMillis(500));
            assertThat(restarted).as("above the incarnation etcd holds").isEqualTo(3);
            EtcdMembership after = join(etcd, "a", restarted);
            Awaitility.await().atMost(Duration.ofSeconds(15)).untilAsserted(() -> assertThat(after.view().valid())
                    .as(after.view().toString()).isTrue());
            assertThat(ids(after.view())).containsExactly("a#3");
            assertThat(EpochFile.previous(state)).as("stored durably").isEqualTo(3);
        } finally {
            log.removeHandler(capture);
        }
        assertThat(records).anySatisfy(r -> {
            assertThat(r.getLevel()).isEqualTo(java.util.logging.Level.WARNING);
            assertThat(r.getMessage()).contains("etcd holds incarnation 2", "node a", "rejoining as incarnation 3");
        });
    }

    @Test
    void aStaleIncarnationIsRefusedAndTheOldProcessLearnsItIsSuperseded() throws Exception {
        EtcdServer etcd = EtcdServer.start(dir);
        open.add(etcd);
        EtcdMembership old = join(etcd, "a", 5);
        Awaitility.await().atMost(Duration.ofSeconds(15)).until(() -> old.view().valid());
        EtcdMembership fresh = join(etcd, "a", 6);
        Awaitility.await().atMost(Duration.ofSeconds(15)).until(() -> fresh.view().valid());
        assertThat(ids(fresh.view())).containsExactly("a#6");
        Awaitility.await().atMost(Duration.ofSeconds(15)).until(() -> !old.view().valid());
        assertThat(old.view().invalidReason()).contains("superseded");

        EtcdMembership older = join(etcd, "a", 4);
        Awaitility.await().atMost(Duration.ofSeconds(15)).until(() -> older.view().invalidReason().contains("superseded"));
        assertThat(ids(fresh.view())).as("the refused registration changed nothing").containsExactly("a#6");
    }

    @Test
    void etcdOutageInvalidatesTheViewAndItsReturnRestoresIt() throws Exception {
        EtcdServer etcd = EtcdServer.start(dir);
        open.add(etcd);
        EtcdMembership a = join(etcd, "a", 1);
        EtcdMembership b = join(etcd, "b", 1);
        Awaitility.await().atMost(Duration.ofSeconds(15)).until(() -> a.view().valid() && a.view().live().size() == 2);
        etcd.stop();
        Awaitility.await().atMost(Duration.ofSeconds(15)).until(() -> !a.view().valid() && !b.view().valid());
        assertThat(a.view().invalidReason()).isNotEmpty();
        etcd.restart();
        Awaitility.await().atMost(Duration.ofSeconds(30)).until(() -> a.view().valid() && b.view().valid()
                && a.view().live().size() == 2 && b.view().live().size() == 2);
    }

    @Test
    void withEtcdGoneAStopIsPromptAndLeavesTheLeaseToExpire() throws Exception {
        EtcdServer etcd = EtcdServer.start(dir);
        open.add(etcd);
        EtcdMembership a = join(etcd, "a", 1);
        EtcdMembership b = join(etcd, "b", 1);
        Awaitility.await().atMost(Duration.ofSeconds(15)).until(() -> a.view().valid() && b.view().valid());
        b.close();
        assertThat(b.leave()).as("etcd up: the lease is revoked").isEqualTo(EtcdMembership.Leave.LEASE_REVOKED);
        Awaitility.await().atMost(Duration.ofSeconds(5)).until(() -> a.view().live().size() == 1);
        etcd.stop();
        Awaitility.await().atMost(Duration.ofSeconds(15)).until(() -> !a.view().valid());
        long t0 = System.nanoTime();
        a.close();
        long stopMillis = (System.nanoTime() - t0) / 1_000_000;
        assertThat(stopMillis).as("stop with etcd gone, ms").isLessThan(500);
        assertThat(a.leave()).isEqualTo(EtcdMembership.Leave.LEASE_LEFT_TO_EXPIRE);
    }

    @Test
    void aReRegistrationWithTheSameIncarnationIsCountedInTheView() throws Exception {
        EtcdServer etcd = EtcdServer.start(dir);
        open.add(etcd);
        EtcdMembership a = join(etcd, "a", 1);
        Awaitility.await().atMost(Duration.ofSeconds(15)).until(() -> a.view().valid() && a.view().live().size() == 1);
        assertThat(a.view().registrations()).isEqualTo(1);
        long digest = a.view().digest();
        // the record vanishes as when the lease expired while the process lived (paused past the TTL)
        try (io.etcd.jetcd.Client client = io.etcd.jetcd.Client.builder().endpoints(etcd.endpoint()).build()) {
            client.getKVClient().delete(io.etcd.jetcd.ByteSequence.from(MembershipRecord.memberKey("test", "a"),
                    java.nio.charset.StandardCharsets.UTF_8)).get(5, java.util.concurrent.TimeUnit.SECONDS);
        }
        Awaitility.await().atMost(Duration.ofSeconds(15)).until(() -> a.view().valid() && a.view().registrations() == 2);
        assertThat(a.view().digest()).as("same member, same incarnation: only the registration count tells").isEqualTo(digest);
    }

    @Test
    void aBrokenWatchIsRepairedByReListingAndMissesNoChangeMadeMeanwhile() throws Exception {
        EtcdServer etcd = EtcdServer.start(dir);
        open.add(etcd);
        EtcdMembership a = join(etcd, "a", 1);
        EtcdMembership b = join(etcd, "b", 1);
        Awaitility.await().atMost(Duration.ofSeconds(15)).until(() -> a.view().valid() && a.view().live().size() == 2);
        long starts = a.watchStarts();
        a.dropWatch();
        b.close();
        EtcdMembership c = join(etcd, "c", 3);
        Awaitility.await().atMost(Duration.ofSeconds(15))
                .until(() -> a.view().valid() && ids(a.view()).equals(List.of("a#1", "c#3")));
        assertThat(a.watchStarts()).as("re-listed and re-watched").isGreaterThan(starts);
        assertThat(c.view().valid()).isTrue();
    }

    @Test
    void healthRuleNeedsRegistrationAFreshKeepAliveAndARunningWatch() {
        Duration ttl = Duration.ofSeconds(5);
        long now = 100_000_000_000L;
        var ok = new EtcdMembership.Evidence(true, false, now - ttl.toNanos() + 1, true);
        assertThat(EtcdMembership.invalidReason(ok, now, ttl)).isEmpty();
        assertThat(EtcdMembership.invalidReason(new EtcdMembership.Evidence(true, false, now - ttl.toNanos() - 1, true), now, ttl))
                .contains("lease not renewed for PT5S");
        assertThat(EtcdMembership.invalidReason(new EtcdMembership.Evidence(true, false, now, false), now, ttl))
                .contains("members watch broken, not yet repaired");
        assertThat(EtcdMembership.invalidReason(new EtcdMembership.Evidence(false, false, now, true), now, ttl)).contains("not registered");
        assertThat(EtcdMembership.invalidReason(new EtcdMembership.Evidence(true, true, now, true), now, ttl))
                .isEqualTo(Optional.of("superseded by a newer incarnation of this node"));
    }

    @Test
    void epochIncreasesAtEveryStartAndSurvivesInTheStateDir() throws Exception {
        assertThat(EpochFile.next(dir.resolve("state"))).isEqualTo(1);
        assertThat(EpochFile.next(dir.resolve("state"))).isEqualTo(2);
        assertThat(EpochFile.next(dir.resolve("state"))).isEqualTo(3);
        java.nio.file.Files.writeString(dir.resolve("state").resolve(EpochFile.NAME), "garbage");
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> EpochFile.next(dir.resolve("state")))
                .isInstanceOf(java.io.IOException.class).hasMessageContaining("corrupt");
    }
}
