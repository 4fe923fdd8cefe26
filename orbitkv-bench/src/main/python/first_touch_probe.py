"""First-touch cost of a page copy into shared memory, as the clients' stores see it.

For 256 KiB and 2 MiB pages, 64 of each: a copy into a fresh memfd mapping (the pages are allocated
and their page-table entries made by the copy), the same copy again (touched), and the same two
with ``pwrite`` on the descriptor instead of the mapping. Prints the medians per page and whether
``pwrite``'s bytes are visible through the mapping. Stdlib only; about a second.

usage: python3 first_touch_probe.py
"""
import mmap, os, time, statistics
for SZ in (256 << 10, 2 << 20):
    N = 64
    src = os.urandom(SZ)
    fd = os.memfd_create("t"); os.ftruncate(fd, SZ * N)
    c, w = [], []
    for i in range(N):
        t = time.perf_counter(); os.pwrite(fd, src, i * SZ); c.append(time.perf_counter() - t)
    for i in range(N):
        t = time.perf_counter(); os.pwrite(fd, src, i * SZ); w.append(time.perf_counter() - t)
    m = mmap.mmap(fd, SZ * N, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    mv = memoryview(src)
    ok = m[0:SZ] == src
    # warm mapped copy, for reference
    for i in range(N): m[i*SZ:(i+1)*SZ] = src
    mw = []
    for i in range(N):
        t = time.perf_counter(); m[i*SZ:(i+1)*SZ] = src; mw.append(time.perf_counter() - t)
    fd2 = os.memfd_create("t2"); os.ftruncate(fd2, SZ * N)
    m2 = mmap.mmap(fd2, SZ * N, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    mc = []
    for i in range(N):
        t = time.perf_counter(); m2[i*SZ:(i+1)*SZ] = src; mc.append(time.perf_counter() - t)
    print(SZ >> 10, "KiB: pwrite cold %.3f warm %.3f ms; mapped cold %.3f warm %.3f ms; visible %s" % (
        statistics.median(c)*1e3, statistics.median(w)*1e3, statistics.median(mc)*1e3, statistics.median(mw)*1e3, ok))
