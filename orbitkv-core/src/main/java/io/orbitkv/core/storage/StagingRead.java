package io.orbitkv.core.storage;

import io.orbitkv.core.storage.dram.AcquireResult;
import io.orbitkv.core.storage.dram.DramTier;
import io.orbitkv.core.storage.dram.Lease;
import io.orbitkv.core.storage.dram.Reservation;
import io.orbitkv.core.storage.publish.IoOp;
import io.orbitkv.core.storage.ssd.Pin;
import io.orbitkv.core.storage.ssd.ReadResult;
import io.orbitkv.core.storage.ssd.SsdStore;
import io.orbitkv.state.StateKey;

import java.util.concurrent.CompletableFuture;
import java.util.function.Consumer;

/**
 * The backing read of one staging in the {@link StagingTable}: reads a pinned SSD extent straight
 * into a reserved DRAM slot and commits it, on the dispatcher's read lane.
 *
 * <p>Owns the staging's SSD pin and DRAM reservation until its outcome is reported. Thread model:
 * the dispatcher calls {@link #start} or {@link #drop} exactly once, on whichever thread frees a
 * submission slot; the outcome is reported where the read's future completes (an SSD worker, the
 * io_uring completion thread, or at once when the store refuses the read); {@link #abandon} is for
 * the submitter when the dispatcher refused the operation.
 *
 * <p>Invariants: the pin is released and the reservation committed or aborted exactly once,
 * whatever the read returned, before the outcome is reported, once; only a
 * {@link ReadResult.Served} read is committed, so a corrupt extent is never served.
 */
final class StagingRead implements IoOp {

    private final StateKey key;
    private final Pin pin;
    private final Reservation reservation;
    private final SsdStore ssd;
    private final DramTier dram;
    private final Consumer<StageResult> onOutcome;

    /** @param onOutcome called exactly once, with the staging's outcome, after the pin is released */
    StagingRead(StateKey key, Pin pin, Reservation reservation, SsdStore ssd, DramTier dram,
                Consumer<StageResult> onOutcome) {
        this.key = key;
        this.pin = pin;
        this.reservation = reservation;
        this.ssd = ssd;
        this.dram = dram;
        this.onOutcome = onOutcome;
    }

    @Override
    public CompletableFuture<?> start() {
        CompletableFuture<ReadResult> read;
        try {
            read = ssd.read(pin, reservation.blockSegment());
        } catch (RuntimeException e) {
            abandon(new StageResult.Miss(key, StageResult.MissReason.IO_ERROR));
            throw e;
        }
        return read.handle((result, failure) -> {
            ssd.unpin(pin);
            StageResult outcome = failure != null
                    ? aborted(new StageResult.Miss(key, StageResult.MissReason.IO_ERROR))
                    : onRead(result);
            onOutcome.accept(outcome);
            return outcome;
        });
    }

    @Override
    public void drop(DropReason reason) {
        abandon(switch (reason) {
            case CLOSED -> new StageResult.Miss(key, StageResult.MissReason.CLOSED);
            case LANE_FULL -> new StageResult.Busy(StageResult.BusyReason.READ_LANE_FULL);
        });
    }

    void abandon(StageResult outcome) {
        ssd.unpin(pin);
        onOutcome.accept(aborted(outcome));
    }

    private StageResult onRead(ReadResult result) {
        return switch (result) {
            case ReadResult.Served ignored -> switch (dram.commitAndAcquire(reservation)) {
                case Lease lease -> new StageResult.Staged(lease,
                        lease.imageId() == reservation.imageId() ? StageResult.Source.SSD_READ
                                : StageResult.Source.DRAM_HIT);
                case AcquireResult.Miss ignored2 -> new StageResult.Miss(key, StageResult.MissReason.EVICTED);
            };
            case ReadResult.Corrupt ignored -> aborted(new StageResult.Miss(key, StageResult.MissReason.CORRUPT));
            case ReadResult.Busy ignored -> aborted(new StageResult.Busy(StageResult.BusyReason.SSD_QUEUE_FULL));
            case ReadResult.Released ignored -> aborted(new StageResult.Miss(key, StageResult.MissReason.IO_ERROR));
            case ReadResult.Failed ignored -> aborted(new StageResult.Miss(key, StageResult.MissReason.IO_ERROR));
        };
    }

    private StageResult aborted(StageResult outcome) {
        dram.abort(reservation);
        return outcome;
    }
}
