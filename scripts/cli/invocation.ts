/**
 * How the user ran a command, for its usage text and hints: `npm run exporter --` in a checkout,
 * `walsim exporter` from the installed package (scripts/walsim.ts says so before it loads the
 * command's module, whose usage text is built when it loads).
 *
 * Entry points: `runAsInstalled`, `invocation`, `usageIndent`.
 */
let installedBin: string | null = null;

/** The installed `bin` is running the command (call before the command's module is loaded). */
export function runAsInstalled(bin: string): void {
  installedBin = bin;
}

/** What the user typed before the command's options: `npm run predict --` or `walsim predict`. */
export function invocation(command: string): string {
  return installedBin === null ? `npm run ${command} --` : `${installedBin} ${command}`;
}

/** Spaces that align a usage text's continuation lines under the first option. */
export function usageIndent(command: string): string {
  return ' '.repeat(`usage: ${invocation(command)} `.length);
}
