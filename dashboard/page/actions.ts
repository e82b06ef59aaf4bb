/**
 * The four buttons (pause, resume, promote on a standby; stop immediate on a primary), each
 * after a confirmation dialog, sent as POST /api/action with the page's token; the toast that
 * reports the answer.
 */
import { $, el } from './dom.ts';
import { TOKEN, type NodeView } from './state.ts';

let toastTimer = 0;
export function toast(text: string, error = false): void {
  const t = $('toast');
  t.textContent = text;
  t.className = `toast show${error ? ' error' : ''}`;
  clearTimeout(toastTimer);
  toastTimer = window.setTimeout(() => (t.className = 'toast'), error ? 8000 : 3000);
}

function confirmDialog(question: string): Promise<boolean> {
  const d = $('confirm') as HTMLDialogElement;
  $('confirm-text').textContent = question;
  d.showModal();
  return new Promise((resolve) => {
    d.addEventListener('close', () => resolve(d.returnValue === 'ok'), { once: true });
  });
}

/** POST /api/action's answer. */
interface ActionAnswer {
  ok?: boolean;
  message?: string;
  error?: string;
}

async function runAction(node: string, action: string, label: string): Promise<void> {
  toast(`${label} ${node}…`);
  try {
    const r = await fetch('/api/action', {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-dashboard-token': TOKEN },
      body: JSON.stringify({ action, node }),
    });
    const body = (await r.json()) as ActionAnswer;
    if (!r.ok || body.ok === false) toast(`${label} ${node} failed: ${body.error}`, true);
    else toast(String(body.message));
  } catch (e) {
    toast(`${label} ${node} failed: ${String(e)}`, true);
  }
}

function actionButton(
  node: string,
  action: string,
  label: string,
  question: string,
  danger = false,
): HTMLButtonElement {
  const onclick = async () => {
    if (await confirmDialog(question)) await runAction(node, action, label);
  };
  return el('button', { class: danger ? 'danger' : '', 'data-action': action, onclick }, label);
}

function buttonsFor(v: NodeView): HTMLButtonElement[] {
  if (v.state === 'running' && v.role === 'standby')
    return [
      actionButton(
        v.name,
        'pause',
        'Pause replay',
        `Run SELECT pg_wal_replay_pause() on ${v.name}?`,
      ),
      actionButton(
        v.name,
        'resume',
        'Resume replay',
        `Run SELECT pg_wal_replay_resume() on ${v.name}?`,
      ),
      actionButton(
        v.name,
        'promote',
        'Promote',
        `Promote ${v.name} (pg_ctl promote, waiting until it accepts writes)?`,
      ),
    ];
  if (v.state === 'running' && v.role === 'primary')
    return [
      actionButton(
        v.name,
        'stop-immediate',
        'Stop (immediate)',
        `Stop ${v.name} with pg_ctl stop -m immediate? It exits at once, without a checkpoint.`,
        true,
      ),
    ];
  return [];
}

/** The card's buttons, replaced only when the set changes (a click in progress is not lost). */
export function renderActions(card: HTMLElement, v: NodeView): void {
  const box = card.querySelector<HTMLElement>('.actions')!;
  const buttons = buttonsFor(v);
  const key = buttons.map((b) => b.dataset.action).join(',');
  if (box.dataset.key !== key) {
    box.dataset.key = key;
    box.replaceChildren(...buttons);
  }
}
