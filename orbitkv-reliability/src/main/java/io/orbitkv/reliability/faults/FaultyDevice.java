package io.orbitkv.reliability.faults;

import io.orbitkv.core.storage.ssd.ExtentDevice;

import java.io.IOException;
import java.lang.foreign.MemorySegment;
import java.lang.foreign.ValueLayout;
import java.util.SplittableRandom;
import java.util.concurrent.locks.LockSupport;

/**
 * A lying, failing SSD: decorates the store's {@link ExtentDevice} and, per call, injects at most
 * one fault drawn from a seeded sequence. Owns nothing but its plan and its counter of calls.
 *
 * <p>Thread model: the store calls it from its I/O workers; the campaign runs stores with one
 * worker and waits for the device to be idle between steps, so calls arrive one at a time and in
 * an order fixed by the schedule, which is what makes a schedule reproducible from its seed.
 * Call {@code n} draws its fault from a generator seeded with {@code mix(seed, n)}, so a
 * reordering would change which call gets which fault, never the distribution.
 *
 * <p>Design note: a torn write writes the header and a prefix of the payload and then reports
 * success, as a device that lost power after acknowledging, or lies, would; the store indexes
 * the extent and only its verification on read (CRC32C) or at recovery can keep it from being
 * served. A flipped byte is applied to the bytes read, never to the source of a write: the
 * source is a leased DRAM slot that queries read too.
 */
final class FaultyDevice implements ExtentDevice {

    private final ExtentDevice device;
    private final FaultPlan plan;

    FaultyDevice(ExtentDevice device, FaultPlan plan) {
        this.device = device;
        this.plan = plan;
    }

    @Override
    public void write(int file, long offset, MemorySegment header, MemorySegment payload) throws IOException {
        SplittableRandom r = plan.nextCall(false);
        if (r == null) {
            device.write(file, offset, header, payload);
            return;
        }
        switch (r.nextInt(4)) {
            case 0 -> {
                plan.count(FaultKind.WRITE_ERROR);
                throw new IOException("injected: pwritev failed: errno 5 (EIO)");
            }
            case 1 -> {
                plan.count(FaultKind.ENOSPC);
                throw new IOException("pwritev: No space left on device");
            }
            case 2 -> {
                plan.count(FaultKind.DELAY);
                LockSupport.parkNanos(20_000 + r.nextInt(480_000));
                device.write(file, offset, header, payload);
            }
            default -> {
                long blocks = payload.byteSize() / 4096;
                if (blocks < 2) {
                    device.write(file, offset, header, payload);
                    return;
                }
                plan.count(FaultKind.TORN_WRITE);
                device.write(file, offset, header, payload.asSlice(0, 4096 * (1 + r.nextLong(blocks - 1))));
            }
        }
    }

    @Override
    public ReadBytes read(int file, long offset, MemorySegment header, MemorySegment payload) throws IOException {
        SplittableRandom r = plan.nextCall(true);
        if (r == null) return device.read(file, offset, header, payload);
        switch (r.nextInt(4)) {
            case 0 -> {
                plan.count(FaultKind.READ_ERROR);
                throw new IOException("injected: preadv failed: errno 5 (EIO)");
            }
            case 1 -> {
                plan.count(FaultKind.DELAY);
                LockSupport.parkNanos(20_000 + r.nextInt(480_000));
                return device.read(file, offset, header, payload);
            }
            case 2 -> {
                ReadBytes got = device.read(file, offset, header, payload);
                plan.count(FaultKind.SHORT_READ);
                if (r.nextInt(8) == 0) return new ReadBytes(r.nextInt(got.headerBytes() + 1), 0);
                return new ReadBytes(got.headerBytes(), r.nextInt(Math.max(1, got.payloadBytes())));
            }
            default -> {
                ReadBytes got = device.read(file, offset, header, payload);
                plan.count(FaultKind.CORRUPTION);
                // Within the first 16 KiB: inside the payload of every page the campaign publishes.
                boolean inHeader = r.nextInt(8) == 0;
                MemorySegment target = inHeader ? header : payload;
                long limit = Math.min(inHeader ? 128 : 16 * 1024, target.byteSize());
                long at = r.nextLong(limit);
                byte b = target.get(ValueLayout.JAVA_BYTE, at);
                target.set(ValueLayout.JAVA_BYTE, at, (byte) (b ^ (1 << r.nextInt(8))));
                return got;
            }
        }
    }
}
