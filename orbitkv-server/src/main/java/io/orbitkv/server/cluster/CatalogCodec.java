package io.orbitkv.server.cluster;

import com.google.protobuf.ByteString;
import io.orbitkv.core.catalog.Holder;
import io.orbitkv.core.catalog.KeyLocation;
import io.orbitkv.core.catalog.Member;
import io.orbitkv.core.catalog.PushBatch;
import io.orbitkv.core.storage.residency.ResidencyEvent;
import io.orbitkv.server.cluster.proto.Absent;
import io.orbitkv.server.cluster.proto.Delta;
import io.orbitkv.server.cluster.proto.KeyResult;
import io.orbitkv.server.cluster.proto.LiveMember;
import io.orbitkv.server.cluster.proto.Medium;
import io.orbitkv.server.cluster.proto.Present;
import io.orbitkv.server.cluster.proto.PushReply;
import io.orbitkv.server.cluster.proto.PushRequest;
import io.orbitkv.server.cluster.proto.Unknown;
import io.orbitkv.state.StateKey;
import java.util.ArrayList;
import java.util.List;

/**
 * Conversions between the catalog's core values and the {@code cluster.proto} messages: the one
 * place the wire format meets {@code io.orbitkv.core.catalog}. Stateless. Malformed input (a key
 * that is not 32 bytes, an unspecified medium or result) throws {@link IllegalArgumentException},
 * which the service answers as {@code INVALID_ARGUMENT}.
 *
 * <p>Public, with the message conversions, for fuzzing and conformance tools (the reliability
 * module's {@code catalog} fuzz target drives this codec, the one the service runs).
 */
public final class CatalogCodec {

    private CatalogCodec() {
    }

    public static ByteString key(StateKey k) {
        return ByteString.copyFrom(k.toBytes());
    }

    public static StateKey key(ByteString b) {
        return StateKey.ofBytes(b.toByteArray());
    }

    static Medium medium(ResidencyEvent.Medium m) {
        return switch (m) {
            case DRAM -> Medium.DRAM;
            case SSD -> Medium.SSD;
        };
    }

    static ResidencyEvent.Medium medium(Medium m) {
        return switch (m) {
            case DRAM -> ResidencyEvent.Medium.DRAM;
            case SSD -> ResidencyEvent.Medium.SSD;
            case MEDIUM_UNSPECIFIED, UNRECOGNIZED -> throw new IllegalArgumentException("medium not set");
        };
    }

    public static PushRequest request(PushBatch b) {
        PushRequest.Builder r = PushRequest.newBuilder().setSourceNode(b.sourceNode())
                .setSourceIncarnation(b.sourceIncarnation()).setOwnerIncarnation(b.ownerIncarnation())
                .setBatch(b.batch()).setSnapshotBegin(b.snapshotBegin()).setSnapshotEnd(b.snapshotEnd())
                .setViewDigest(b.viewDigest()).setHandoffEnd(b.handoffEnd());
        for (ResidencyEvent e : b.deltas()) {
            r.addDeltas(Delta.newBuilder().setKey(key(e.key())).setMedium(medium(e.medium()))
                    .setAdded(e.kind() == ResidencyEvent.Kind.ADDED).setSequence(e.sequence())
                    .setLengthBytes(e.lengthBytes()));
        }
        return r.build();
    }

    public static PushBatch batch(PushRequest r) {
        List<ResidencyEvent> deltas = new ArrayList<>(r.getDeltasCount());
        for (Delta d : r.getDeltasList()) {
            deltas.add(new ResidencyEvent(d.getSequence(), key(d.getKey()), medium(d.getMedium()),
                    d.getAdded() ? ResidencyEvent.Kind.ADDED : ResidencyEvent.Kind.REMOVED, 0, lengthBytes(d.getLengthBytes())));
        }
        return new PushBatch(r.getSourceNode(), r.getSourceIncarnation(), r.getOwnerIncarnation(), r.getBatch(),
                r.getSnapshotBegin(), r.getSnapshotEnd(), r.getViewDigest(), deltas, r.getHandoffEnd());
    }

    public static PushReply reply(PushBatch.Reply r) {
        PushReply.Status status = switch (r.result()) {
            case APPLIED -> PushReply.Status.APPLIED;
            case NEED_SNAPSHOT -> PushReply.Status.NEED_SNAPSHOT;
            case STALE_INCARNATION -> PushReply.Status.STALE_INCARNATION;
            case WRONG_OWNER_INCARNATION -> PushReply.Status.WRONG_OWNER_INCARNATION;
        };
        return PushReply.newBuilder().setStatus(status).setOwnerIncarnation(r.ownerIncarnation()).build();
    }

    public static PushBatch.Reply reply(PushReply r) {
        PushBatch.Result result = switch (r.getStatus()) {
            case APPLIED -> PushBatch.Result.APPLIED;
            case NEED_SNAPSHOT -> PushBatch.Result.NEED_SNAPSHOT;
            case STALE_INCARNATION -> PushBatch.Result.STALE_INCARNATION;
            case WRONG_OWNER_INCARNATION -> PushBatch.Result.WRONG_OWNER_INCARNATION;
            case STATUS_UNSPECIFIED, UNRECOGNIZED -> throw new IllegalArgumentException("push status not set");
        };
        return new PushBatch.Reply(result, r.getOwnerIncarnation());
    }

    /** A wire length: negative is malformed (the caller maps it to INVALID_ARGUMENT). */
    static int lengthBytes(int wire) {
        if (wire < 0) throw new IllegalArgumentException("length_bytes must be >= 0: " + wire);
        return wire;
    }

    /** An unknown reason by name; one this node does not know (a newer peer's) reads as UNREACHABLE. */
    static KeyLocation.UnknownReason reason(String name) {
        try {
            return KeyLocation.UnknownReason.valueOf(name);
        } catch (IllegalArgumentException e) {
            return KeyLocation.UnknownReason.UNREACHABLE;
        }
    }

    public static LiveMember live(Member m) {
        return LiveMember.newBuilder().setNodeId(m.nodeId()).setIncarnation(m.incarnation()).build();
    }

    /** Members named by a lookup; the endpoint is not sent (coverage needs only id + incarnation). */
    public static Member live(LiveMember m) {
        return new Member(m.getNodeId(), "-", m.getIncarnation());
    }

    public static KeyResult result(KeyLocation loc) {
        return switch (loc) {
            case KeyLocation.Present p -> {
                Present.Builder b = Present.newBuilder();
                for (Holder h : p.holders()) {
                    b.addHolders(io.orbitkv.server.cluster.proto.Holder.newBuilder().setNodeId(h.nodeId())
                            .setIncarnation(h.incarnation()).setMedium(medium(h.medium())).setSequence(h.sequence())
                            .setLengthBytes(h.lengthBytes()));
                }
                yield KeyResult.newBuilder().setPresent(b).build();
            }
            case KeyLocation.Absent a -> KeyResult.newBuilder().setAbsent(Absent.getDefaultInstance()).build();
            case KeyLocation.Unknown u -> KeyResult.newBuilder().setUnknown(Unknown.newBuilder().setReason(u.reason().name())).build();
        };
    }

    public static KeyLocation location(KeyResult r) {
        return switch (r.getResultCase()) {
            case PRESENT -> {
                List<Holder> holders = new ArrayList<>();
                for (var h : r.getPresent().getHoldersList()) {
                    holders.add(new Holder(h.getNodeId(), h.getIncarnation(), medium(h.getMedium()), h.getSequence(),
                            lengthBytes(h.getLengthBytes())));
                }
                yield new KeyLocation.Present(holders);
            }
            case ABSENT -> new KeyLocation.Absent();
            case UNKNOWN -> new KeyLocation.Unknown(reason(r.getUnknown().getReason()));
            case RESULT_NOT_SET -> throw new IllegalArgumentException("key result not set");
        };
    }
}
