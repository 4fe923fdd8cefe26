package io.orbitkv.core.storage.ssd.uring;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import java.io.IOException;
import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

/** The raw ring against the real kernel: struct sizes, reads, the in-flight bound, completion ownership. */
class UringReaderTest {

    @TempDir
    Path dir;

    private static UringReader openReader(int depth) {
        return switch (UringReader.open(depth, "test")) {
            case UringReader.Open.Opened(UringReader r) -> r;
            case UringReader.Open.Unavailable(String reason) -> throw new AssertionError("io_uring unavailable: " + reason);
        };
    }

    @Test
    void layoutsMatchTheKernelHeader() {
        // sizeof() printed by a C probe compiled against /usr/include/linux/io_uring.h
        assertThat(UringLayout.SQE.byteSize()).isEqualTo(64);
        assertThat(UringLayout.CQE.byteSize()).isEqualTo(16);
        assertThat(UringLayout.PARAMS.byteSize()).isEqualTo(120);
        assertThat(UringLayout.SQRING_OFFSETS.byteSize()).isEqualTo(40);
        assertThat(UringLayout.CQRING_OFFSETS.byteSize()).isEqualTo(40);
        assertThat(UringLayout.SQE_OFF).isEqualTo(8);
        assertThat(UringLayout.SQE_ADDR).isEqualTo(16);
        assertThat(UringLayout.SQE_LEN).isEqualTo(24);
        assertThat(UringLayout.SQE_USER_DATA).isEqualTo(32);
        assertThat(UringLayout.PARAMS_SQ_OFF).isEqualTo(40);
        assertThat(UringLayout.PARAMS_CQ_OFF).isEqualTo(80);
    }

    @Test
    void aRingTheKernelRefusesIsAValueWithTheErrno() {
        // io_uring_setup(0, ...) is EINVAL on every kernel: a real refusal, not a simulated one
        assertThat(IoUring.setup(0)).isEqualTo(new IoUring.Setup.Failed("io_uring_setup failed: errno 22"));
        assertThat(IoUring.setup(4)).isInstanceOfSatisfying(IoUring.Setup.Ready.class, r -> {
            assertThat(r.ring().sqEntries()).isEqualTo(4);
            assertThat(r.ring().cqEntries()).isEqualTo(8);
            r.ring().close();
        });
    }

    @Test
    void readsFileBytesAtTheGivenOffsets() throws Exception {
        byte[] data = new byte[3 * 4096];
        for (int i = 0; i < data.length; i++) data[i] = (byte) (i * 31 + 7);
        Path file = dir.resolve("f");
        Files.write(file, data);
        int fd = Libc.openReadOnly(file.toString(), false);
        assertThat(fd).isPositive();
        try (UringReader reader = openReader(4); Arena arena = Arena.ofShared()) {
            MemorySegment a = arena.allocate(4096, 4096);
            MemorySegment b = arena.allocate(8192, 4096);
            AtomicReference<int[]> results = new AtomicReference<>();
            CountDownLatch done = new CountDownLatch(1);
            UringReader.Submit s = reader.submit(
                    List.of(new UringReader.Read(fd, 8192, a), new UringReader.Read(fd, 0, b)),
                    (r, sub, comp) -> {
                        results.set(r.clone());
                        done.countDown();
                    });
            assertThat(s).isInstanceOf(UringReader.Submit.Submitted.class);
            assertThat(done.await(10, TimeUnit.SECONDS)).isTrue();
            assertThat(results.get()).containsExactly(4096, 8192);
            assertThat(a.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE))
                    .isEqualTo(java.util.Arrays.copyOfRange(data, 8192, 12288));
            assertThat(b.toArray(java.lang.foreign.ValueLayout.JAVA_BYTE))
                    .isEqualTo(java.util.Arrays.copyOfRange(data, 0, 8192));
        } finally {
            Libc.close(fd);
        }
    }

    @Test
    void completionsThatIssueTheirNextReadKeepAClosedLoopGoing() throws Exception {
        byte[] data = new byte[64 * 1024];
        for (int i = 0; i < data.length; i++) data[i] = (byte) (i / 4096);
        Path file = dir.resolve("loop");
        Files.write(file, data);
        int fd = Libc.openReadOnly(file.toString(), false);
        int lanes = 4;
        int readsPerLane = 200;
        try (UringReader reader = openReader(lanes); Arena arena = Arena.ofShared()) {
            CountDownLatch done = new CountDownLatch(lanes);
            java.util.concurrent.atomic.AtomicInteger wrong = new java.util.concurrent.atomic.AtomicInteger();
            for (int lane = 0; lane < lanes; lane++) {
                MemorySegment buf = arena.allocate(4096, 4096);
                new Object() {
                    int issued;

                    void issue() {
                        int block = (issued * 7 + 3) % 16;
                        UringReader.Submit s = reader.submit(List.of(new UringReader.Read(fd, block * 4096L, buf)),
                                (r, sub, comp) -> {
                                    if (r[0] != 4096 || buf.get(java.lang.foreign.ValueLayout.JAVA_BYTE, 17) != block) {
                                        wrong.incrementAndGet();
                                    }
                                    if (++issued < readsPerLane) issue(); else done.countDown();
                                });
                        if (!(s instanceof UringReader.Submit.Submitted)) throw new AssertionError(s);
                    }
                }.issue();
            }
            assertThat(done.await(30, TimeUnit.SECONDS)).isTrue();
            assertThat(wrong.get()).isZero();
            await().atMost(10, TimeUnit.SECONDS).until(() -> reader.inflight() == 0); // the last completions return
            assertThat(reader.completedBatches()).isEqualTo((long) lanes * readsPerLane);
            assertThat(reader.errors()).isZero();
        } finally {
            Libc.close(fd);
        }
    }

    @Test
    void aBatchHoldsItsSlotUntilItsCompletionArrivesAndTheBoundAnswersBusy() throws IOException {
        int[] pipe = Libc.pipe();
        try (UringReader reader = openReader(1); Arena arena = Arena.ofShared()) {
            MemorySegment buf = arena.allocate(16);
            AtomicReference<int[]> results = new AtomicReference<>();
            // A read from an empty pipe stays in flight until someone writes: a caller that gives
            // up on it here cannot take the buffer back; only the completion frees the slot.
            assertThat(reader.submit(List.of(new UringReader.Read(pipe[0], 0, buf)), (r, s, c) -> results.set(r.clone())))
                    .isInstanceOf(UringReader.Submit.Submitted.class);
            assertThat(reader.inflight()).isEqualTo(1);
            assertThat(reader.submit(List.of(new UringReader.Read(pipe[0], 0, buf)), (r, s, c) -> {}))
                    .isInstanceOf(UringReader.Submit.Busy.class);
            assertThat(results.get()).isNull();
            assertThat(reader.inflight()).isEqualTo(1);

            MemorySegment msg = arena.allocate(5);
            msg.copyFrom(MemorySegment.ofArray("hello".getBytes()));
            assertThat(Libc.write(pipe[1], msg)).isEqualTo(5);
            await().atMost(10, TimeUnit.SECONDS).until(() -> reader.inflight() == 0);
            assertThat(results.get()).containsExactly(5);
            assertThat(buf.asSlice(0, 5).toArray(java.lang.foreign.ValueLayout.JAVA_BYTE)).isEqualTo("hello".getBytes());
            assertThat(reader.submit(List.of(new UringReader.Read(pipe[0], 0, buf)), (r, s, c) -> {}))
                    .isInstanceOf(UringReader.Submit.Submitted.class);
            Libc.write(pipe[1], msg);
            await().atMost(10, TimeUnit.SECONDS).until(() -> reader.inflight() == 0);
        } finally {
            Libc.close(pipe[0]);
            Libc.close(pipe[1]);
        }
    }

    @Test
    void closedReaderRefusesBatchesAndReadErrorsComeBackAsNegativeErrno() throws Exception {
        UringReader reader = openReader(2);
        try (Arena arena = Arena.ofShared()) {
            MemorySegment buf = arena.allocate(4096, 4096);
            AtomicReference<int[]> results = new AtomicReference<>();
            CountDownLatch done = new CountDownLatch(1);
            reader.submit(List.of(new UringReader.Read(987_654, 0, buf)), (r, s, c) -> {
                results.set(r.clone());
                done.countDown();
            });
            assertThat(done.await(10, TimeUnit.SECONDS)).isTrue();
            assertThat(results.get()[0]).isEqualTo(-9); // EBADF
            reader.close();
            assertThat(reader.submit(List.of(new UringReader.Read(0, 0, buf)), (r, s, c) -> {}))
                    .isInstanceOf(UringReader.Submit.Closed.class);
        }
    }
}
