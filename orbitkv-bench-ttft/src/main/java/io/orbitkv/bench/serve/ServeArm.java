package io.orbitkv.bench.serve;

/** The ways the serving benchmark's pool serves the same requests ({@code --publish} picks the OrbitKV arms). */
enum ServeArm {
    /** No cache: every prompt is prefilled whole. */
    COLD("cold"),
    /** Each engine's own bounded prompt cache ({@link EngineLocalPageStore}), not shared across the pool. */
    ENGINE_LOCAL("engine-local"),
    /**
     * Every engine connected to one OrbitKV Manager (DRAM smaller than the working set, SSD on),
     * publishing in the background ({@code OrbitKvPageStore.PublishMode.Background}).
     */
    ORBITKV("OrbitKV"),
    /** As {@link #ORBITKV}, publishing synchronously: the engine waits for the publish before its next request. */
    ORBITKV_SYNC("OrbitKV sync");

    final String label;

    ServeArm(String label) {
        this.label = label;
    }

    /** Whether this arm serves through an OrbitKV Manager. */
    boolean orbitKv() {
        return this == ORBITKV || this == ORBITKV_SYNC;
    }
}
