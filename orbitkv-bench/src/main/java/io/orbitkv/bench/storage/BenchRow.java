package io.orbitkv.bench.storage;

import java.util.Locale;
import java.util.Objects;

/**
 * One line of the storage benchmark table: what was measured, the subject's figure, the
 * baseline's figure, the ratio that the target applies to, and whether the target was met.
 *
 * <p>Immutable value. Every benchmark prints its rows with {@link #markdown()} on standard output,
 * so {@code bin/bench-storage} can concatenate the output of several JVMs into one table.
 *
 * @param benchmark what ran, e.g. {@code "SSD randread 256 KiB, QD 16"}
 * @param subject   the OrbitKV figure, with its unit
 * @param baseline  the baseline figure, with its unit and source
 * @param value     the figure the target applies to (a ratio, or bytes for a budget)
 * @param target    the target
 */
public record BenchRow(String benchmark, String subject, String baseline, double value, Target target) {

    /** A target: {@code value >= bound} or {@code value <= bound}. */
    public record Target(Comparison comparison, double bound, String unit) {
        public Target {
            Objects.requireNonNull(comparison, "comparison");
            Objects.requireNonNull(unit, "unit");
        }

        public static Target atLeast(double bound) {
            return new Target(Comparison.AT_LEAST, bound, "");
        }

        public static Target atMost(double bound, String unit) {
            return new Target(Comparison.AT_MOST, bound, unit);
        }

        public boolean isMetBy(double value) {
            return switch (comparison) {
                case AT_LEAST -> value >= bound;
                case AT_MOST -> value <= bound;
            };
        }

        @Override
        public String toString() {
            String bound = unit.isEmpty() ? fmt(this.bound, 2) : fmt(this.bound, 0) + " " + unit;
            return switch (comparison) {
                case AT_LEAST -> "≥ " + bound;
                case AT_MOST -> "≤ " + bound;
            };
        }
    }

    /** Direction of a target. */
    public enum Comparison { AT_LEAST, AT_MOST }

    /** Header of the table the rows belong to. */
    public static final String HEADER = """
            | benchmark | OrbitKV | baseline | ratio / value | target | met |
            | --- | ---: | ---: | ---: | --- | --- |""";

    public BenchRow {
        Objects.requireNonNull(benchmark, "benchmark");
        Objects.requireNonNull(subject, "subject");
        Objects.requireNonNull(baseline, "baseline");
        Objects.requireNonNull(target, "target");
    }

    public boolean met() {
        return target.isMetBy(value);
    }

    public String markdown() {
        String shown = target.unit().isEmpty() ? fmt(value, 3) : fmt(value, 1) + " " + target.unit();
        return "| " + benchmark + " | " + subject + " | " + baseline + " | " + shown + " | " + target + " | "
                + (met() ? "yes" : "**no**") + " |";
    }

    /** Fixed-point with {@code decimals} digits, locale-independent. */
    public static String fmt(double v, int decimals) {
        return String.format(Locale.ROOT, "%." + decimals + "f", v);
    }
}
