package io.orbitkv.reliability.faults;

import io.orbitkv.state.protocol.Reply;
import io.orbitkv.state.protocol.Request;

import java.util.Arrays;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * The reference model of one {@link Schedule} and the checks of what the Managers answer against
 * it. The model is the set of pages SEALED (or DISCARDED: already present) per namespace, on
 * either Manager. After every query, every RESIDENT page must hold exactly the bytes its
 * namespace's publisher wrote for it ({@link SimClient#image}) and must be in the model: a wrong
 * byte, a page served to another namespace, or a hit on a page never sealed fails the schedule;
 * every page a RESTORE reported copied must hold those bytes in the region.
 *
 * <p>Thread model: the schedule's driver thread only. A failed check throws
 * {@link Violation} with what and where; the campaign adds the seed.
 */
final class ReferenceModel {

    /** Per namespace index, {@code prompt * 1000 + page} of every page sealed. */
    private final List<Set<Long>> sealed = List.of(new HashSet<>(), new HashSet<>());

    /** Page {@code page} of {@code prompt} is sealed in namespace {@code namespaceIndex}. */
    void sealed(int namespaceIndex, long prompt, long page) {
        sealed.get(namespaceIndex).add(prompt * 1000 + page);
    }

    /** The check of one FINAL result of a query of {@code pages} pages of {@code prompt} on {@code c}. */
    void checkQuery(SimClient c, long prompt, int pages, Reply.QueryResult r) {
        if (r.boundaryTokens() > (long) pages * SimManager.PAGE_TOKENS) {
            throw new Violation("boundary " + r.boundaryTokens() + " past the prompt's " + pages + " pages");
        }
        if (!r.hit()) return;
        Set<Long> model = sealed.get(c.namespaceIndex);
        for (Reply.GroupResult g : r.groups()) {
            for (Reply.Span s : g.spans()) {
                for (int k = 0; k < s.pages().size(); k++) {
                    long page = s.firstPage() + k;
                    if (!(s.pages().get(k) instanceof Reply.Resident(Reply.Lease lease))) {
                        throw new Violation("a FINAL hit with an unleased page " + page);
                    }
                    if (!model.contains(prompt * 1000 + page)) {
                        throw new Violation("hit on page " + page + " of prompt " + prompt
                                + " never sealed in namespace " + c.namespaceIndex);
                    }
                    if (!Arrays.equals(c.read(lease), SimClient.image(c.namespaceIndex, prompt, page))) {
                        throw new Violation("WRONG BYTES served for page " + page + " of prompt " + prompt
                                + " in namespace " + c.namespaceIndex);
                    }
                }
            }
        }
    }

    /** The check of a RESTORE that completed OK: every destination page holds its source page's bytes. */
    void checkRestored(SimClient c, long prompt, List<Request.RestorePage> mapping) {
        for (Request.RestorePage p : mapping) {
            if (!Arrays.equals(c.destination(p.destinationPage(), SimManager.PAGE_BYTES),
                    SimClient.image(c.namespaceIndex, prompt, p.sourcePage()))) {
                throw new Violation("WRONG BYTES restored for page " + p.sourcePage() + " of prompt " + prompt
                        + " in namespace " + c.namespaceIndex);
            }
        }
    }
}
