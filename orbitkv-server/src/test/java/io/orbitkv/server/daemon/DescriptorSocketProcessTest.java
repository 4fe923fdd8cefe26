package io.orbitkv.server.daemon;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;
import static org.awaitility.Awaitility.await;

import io.orbitkv.client.DescriptorSocket;
import io.orbitkv.client.OrbitKvClient;
import io.orbitkv.client.OrbitKvException;
import io.orbitkv.client.PageToPublish;
import io.orbitkv.client.PublishOutcome;
import io.orbitkv.client.Region;
import io.orbitkv.client.Registration;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.DescriptorTicket;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.Hashes;
import io.orbitkv.state.protocol.KeyForm;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import io.orbitkv.testkit.Environment;
import io.orbitkv.testkit.ManagerProcess;
import io.orbitkv.testkit.ProcessTest;
import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/**
 * The descriptor socket of a real Manager process (protocol §6.11): an engine receives exactly its
 * arenas and reads and writes pages through them; replayed and guessed tickets are refused with
 * TICKET_REFUSED while the Manager keeps serving; a region handed over as a descriptor is restored
 * into; the ticket table is empty once clients have fetched or died; and a process of the
 * Manager's own uid cannot open the Manager's descriptors by number.
 */
@ProcessTest
class DescriptorSocketProcessTest {

    @TempDir
    Path tmp;

    private static List<PageToPublish> pages(long prompt, int count) {
        List<PageToPublish> out = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            out.add(PageToPublish.ofBlockHash(0, Engine.hash(prompt, i), MemorySegment.ofArray(Engine.image(prompt, i))));
        }
        return out;
    }

    private static Request.Query query(long op, long prompt, int count) {
        List<byte[]> hashes = new ArrayList<>();
        for (int i = 0; i < count; i++) hashes.add(Engine.hash(prompt, i));
        return new Request.Query(op, 1, CompletionTarget.ENGINE_RESTORE, (long) count * Engine.PAGE_TOKENS + 1, 0,
                List.of(new Request.QueryGroup(0, KeyForm.BLOCK_HASH, Hashes.of(hashes))));
    }

    @Test
    void ticketsRedeemOnceRegionsComeAsDescriptorsAndTheTablesEmpty() throws Exception {
        Path dir = tmp.resolve("m");
        try (ManagerProcess m = Managers.start(dir)) {
            Path socket = ManagerProcess.socket(dir);
            try (OrbitKvClient client = OrbitKvClient.connect(socket, Duration.ofSeconds(20))) {
                Registration reg = client.register("engine-fd", 1, Engine.NS, Engine.FULL);
                assertThat(client.publish(pages(5, 3))).containsOnly(PublishOutcome.SEALED);

                // a replayed ticket (the client redeemed it in register) and a guessed one
                String descriptors = socket.toAbsolutePath() + ".fd";
                for (DescriptorTicket t : List.of(registeredTicket(dir), DescriptorTicket.random())) {
                    assertThatThrownBy(() -> DescriptorSocket.fetchArenas(descriptors, t, reg.arenas().size(),
                            Duration.ofSeconds(5)))
                            .isInstanceOfSatisfying(OrbitKvException.class,
                                    e -> assertThat(e.code()).isEqualTo(ErrorCode.TICKET_REFUSED));
                }
                assertThat(m.metric("orbitkv_manager_descriptor_refusals_total{reason=\"unknown\""))
                        .isGreaterThanOrEqualTo(2);

                // the Manager goes on serving: a region passed as a memfd is restored into
                Reply.QueryResult hit = client.awaitSettled(client.query(query(1, 5, 3)));
                assertThat(hit.hit()).isTrue();
                Region region = client.registerPrivateRegion(Engine.PAGE_BYTES, 3);
                Reply.Completion done = client.restore(1, region, OrbitKvClient.residentPages(hit, 0));
                assertThat(done.outcome()).isEqualTo(Reply.Settled.OK);
                for (int i = 0; i < 3; i++) {
                    assertThat(region.page(i).mismatch(MemorySegment.ofArray(Engine.image(5, i)))).as("page %d", i)
                            .isEqualTo(-1);
                }
                client.release(1);
                assertThat(m.metric("orbitkv_manager_descriptor_regions")).as("the handed-over region was claimed")
                        .isZero();
            }
            // an engine that registers and dies before fetching leaves its ticket only until its connection closes
            try (Engine raw = new Engine(socket)) {
                assertThat(raw.raw.call(new Request.Register("engine-dies", 1, Engine.NS, Engine.FULL)))
                        .isInstanceOf(Reply.Registered.class);
                assertThat(m.metric("orbitkv_manager_descriptor_tickets")).isEqualTo(1);
            }
            await().atMost(Duration.ofSeconds(10)).until(() -> m.metric("orbitkv_manager_descriptor_tickets") == 0);
            assertThat(m.metric("orbitkv_manager_descriptor_regions")).isZero();
        }
    }

    /** A ticket that was already redeemed: REGISTER on a raw connection, fetch once, keep the ticket. */
    private static DescriptorTicket registeredTicket(Path dir) throws IOException {
        try (Engine e = new Engine(ManagerProcess.socket(dir))) {
            Reply.Registered r = e.register("engine-replay", 1);
            return r.ticket();
        }
    }

    @Test
    void aProcessOfTheManagersUidCannotOpenItsDescriptorsByNumber() throws Exception {
        Environment.require(Files.isExecutable(Path.of("/usr/bin/setpriv")), "setpriv (util-linux) to drop CAP_SYS_PTRACE");
        // Manager and prober both run without CAP_SYS_PTRACE, as a process of an ordinary user does: then a
        // process of the same uid (root here) may open /proc/<pid>/fd/N only when the target is dumpable
        // (and its capabilities are no wider than the prober's): the undumpable Manager refuses, the
        // ORBITKV_DUMPABLE=1 one does not.
        assertThat(openArenaByNumber(tmp.resolve("undumpable"), Map.of())).as("the Manager as it runs").isNotZero();
        assertThat(openArenaByNumber(tmp.resolve("dumpable"), Map.of("ORBITKV_DUMPABLE", "1")))
                .as("the control: a dumpable Manager lets the same uid in, so the check can fail").isZero();
    }

    /** The Manager JVM's pid: the ready line's ({@code setpriv} execs it, so it is also the process's). */
    private static long managerPid(ManagerProcess m) throws IOException {
        java.util.regex.Matcher pid = java.util.regex.Pattern.compile("pid=(\\d+)").matcher(Files.readString(m.dir().resolve("ready")));
        assertThat(pid.find()).as("pid= in the ready line").isTrue();
        return Long.parseLong(pid.group(1));
    }

    /** Starts a Manager, has one engine register (so a namespace's arenas exist), and tries to read one arena by number. */
    private static int openArenaByNumber(Path dir, Map<String, String> env) throws Exception {
        List<String> noPtrace = List.of("/usr/bin/setpriv", "--bounding-set=-sys_ptrace", "--");
        try (ManagerProcess m = Managers.start(dir, noPtrace, env); Engine e = new Engine(ManagerProcess.socket(dir))) {
            e.register("engine-a", 1);
            long pid = managerPid(m);
            String arena = null;
            try (var fds = Files.list(Path.of("/proc/" + pid + "/fd"))) {
                for (Path fd : fds.toList()) {
                    String target;
                    try {
                        target = Files.readSymbolicLink(fd).toString();
                    } catch (java.nio.file.NoSuchFileException closedMeanwhile) {
                        continue; // a descriptor the Manager closed between the listing and this read
                    }
                    if (target.startsWith("/memfd:")) {
                        arena = fd.toString();
                        break;
                    }
                }
            }
            assertThat(arena).as("the Manager holds memfd arenas").isNotNull();
            Process p = new ProcessBuilder("/usr/bin/setpriv", "--bounding-set=-sys_ptrace", "--", "head", "-c", "1", arena)
                    .redirectOutput(ProcessBuilder.Redirect.DISCARD).redirectErrorStream(false).start();
            String err = new String(p.getErrorStream().readAllBytes());
            int exit = p.waitFor();
            if (exit != 0) assertThat(err).contains("Permission denied");
            return exit;
        }
    }
}
