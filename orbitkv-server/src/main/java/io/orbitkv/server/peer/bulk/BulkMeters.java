package io.orbitkv.server.peer.bulk;

/**
 * The help text of the bulk data plane's counters, one per name: the requester and the source
 * register the same names with different labels, and Prometheus wants one HELP line per family.
 */
final class BulkMeters {

    private BulkMeters() {
    }

    static String description(String name) {
        return switch (name) {
            case "orbitkv.peer.bulk.auth.failures" -> "bulk connections whose authentication failed";
            case "orbitkv.peer.bulk.malformed" -> "bulk frames refused as malformed (connection closed)";
            case "orbitkv.peer.bulk.connections.refused" -> "bulk connections refused at the connection bound";
            case "orbitkv.peer.bulk.batches" -> "page batches the requester sent, queued or refused, or fell back to the control plane";
            case "orbitkv.peer.bulk.requester.pages" -> "pages the requester asked a source for, by outcome";
            case "orbitkv.peer.bulk.pages" -> "pages the source served or refused";
            case "orbitkv.peer.bulk.bytes" -> "payload bytes moved on the bulk data plane";
            case "orbitkv.peer.bulk.requests" -> "batch requests the source served";
            case "orbitkv.peer.bulk.checksums" -> "page checksums the source computed while sending, or reused from an earlier send of the same image";
            default -> throw new IllegalArgumentException("no description for " + name);
        };
    }
}
