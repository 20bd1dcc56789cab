import { execFileSync } from 'node:child_process';

/**
 * File systems a test mounts (tmpfs, bind and loop mounts: this needs root with mount privileges, as CI has),
 * remembered so that `unmountAll()` (afterAll) unmounts whatever is still mounted, in reverse order.
 */

/** Mount points, in mount order. */
const mounts: string[] = [];

/** Runs a command to completion and returns its output; fails with its stderr. */
export function run(cmd: string, args: string[]): string {
  try {
    return execFileSync(cmd, args, { stdio: 'pipe', encoding: 'utf8' });
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`${cmd} ${args.join(' ')} failed: ${e.stderr || e.message}`);
  }
}

export function mount(args: string[], target: string, what: string): void {
  try {
    execFileSync('mount', [...args, target], { stdio: 'pipe', encoding: 'utf8' });
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(
      `cannot mount ${what} at ${target}: this test needs root with mount privileges (CI runs as root): ` +
        `${(e.stderr || e.message).trim()}`,
    );
  }
  mounts.push(target);
}

export function unmount(target: string): void {
  run('umount', [target]);
  const i = mounts.lastIndexOf(target);
  if (i >= 0) mounts.splice(i, 1);
}

export function unmountAll(): void {
  for (const m of mounts.splice(0).reverse()) {
    try {
      execFileSync('umount', [m], { stdio: 'pipe' });
    } catch {
      execFileSync('umount', ['-l', m], { stdio: 'pipe' });
    }
  }
}
