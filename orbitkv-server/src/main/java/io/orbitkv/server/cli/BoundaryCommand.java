package io.orbitkv.server.cli;

import io.orbitkv.state.BoundarySelection;
import io.orbitkv.state.Coverage;
import io.orbitkv.state.RecoveryContract;
import io.orbitkv.state.Rejection;
import io.orbitkv.state.Requirement;
import io.orbitkv.state.StateGroup;
import java.io.PrintWriter;
import java.nio.file.Path;
import java.util.concurrent.Callable;
import picocli.CommandLine.Command;
import picocli.CommandLine.Option;
import picocli.CommandLine.Spec;
import picocli.CommandLine.Model.CommandSpec;

/**
 * {@code orbitkv boundary}: selects the longest legal recovery boundary for a contract and a
 * coverage, and explains every longer candidate. Stateless; one run per instance.
 *
 * <p>{@link RecoveryContract#select} walks the candidates one page at a time down from the cap, so
 * its time is linear in {@code (cap - origin) / page_tokens}, a number the caller chooses. The
 * Manager does not call it that way: its query planner first cuts the cap to the pages the QUERY
 * names. This command reports every candidate (it is for inspection), so it refuses more than
 * {@link #MAX_CANDIDATES}: about 60 MB of JSON at most, where an unchecked
 * {@code --prompt-tokens 10^12} would run for hours.
 */
@Command(name = "boundary", mixinStandardHelpOptions = true,
        description = "Select the recovery boundary for a contract and a coverage.")
final class BoundaryCommand implements Callable<Integer> {

    /** Most candidate boundaries ({@code (cap - origin) / page_tokens}) one run evaluates: 2^20. */
    static final long MAX_CANDIDATES = 1L << 20;

    @Spec
    CommandSpec spec;

    @Option(names = "--contract", required = true, paramLabel = "C.json", description = "recovery contract JSON file")
    Path contractFile;

    @Option(names = "--coverage", required = true, paramLabel = "COV.json", description = "coverage JSON file")
    Path coverageFile;

    @Option(names = "--prompt-tokens", required = true, paramLabel = "N", description = "prompt length in tokens (>= 1)")
    long promptTokens;

    @Option(names = "--origin", defaultValue = "0", paramLabel = "T",
            description = "tokens the engine already holds, a multiple of page_tokens (default 0)")
    long originTokens;

    @Option(names = "--json", description = "print one JSON object")
    boolean json;

    @Override
    public Integer call() {
        RecoveryContract contract = StateJson.contract(StateJson.parse(CliFiles.read(contractFile, "--contract"), "--contract"));
        Coverage coverage = StateJson.coverage(StateJson.parse(CliFiles.read(coverageFile, "--coverage"), "--coverage"), contract);
        if (promptTokens < 1) throw new InputException("--prompt-tokens: empty prompt (need at least 1 token): " + promptTokens);
        if (originTokens < 0 || originTokens % contract.pageTokens() != 0) {
            throw new InputException("--origin must be a non-negative multiple of page_tokens "
                    + contract.pageTokens() + ": " + originTokens);
        }
        long candidates = Math.max(0, contract.capTokens(promptTokens) - originTokens) / contract.pageTokens();
        if (candidates > MAX_CANDIDATES) {
            throw new InputException("--prompt-tokens " + promptTokens + " gives " + candidates
                    + " candidate boundaries above the origin, more than " + MAX_CANDIDATES);
        }
        BoundarySelection selection = contract.select(coverage, promptTokens, originTokens, Integer.MAX_VALUE);
        PrintWriter out = spec.commandLine().getOut();
        if (json) {
            out.println(StateJson.selection(selection));
            return 0;
        }
        switch (selection) {
            case BoundarySelection.Hit h -> out.println("boundary " + h.boundaryTokens() + " (hit)");
            case BoundarySelection.NoHit n ->
                    out.println("boundary " + n.originTokens() + " (no hit: compute from the origin)");
        }
        if (selection.hit()) {
            out.println("required:");
            for (Requirement r : selection.required()) {
                String kind = contract.group(r.groupId()).map(StateGroup::kind).orElseThrow();
                String what = switch (r) {
                    case Requirement.Pages p -> "pages " + String.join(" ", p.ranges().stream().map(Object::toString).toList());
                    case Requirement.Checkpoint c -> "checkpoint at token " + c.boundaryTokens();
                };
                out.println("  group " + r.groupId() + " (" + kind + "): " + what);
            }
        }
        out.println("rejected longer candidates: " + selection.rejectedCount());
        for (Rejection r : selection.rejected()) {
            out.println("  t=" + r.boundaryTokens() + " group " + r.groupId() + ": " + r.reason().describe());
        }
        return 0;
    }
}
