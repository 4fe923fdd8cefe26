package io.orbitkv.core.engine;

import io.orbitkv.core.transfer.RegionDirectory;
import io.orbitkv.state.Namespace;
import io.orbitkv.state.protocol.CompletionEvent;
import io.orbitkv.state.protocol.CompletionTarget;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;
import io.orbitkv.testkit.Environment;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.List;
import java.util.stream.Stream;

import static org.assertj.core.api.Assertions.assertThat;

/**
 * REGISTER_REGION accepts only a regular file with one link, inside the region directory after
 * symbolic links are resolved, outside the Manager's own directories, owned by the client's uid
 * (protocol §5.2); every refusal is one code and one message, and a refused region is never
 * written. The fixture's region directory is the test directory, with {@code dram/} and
 * {@code ssd/} (the tiers' directories) excluded.
 */
class RegionAccessTest {

    static final Namespace NS = ManagerFixture.namespace("model-a");

    @TempDir
    Path dir;
    @TempDir
    Path outside;

    ManagerFixture m;

    @BeforeEach
    void open() throws IOException {
        m = ManagerFixture.open(dir);
    }

    @AfterEach
    void close() {
        m.close();
    }

    private static Reply register(Client c, Path file, long sizeBytes) {
        return c.send(new Request.RegisterRegion(file.toString(), sizeBytes, 4096, (int) (sizeBytes / 4096)));
    }

    private static void assertRefused(Reply reply, String what) {
        assertThat(reply).as(what).isEqualTo(new Reply.Error(ErrorCode.NOT_FOUND, RegionDirectory.REFUSED));
    }

    @Test
    void onlyTheClientsOwnRegularFileInsideTheRegionDirectoryIsARegion() throws Exception {
        Path outsideFile = Files.write(outside.resolve("victim"), new byte[8192]);
        Path inside = Files.write(dir.resolve("mine"), new byte[8192]);
        Path escape = Files.createSymbolicLink(dir.resolve("escape"), outsideFile);
        Path dotDot = Path.of(dir + "/../" + outside.getFileName() + "/victim");
        Path extent;
        try (Stream<Path> s = Files.list(dir.resolve("ssd"))) {
            extent = s.filter(p -> p.getFileName().toString().endsWith(".dat")).findFirst().orElseThrow();
        }
        Path hardLink = Files.createLink(dir.resolve("linked"), extent);
        Path linkToExtent = Files.createSymbolicLink(dir.resolve("to-extent"), extent);
        Path fifo = dir.resolve("fifo");
        assertThat(new ProcessBuilder("mkfifo", fifo.toString()).start().waitFor()).isZero();
        byte[] extentBefore = digest(extent);
        try (Client c = m.register("e1", 1, NS, ManagerFixture.FULL)) {
            assertRefused(register(c, outsideFile, 8192), "a file outside the region directory");
            assertRefused(register(c, escape, 8192), "a symbolic link from inside to outside");
            assertRefused(register(c, dotDot, 8192), "a .. escape");
            assertRefused(register(c, extent, 4096), "the Manager's own SSD extent file");
            assertRefused(register(c, hardLink, 4096), "a hard link to the extent file inside the directory");
            assertRefused(register(c, linkToExtent, 4096), "a symbolic link to the extent file");
            assertRefused(register(c, Path.of("/proc/" + ProcessHandle.current().pid() + "/fd/" + c.arenaFds[0]), 4096),
                    "the client's own DRAM arena, through the Manager's descriptor");
            assertRefused(register(c, dir, 4096), "the directory itself");
            assertRefused(register(c, fifo, 4096), "a FIFO");
            assertRefused(register(c, dir.resolve("absent"), 4096), "an absent file: the same answer as a present one");
            assertRefused(register(c, inside, 3 * 4096), "a file smaller than size_bytes: its size is not disclosed");
            assertRefused(c.send(new Request.RegisterRegion("relative/mine", 4096, 4096, 1)), "a relative path");
            assertThat(register(c, inside, 8192)).as("the client's own file").isInstanceOf(Reply.RegionRegistered.class);
        }
        assertThat(digest(extent)).as("the extent file is untouched").isEqualTo(extentBefore);
        m.assertNothingHeld();
    }

    @Test
    void aFileOfAnotherUidIsRefused() throws Exception {
        Environment.require(ManagerFixture.self().getName().equals("root"), "root (to chown a file to uid 65534)");
        Path theirs = Files.write(dir.resolve("theirs"), new byte[8192]);
        Files.setAttribute(theirs, "unix:uid", 65534);
        try (Client c = m.register("e1", 1, NS, ManagerFixture.FULL)) {
            assertRefused(register(c, theirs, 8192), "a file owned by uid 65534");
            Files.setAttribute(theirs, "unix:uid", 0);
            assertThat(register(c, theirs, 8192)).as("the same file, back to the client's uid")
                    .isInstanceOf(Reply.RegionRegistered.class);
        }
    }

    @Test
    void restoreIntoARefusedRegionWritesNothing() throws Exception {
        Path outsideFile = Files.write(outside.resolve("victim"), new byte[8 * ManagerFixture.SLOT]);
        Path escape = Files.createSymbolicLink(dir.resolve("escape"), outsideFile);
        try (Client c = m.register("e1", 1, NS, ManagerFixture.FULL)) {
            c.publish(3, 0, 0, 1, 2);
            List<Reply> refusals = new ArrayList<>();
            refusals.add(c.send(new Request.RegisterRegion(outsideFile.toString(), 8L * ManagerFixture.SLOT,
                    ManagerFixture.SLOT, 8)));
            refusals.add(c.send(new Request.RegisterRegion(escape.toString(), 8L * ManagerFixture.SLOT,
                    ManagerFixture.SLOT, 8)));
            for (Reply r : refusals) assertRefused(r, "REGISTER_REGION of a file outside");
            Reply.QueryResult r = (Reply.QueryResult) c.send(Client.query(1, 0, CompletionTarget.ENGINE_RESTORE,
                    3 * 16 + 1, 0, 3, new int[] {0}, 3));
            assertThat(r.boundaryTokens()).isEqualTo(48);
            for (int regionId = 0; regionId < 2; regionId++) {
                assertThat(Client.error(c.send(new Request.Restore(1, regionId, List.of(new Request.RestorePage(0, 0, 0))))))
                        .as("no region id was issued for a refused file").isEqualTo(ErrorCode.NOT_FOUND);
            }
            assertThat(c.sink.events).noneMatch(e -> e.event() == CompletionEvent.RESTORE_DONE);
            c.send(new Request.Release(1));
        }
        assertThat(Files.readAllBytes(outsideFile)).as("nothing was written outside").containsOnly((byte) 0);
        m.assertNothingHeld();
    }

    private static byte[] digest(Path file) throws Exception {
        return MessageDigest.getInstance("SHA-256").digest(Files.readAllBytes(file));
    }
}
