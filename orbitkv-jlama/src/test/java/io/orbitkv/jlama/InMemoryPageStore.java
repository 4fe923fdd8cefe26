package io.orbitkv.jlama;

import io.orbitkv.engine.HitSource;
import io.orbitkv.engine.KvPageStore;
import io.orbitkv.engine.PrefixLookup;
import io.orbitkv.state.StateKey;

import java.lang.foreign.Arena;
import java.lang.foreign.MemorySegment;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * A test double of the Manager: pages in a heap map, every hit "from DRAM". Lets the runner's
 * restore and publish paths be checked without a Manager process. Confined to one thread.
 */
final class InMemoryPageStore implements KvPageStore {

    final Map<StateKey, MemorySegment> pages = new HashMap<>();
    final List<long[]> prefills = new ArrayList<>();
    int leasesOut;

    @Override
    public void prefillObserved(long tokens, long nanos) {
        prefills.add(new long[] {tokens, nanos});
    }

    @Override
    public PrefixLookup lookupPrefix(List<StateKey> pageKeys, long promptTokens) {
        List<MemorySegment> images = new ArrayList<>();
        for (StateKey key : pageKeys) {
            MemorySegment image = pages.get(key);
            if (image == null) break;
            images.add(image);
        }
        if (images.isEmpty()) return new PrefixLookup.Miss("no first page");
        leasesOut++;
        return new PrefixLookup.Hit(images, HitSource.DRAM, () -> leasesOut--);
    }

    @Override
    public PublishReport publish(List<StateKey> pageKeys, long imageBytes, PageImageWriter writer) {
        int sealed = 0;
        int present = 0;
        for (int i = 0; i < pageKeys.size(); i++) {
            if (pages.containsKey(pageKeys.get(i))) {
                present++;
                continue;
            }
            MemorySegment slot = Arena.ofAuto().allocate(imageBytes);
            writer.write(i, slot);
            pages.put(pageKeys.get(i), slot);
            sealed++;
        }
        return new PublishReport(sealed, present, 0);
    }

    @Override
    public void close() {
    }
}
