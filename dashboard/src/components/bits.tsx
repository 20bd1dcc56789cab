import type { ComponentChildren } from 'preact';

/** Small pieces every page uses. */

export function ErrorLine({ error }: { error: string | undefined }) {
  if (!error) return null;
  return (
    <p class="error" role="alert">
      {error}
    </p>
  );
}

export function Badge({ kind, children }: { kind: string; children: ComponentChildren }) {
  return <span class={`badge badge-${kind}`}>{children}</span>;
}

export function Section({
  title,
  actions,
  children,
  label,
}: {
  title: string;
  actions?: ComponentChildren;
  children: ComponentChildren;
  label?: string;
}) {
  return (
    <section class="panel" aria-label={label ?? title}>
      <header class="panel-head">
        <h2>{title}</h2>
        {actions ? <div class="panel-actions">{actions}</div> : null}
      </header>
      {children}
    </section>
  );
}

export function Loading({ what }: { what: string }) {
  return (
    <p class="muted" aria-busy="true">
      Loading {what}…
    </p>
  );
}

/** Command statuses as the stream reports them, with the final ones marked. */
const FINAL_OK = new Set(['succeeded']);
const FINAL_BAD = new Set(['failed', 'rejected', 'expired', 'cancelled']);

export function CommandStatusBadge({ status }: { status: string }) {
  const kind = FINAL_OK.has(status) ? 'ok' : FINAL_BAD.has(status) ? 'bad' : 'pending';
  return (
    <span class={`badge badge-${kind}`} data-command-status={status}>
      {status}
    </span>
  );
}
