package io.orbitkv.bench.serve;

/** The three ways the serving benchmark's pool serves the same requests. */
enum ServeArm {
    /** No cache: every prompt is prefilled whole. */
    COLD("cold"),
    /** Each engine's own bounded prompt cache ({@link EngineLocalPageStore}), not shared across the pool. */
    ENGINE_LOCAL("engine-local"),
    /** Every engine connected to one OrbitKV Manager (DRAM smaller than the working set, SSD on). */
    ORBITKV("OrbitKV");

    final String label;

    ServeArm(String label) {
        this.label = label;
    }
}
