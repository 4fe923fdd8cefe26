package io.orbitkv.reliability.faults;

import io.orbitkv.state.protocol.CompletionEvent;
import io.orbitkv.state.protocol.ErrorCode;
import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

/**
 * The RESTORE step of a {@link Schedule}, after its QUERY for ENGINE_RESTORE settled as a hit:
 * every RESIDENT page is restored into the client's registered region (each to the destination
 * page of its index), in one of three variants. Into a sound region the destination pages are
 * zeroed first and RESTORE_DONE must say OK with every byte right ({@link ReferenceModel}); into a
 * region whose file was truncated first the copy must fault (RESTORE_DONE FAILED NOT_FOUND, or the
 * RESTORE refused NOT_FOUND) and a later RESTORE into it must be refused NOT_FOUND; or the client
 * dies with its copies in flight, which the schedule then reconnects.
 *
 * <p>Owns the numbering of region files under {@code regions}: a connection registers its region
 * on its first RESTORE, and again after one was truncated. Thread model: the schedule's driver
 * thread only; draws nothing from the schedule's random source, so a seed replays the same steps.
 */
final class RegionRestores {

    private final ReferenceModel model;
    private final FaultPlan plan;
    private final Path regions;
    private int regionFiles;

    RegionRestores(ReferenceModel model, FaultPlan plan, Path regions) {
        this.model = model;
        this.plan = plan;
        this.regions = regions;
    }

    /** Each RESIDENT page of {@code hit} to the destination page of its index. */
    private static List<Request.RestorePage> mapping(Reply.QueryResult hit) {
        List<Request.RestorePage> mapping = new ArrayList<>();
        for (Reply.GroupResult g : hit.groups()) {
            for (Reply.Span s : g.spans()) {
                for (int k = 0; k < s.pages().size(); k++) {
                    long page = s.firstPage() + k;
                    mapping.add(new Request.RestorePage(g.groupId(), page, (int) page));
                }
            }
        }
        return mapping;
    }

    /** The client's region, registered now if it has none. */
    private int region(SimClient c) {
        if (c.region() == null) c.registerRegion(nextRegionFile());
        return c.region().id();
    }

    /** Truncates the region's file, restores into it (which must fault), releases, registers a new region. */
    void intoTruncatedRegion(SimClient c, long op, Reply.QueryResult hit) {
        List<Request.RestorePage> mapping = mapping(hit);
        int region = region(c);
        plan.count(FaultKind.REGION_TRUNCATE);
        c.truncateRegion();
        Reply r = c.send(new Request.Restore(op, region, mapping));
        if (r instanceof Reply.RestoreAccepted) {
            Reply.Outcome o = restoreDone(c, op);
            if (!(o instanceof Reply.Failed(ErrorCode code) && code == ErrorCode.NOT_FOUND)) {
                throw new Violation("RESTORE op" + op + " into a truncated region ended " + o
                        + ", not FAILED NOT_FOUND");
            }
            Reply again = c.send(new Request.Restore(op, region, mapping));
            if (!(again instanceof Reply.Error(ErrorCode code2, String m2) && code2 == ErrorCode.NOT_FOUND)) {
                throw new Violation("a RESTORE into an unusable region answered " + again + ", not NOT_FOUND");
            }
        } else if (!(r instanceof Reply.Error(ErrorCode code, String m) && code == ErrorCode.NOT_FOUND)) {
            throw new Violation("RESTORE op" + op + " into a truncated region answered " + r);
        }
        c.send(new Request.Release(op));
        c.registerRegion(nextRegionFile());
    }

    /** Sends the RESTORE; the caller then kills the client with its copies in flight. */
    void beforeDeath(SimClient c, long op, Reply.QueryResult hit) {
        List<Request.RestorePage> mapping = mapping(hit);
        Reply r = c.send(new Request.Restore(op, region(c), mapping));
        if (r instanceof Reply.RestoreAccepted) plan.count(FaultKind.RESTORE_DEATH);
    }

    /**
     * Zeroes the destination pages and restores into them: OK with every byte right, or the
     * RESTORE refused BUSY. The caller releases {@code op} or holds it.
     */
    void intoSoundRegion(SimClient c, long op, long prompt, Reply.QueryResult hit) {
        List<Request.RestorePage> mapping = mapping(hit);
        int region = region(c);
        for (Request.RestorePage p : mapping) c.clearDestination(p.destinationPage());
        Reply r = c.send(new Request.Restore(op, region, mapping));
        if (r instanceof Reply.RestoreAccepted) {
            Reply.Outcome o = restoreDone(c, op);
            if (o != Reply.Settled.OK) throw new Violation("RESTORE op" + op + " into a sound region ended " + o);
            model.checkRestored(c, prompt, mapping);
        } else if (!(r instanceof Reply.Error(ErrorCode code, String m) && code == ErrorCode.BUSY)) {
            throw new Violation("RESTORE op" + op + " of a FINAL hit answered " + r);
        }
    }

    private Path nextRegionFile() {
        return regions.resolve("r" + regionFiles++);
    }

    private static Reply.Outcome restoreDone(SimClient c, long op) {
        return c.awaitEvent(op, CompletionEvent.RESTORE_DONE, Schedule.STEP_TIMEOUT_NANOS)
                .orElseThrow(() -> new Violation("RESTORE op" + op + " never completed"))
                .outcome();
    }
}
